"""A Mosquitto deployment's password file (made by `mosquitto_passwd`) and
ACL file, used by Ferry as they are: the same clients get the same
deliveries from Ferry and from Debian's Mosquitto, given the same two
files."""

import getpass
import re
import subprocess

import pytest

from conftest import MOSQUITTO_BIN, Broker, free_port

pytestmark = pytest.mark.ferry_only  # it starts both brokers itself

USERS = {"alice": "alice-pw", "operator": "operator-pw"}
ACL = """\
# Mosquitto's format: a user's `topic` lines, then everyone's `pattern`s.
user alice
topic readwrite sensors/alice/#
topic deny sensors/alice/secret
topic write cmd/+

user operator
topic readwrite #

pattern read devices/%u/in
pattern write devices/%c/out
"""


@pytest.fixture(scope="module")
def mosquitto_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mosquitto-files")
    passwd = d / "passwd"
    for user, password in USERS.items():
        subprocess.run(["mosquitto_passwd", "-b", *(["-c"] if not passwd.exists() else []),
                        str(passwd), user, password], check=True, capture_output=True, timeout=10)
    acl = d / "acl"
    acl.write_text(ACL)
    return passwd, acl


def _mosquitto(tmp_path, passwd, acl) -> Broker:
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("\n".join([
        f"listener {port} 127.0.0.1", "allow_anonymous false", f"password_file {passwd}",
        f"acl_file {acl}", "log_dest stderr", "persistence false",
        f"user {getpass.getuser()}", ""]))
    b = Broker("mosquitto", [MOSQUITTO_BIN, "-c", str(conf)], tmp_path,
               {"ready": re.compile(r"mosquitto version \S+ running")})
    b.port = port
    return b.start()


@pytest.fixture(params=["ferry", "mosquitto"])
def guarded(request, broker_factory, mosquitto_files, tmp_path):
    passwd, acl = mosquitto_files
    if request.param == "mosquitto":
        b = _mosquitto(tmp_path, passwd, acl)
        yield b
        b.stop()
    else:
        yield broker_factory({"auth": {"allow_anonymous": False, "password_file": str(passwd),
                                       "acl_file": str(acl)}})


def _login(b, user, client_id):
    c = b.client(4, client_id, connect=False)
    c.c.username_pw_set(user, USERS[user])
    assert c.connect().reason == 0
    return c


def _received_until(c, marker):
    topics = []
    while not topics or topics[-1] != marker:
        topics.append(c.get().topic)
    return topics


def test_the_same_files_give_the_same_deliveries(guarded):
    operator = _login(guarded, "operator", "operator-c")
    operator.subscribe("#", qos=1)
    alice = _login(guarded, "alice", "alice-c")
    alice.subscribe("#", qos=1)
    # Granted, though nothing under it may be read: both brokers check
    # what a subscription delivers, not the SUBSCRIBE.
    assert alice.subscribe("other/#", qos=1) == [1]

    # What alice may publish: her sensors but the secret one, any cmd/+,
    # and, by the pattern, her client id's out topic.
    for topic in ["sensors/alice/temp", "sensors/alice/secret", "cmd/reboot",
                  "sensors/bob/temp", "devices/alice-c/out", "devices/alice/out", "other/x"]:
        alice.publish(topic, b"from alice", qos=1)
    alice.publish("sensors/alice/end", b"marker", qos=1)
    assert _received_until(operator, "sensors/alice/end") == [
        "sensors/alice/temp", "cmd/reboot", "devices/alice-c/out", "sensors/alice/end"]

    # What alice may receive, through a subscription to everything.
    for topic in ["sensors/alice/temp", "sensors/alice/secret", "devices/alice/in",
                  "devices/bob/in", "cmd/reboot", "other/x"]:
        operator.publish(topic, b"for alice", qos=1)
    operator.publish("sensors/alice/end2", b"marker", qos=1)
    # Her own publishes she may read came back to her first.
    assert _received_until(alice, "sensors/alice/end2") == [
        "sensors/alice/temp", "sensors/alice/end",
        "sensors/alice/temp", "devices/alice/in", "sensors/alice/end2"]
