"""A real Mosquitto bridging into Ferry, as edge Mosquittos do into a
cloud broker. With `bridge_protocol_version mqttv311` and `try_private`
(Mosquitto's default) its CONNECT sets bit 7 of the protocol level, and
the broker gives its subscriptions No Local and Retain As Published: a
bridge with `topic ... both` must not get its own messages back (they
would loop between the two brokers), and retained messages must stay
retained on the far side."""

import getpass
import re

import pytest

from conftest import MOSQUITTO_BIN, Broker, free_port
from helpers import expect_nothing

pytestmark = pytest.mark.ferry_only


@pytest.fixture
def edge_mosquitto(broker, tmp_path):
    """Debian's Mosquitto with a bridge to `broker` for `br/#`, both ways,
    once its subscription on Ferry is acknowledged."""
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("\n".join([
        f"listener {port} 127.0.0.1", "allow_anonymous true", "log_dest stderr",
        "log_type all", "persistence false", f"user {getpass.getuser()}",
        "connection ferry", f"address 127.0.0.1:{broker.port}", "topic br/# both 1",
        "bridge_protocol_version mqttv311", "try_private true", "cleansession true",
        "restart_timeout 1", ""]))
    wait = {"ready": re.compile(r"mosquitto version \S+ running")}
    edge = Broker("mosquitto", [MOSQUITTO_BIN, "-c", str(conf)], tmp_path, wait)
    edge.port = port
    edge.start()
    edge.wait_log(r"Received SUBACK", timeout=10)
    yield edge
    if edge.proc.poll() is None:
        edge.proc.terminate()
        edge.proc.wait(10)


def test_a_mosquitto_bridge_is_accepted_as_a_bridge(broker, edge_mosquitto):
    assert not [line for line in edge_mosquitto.log_lines()
                if "unacceptable protocol version" in line]
    at_edge = edge_mosquitto.client(4, "edge-sub")
    at_edge.subscribe("br/#", qos=1)
    in_cloud = broker.client(4, "cloud-sub")
    in_cloud.subscribe("br/#", qos=1)

    # Up: once at the edge, once in the cloud, and not back to the edge,
    # where Mosquitto would publish it again.
    edge_mosquitto.client(4, "edge-pub").publish("br/up", b"from the edge", qos=1)
    assert in_cloud.get().payload == b"from the edge"
    assert at_edge.get().payload == b"from the edge"
    expect_nothing(at_edge, 0.5)
    expect_nothing(in_cloud, 0.1)

    # Down, retained: it reaches the edge with its retained flag, so the
    # edge retains it for its own later subscribers (its live copy to one
    # already there has the flag cleared, as 3.1.1 says).
    broker.client(4, "cloud-pub").publish("br/state", b"on", qos=1, retain=True)
    m = at_edge.get()
    assert (m.topic, m.payload, m.retain) == ("br/state", b"on", False)
    later = edge_mosquitto.client(4, "edge-later")
    later.subscribe("br/state", qos=1)
    m = later.get()
    assert (m.topic, m.payload, m.retain) == ("br/state", b"on", True)
