"""Interoperability with the Mosquitto command line clients."""

import subprocess
import threading

import pytest

from helpers import TIMEOUT

PROTOCOLS = [pytest.param("mqttv311", id="v311"), pytest.param("mqttv5", id="v5")]
FMT = "MSG|%t|%q|%r|%p"


class Sub:
    """mosquitto_sub -d -C 1 -W 5; ready once its SUBACK is printed."""

    def __init__(self, broker, topic, qos, proto, extra=()):
        # stdbuf: line-buffered stdout, so the SUBACK line arrives in time
        self.proc = subprocess.Popen(
            ["stdbuf", "-oL", "mosquitto_sub", "-h", broker.host, "-p", str(broker.port), "-V", proto,
             "-t", topic, "-q", str(qos), "-C", "1", "-W", "5", "-d", "-F", FMT,
             "-i", f"msub-{proto}-{qos}", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.subscribed = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if "received SUBACK" in line:
                self.subscribed.set()

    def wait_subscribed(self):
        assert self.subscribed.wait(TIMEOUT), f"mosquitto_sub never subscribed: {self.lines}"

    def result(self):
        rc = self.proc.wait(10)
        self.thread.join(5)
        msgs = [l for l in self.lines if l.startswith("MSG|")]
        return rc, msgs


def pub(broker, topic, payload, qos, proto, *extra):
    p = subprocess.run(
        ["mosquitto_pub", "-h", broker.host, "-p", str(broker.port), "-V", proto,
         "-t", topic, "-m", payload, "-q", str(qos), "-i", f"mpub-{proto}-{qos}", *extra],
        capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("proto", PROTOCOLS)
@pytest.mark.parametrize("qos", [1, 2])
def test_mosquitto_pub_to_mosquitto_sub(broker, proto, qos):
    s = Sub(broker, "interop/t", qos, proto)
    s.wait_subscribed()
    pub(broker, "interop/t", f"hello {proto} q{qos}", qos, proto)
    rc, msgs = s.result()
    assert rc == 0, s.lines
    assert msgs == [f"MSG|interop/t|{qos}|0|hello {proto} q{qos}"]


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_mosquitto_retained(broker, proto):
    pub(broker, "interop/ret", "kept", 1, proto, "-r")
    s = Sub(broker, "interop/#", 1, proto)
    rc, msgs = s.result()
    assert rc == 0, s.lines
    assert msgs == ["MSG|interop/ret|1|1|kept"]


@pytest.mark.parametrize("proto", PROTOCOLS)
def test_mosquitto_pub_to_paho(broker, proto):
    c = broker.client(5 if proto == "mqttv5" else 4, "paho-interop")
    c.subscribe("interop/p", qos=2)
    pub(broker, "interop/p", "to paho", 2, proto)
    m = c.get()
    assert (m.topic, m.payload, m.qos) == ("interop/p", b"to paho", 2)
