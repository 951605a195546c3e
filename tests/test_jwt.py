"""JWT as the MQTT password (issue 5), and the choice of methods and of
anonymous access per listener. Tokens are made with PyJWT; the refusal
codes are read with raw clients in both protocol versions."""

import re
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import rawmqtt


pytestmark = pytest.mark.ferry_only  # Ferry's [auth.jwt] and [[listener]] keys

SECRET = "a-shared-secret-of-at-least-32-bytes!"
AUDIENCE = "ferry"
ISSUER = "https://issuer.test"
# CONNACK codes: 3.1.1 return codes and their MQTT 5 reason codes
BAD_CREDENTIALS = {4: 0x04, 5: 0x86}
NOT_AUTHORIZED = {4: 0x05, 5: 0x87}
ACL = """
[[rule]]
permission = "allow"
action = "subscribe"
group = "operators"
topics = ["ops/#"]

[[rule]]
permission = "allow"
action = "all"
topics = ["devices/%u/#"]
"""


@pytest.fixture(scope="module")
def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwt_broker(broker_factory, rsa_key, tmp_path):
    secret = tmp_path / "jwt.secret"
    secret.write_text(SECRET + "\n")
    public = tmp_path / "jwt.pub.pem"
    public.write_bytes(rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    acl = tmp_path / "acl.toml"
    acl.write_text(ACL)
    config = {
        "auth": {
            "allow_anonymous": False,
            "acl_file": str(acl),
            "jwt": {"secret_file": str(secret), "public_key_files": [str(public)],
                    "audience": AUDIENCE, "issuer": ISSUER},
        },
        # a second listener that lets anonymous clients in, beside the strict shorthand one
        "listener": [{"name": "open", "protocol": "mqtt", "bind": "127.0.0.1:0",
                      "allow_anonymous": True}],
    }
    wait = {"open": re.compile(r"listening on mqtt://(127\.0\.0\.1):(\d+) listener=open\b")}
    return broker_factory(config, wait=wait)


def token(key=SECRET, algorithm="HS256", **claims):
    now = int(time.time())
    body = {"sub": "sensor-7", "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 600}
    body.update(claims)
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, algorithm=algorithm)


def _connack(b, version, username=None, password=None, port=None):
    return b.connack(version, username, password, port)


@pytest.mark.parametrize("version", [4, 5], ids=["v311", "v5"])
def test_tokens_are_verified(jwt_broker, rsa_key, version):
    b = jwt_broker
    now = int(time.time())
    # MQTT 3.1.1 has no password without a user name (§3.1.2.9)
    user = None if version == 5 else "sensor-7"
    assert _connack(b, version, user, token()) == 0
    assert _connack(b, version, "sensor-7", token()) == 0
    assert _connack(b, version, user, token(rsa_key, "RS256")) == 0
    refused = {
        "expired": token(exp=now - 120),
        "not yet valid": token(nbf=now + 600),
        "wrong signature": token("another-secret-that-is-long-enough!!"),
        "wrong audience": token(aud="someone-else"),
        "wrong issuer": token(iss="https://elsewhere.test"),
        "no expiry": token(exp=None),
        "RS256 by an unknown key": token(
            rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"),
    }
    for why, bad in refused.items():
        assert _connack(b, version, user, bad) == BAD_CREDENTIALS[version], why
    # a user name beside the token must be the one it names
    assert _connack(b, version, "someone-else", token()) == BAD_CREDENTIALS[version]


def test_anonymous_access_is_decided_per_listener(jwt_broker):
    b = jwt_broker
    for version in (4, 5):
        assert _connack(b, version) == NOT_AUTHORIZED[version]
        assert _connack(b, version, port=b.ports["open"]) == 0
    # the log says why, and never holds the token
    secret_token = token(exp=int(time.time()) - 120)
    assert _connack(b, 5, password=secret_token) == 0x86
    b.wait_log(r"bad user name, password or token")
    assert secret_token not in "\n".join(b.log_lines())


def test_claims_name_the_user_and_groups_for_acls(jwt_broker):
    b = jwt_broker
    operator = b.client(5, "jwt-operator", connect=False)
    operator.c.username_pw_set("op-1", token(sub="op-1", groups=["operators"]))
    assert operator.connect().reason == 0
    assert operator.subscribe("ops/alerts", qos=1) == [1]
    assert operator.subscribe("devices/op-1/#", qos=1) == [1]
    assert operator.publish("devices/op-1/state", b"up", qos=1) == 0
    assert operator.get().payload == b"up"
    assert operator.publish("devices/other/state", b"spoof", qos=1) == 0x87

    device = b.client(5, "jwt-device", connect=False)
    device.c.username_pw_set("device-9", token(sub="device-9", groups="sensors"))
    assert device.connect().reason == 0
    assert device.subscribe("ops/alerts", qos=1) == [0x87]


@pytest.mark.parametrize("version", [4, 5], ids=["v311", "v5"])
def test_a_client_is_disconnected_when_its_token_expires(broker_factory, tmp_path, version):
    secret = tmp_path / "jwt.secret"
    secret.write_text(SECRET + "\n")
    b = broker_factory({"auth": {"allow_anonymous": False, "jwt": {
        "secret_file": str(secret), "audience": AUDIENCE, "issuer": ISSUER, "leeway_secs": 0}}})
    user = None if version == 5 else "sensor-7"
    now = int(time.time())
    lasting = b.raw(version)
    lasting.connect("lasting", username=user, password=token(exp=now + 600).encode())
    expiring = b.raw(version)
    expiring.connect("expiring", username=user, password=token(exp=now + 3).encode())
    expiring.ping()  # at least two seconds of the token are left
    packets = expiring.read_until_closed(timeout=10)
    # MQTT 5 is told why (0xA0, Maximum connect time); 3.1.1 has no
    # DISCONNECT from the server, and the connection just closes.
    assert [p.reason for p in packets if p.type == rawmqtt.DISCONNECT] == (
        [0xA0] if version == 5 else [])
    b.wait_log(r"closing connection: credentials expired")
    lasting.ping()  # a client whose token holds stays
