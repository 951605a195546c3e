"""Password authentication (issue 5): `[auth] password_file` made with
`ferry passwd`, `allow_anonymous`, the CONNACK codes of each refusal in
both protocol versions, failed logins limited per address, and secrets kept
out of the log."""

import subprocess

import pytest

from conftest import make_password_file

pytestmark = pytest.mark.ferry_only  # Ferry's config keys and `ferry passwd`

USERS = {"sensor-1": "s3cret-one", "sensor-2": "s3cret-two"}
# CONNACK codes: 3.1.1 return codes and their MQTT 5 reason codes
BAD_CREDENTIALS = {4: 0x04, 5: 0x86}
NOT_AUTHORIZED = {4: 0x05, 5: 0x87}
RATE_EXCEEDED = 0x9F


@pytest.fixture(scope="module")
def password_file(tmp_path_factory):
    return make_password_file(tmp_path_factory.mktemp("auth") / "passwd", USERS)


def _broker(broker_factory, password_file, allow_anonymous):
    return broker_factory({"auth": {"password_file": str(password_file),
                                    "allow_anonymous": allow_anonymous}})


def _connack(b, version, username=None, password=None):
    return b.connack(version, username, password)


@pytest.mark.parametrize("version", [4, 5], ids=["v311", "v5"])
def test_passwords_decide_with_the_right_code_in_each_version(broker_factory, password_file,
                                                              version):
    b = _broker(broker_factory, password_file, allow_anonymous=False)
    assert _connack(b, version, "sensor-1", "s3cret-one") == 0
    assert _connack(b, version, "sensor-2", "s3cret-two") == 0
    assert _connack(b, version, "sensor-1", "s3cret-two") == BAD_CREDENTIALS[version]
    assert _connack(b, version, "nobody", "s3cret-one") == BAD_CREDENTIALS[version]
    assert _connack(b, version, "sensor-1") == BAD_CREDENTIALS[version]
    assert _connack(b, version) == NOT_AUTHORIZED[version]


@pytest.mark.parametrize("algorithm", ["sha512-pbkdf2", "sha512"])
def test_a_mosquitto_password_file_works_as_it_is(broker_factory, tmp_path, algorithm):
    """Made by Debian's `mosquitto_passwd`, in its default format
    (`$7$`, PBKDF2-SHA-512) and its older one (`$6$`, salted SHA-512)."""
    path = tmp_path / "mosquitto.passwd"
    for user, password in USERS.items():
        subprocess.run(["mosquitto_passwd", "-H", algorithm, "-b",
                        *(["-c"] if not path.exists() else []), str(path), user, password],
                       check=True, capture_output=True, timeout=10)
    assert path.read_text().count("$7$" if algorithm == "sha512-pbkdf2" else "$6$") == 2
    b = _broker(broker_factory, path, allow_anonymous=False)
    for version in (4, 5):
        assert _connack(b, version, "sensor-1", "s3cret-one") == 0
        assert _connack(b, version, "sensor-2", "s3cret-two") == 0
        assert _connack(b, version, "sensor-1", "s3cret-two") == BAD_CREDENTIALS[version]


def test_anonymous_clients_beside_password_users(broker_factory, password_file):
    b = _broker(broker_factory, password_file, allow_anonymous=True)
    assert _connack(b, 5) == 0
    assert _connack(b, 5, "sensor-1", "s3cret-one") == 0
    assert _connack(b, 5, "sensor-1", "wrong") == BAD_CREDENTIALS[5]


def test_real_clients_log_in_and_are_refused(broker_factory, password_file):
    b = _broker(broker_factory, password_file, allow_anonymous=False)
    c = b.client(5, "auth-paho", connect=False)
    c.c.username_pw_set("sensor-2", "s3cret-two")
    assert c.connect().reason == 0
    assert c.subscribe("auth/t", qos=1) == [1]

    def pub(*credentials):
        return subprocess.run(["mosquitto_pub", "-h", b.host, "-p", str(b.port), "-V", "mqttv311",
                               "-t", "auth/t", "-q", "1", "-m", "hello", *credentials],
                              capture_output=True, text=True, timeout=10)

    ok = pub("-u", "sensor-1", "-P", "s3cret-one")
    assert ok.returncode == 0, ok.stderr
    assert c.get().payload == b"hello"
    refused = pub("-u", "sensor-1", "-P", "nope")
    assert refused.returncode != 0
    assert "refused" in refused.stderr.lower(), refused.stderr


def test_failed_logins_are_limited_per_address_and_never_logged(broker_factory, password_file):
    b = _broker(broker_factory, password_file, allow_anonymous=False)
    secret = "hunter2-guess"
    # ten wrong guesses in a burst, then the address is held back (one
    # failure is forgiven per second, so a slow machine takes a few more)
    codes = []
    while RATE_EXCEEDED not in codes and len(codes) < 30:
        codes.append(_connack(b, 5, "sensor-1", secret))
    assert codes[-1] == RATE_EXCEEDED, codes
    assert len(codes) > 10 and set(codes[:-1]) == {BAD_CREDENTIALS[5]}, codes
    # held back, even the right password is not looked at
    assert _connack(b, 5, "sensor-1", "s3cret-one") == RATE_EXCEEDED
    refused = b.wait_log(r"too many failed logins")
    assert "sensor-1" in refused
    log = "\n".join(b.log_lines())
    assert "bad user name, password or token" in log
    for password in (secret, "s3cret-one"):
        assert password not in log, "a password in the log"
