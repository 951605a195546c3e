"""TLS listeners (issue 5): MQTT over TLS, mutual TLS with the device
identity taken from the client certificate, secure WebSocket, HTTPS, and
certificate reload on SIGHUP. Clients: paho-mqtt, mosquitto_pub and
Python's ssl module, each verifying the broker's certificate."""

import ipaddress
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import urllib.request

import pytest
from cryptography import x509

from helpers import MqttClient
from pki import Authority, make_pki

pytestmark = pytest.mark.ferry_only  # Ferry's [[listener]] and [auth] keys

HOST = "127.0.0.1"
DEVICE_URI = "spiffe://ferry.test/device-one"
ACL = """
[[rule]]
permission = "allow"
action = "all"
topics = ["devices/%u/#"]

[[rule]]
permission = "allow"
action = "subscribe"
anonymous = true
topics = ["devices/#"]
"""


def _listening(scheme: str, name: str):
    return re.compile(rf"listening on {scheme}://(127\.0\.0\.1):(\d+)\S* listener={name}\b")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def secure(broker_factory, pki, tmp_path):
    acl = tmp_path / "acl.toml"
    acl.write_text(ACL)
    # this broker's own copy of its certificate, which a test may replace
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    cert.write_bytes(pki.server.cert.read_bytes())
    key.write_bytes(pki.server.key.read_bytes())
    server = {"cert_file": str(cert), "key_file": str(key)}
    mutual = {**server, "client_ca_file": str(pki.ca)}
    config = {
        "auth": {"acl_file": str(acl)},
        "listener": [
            {"name": "tls", "protocol": "mqtt", "bind": "127.0.0.1:0", "tls": server},
            {"name": "mtls", "protocol": "mqtt", "bind": "127.0.0.1:0", "tls": mutual,
             "allow_anonymous": False, "auth_methods": ["certificate"]},
            {"name": "mtls-uri", "protocol": "mqtt", "bind": "127.0.0.1:0",
             "allow_anonymous": False,
             "tls": {**mutual, "identity_from": "san_uri", "require_client_cert": False,
                     "identity_as": "username_and_client_id"}},
            {"name": "wss", "protocol": "ws", "bind": "127.0.0.1:0", "tls": server},
            {"name": "https", "protocol": "http", "bind": "127.0.0.1:0", "tls": server},
            {"name": "tls13", "protocol": "mqtt", "bind": "127.0.0.1:0",
             "tls": {**server, "min_version": "1.3"}},
        ],
    }
    wait = {"tls": _listening("mqtts", "tls"), "mtls": _listening("mqtts", "mtls"),
            "mtls-uri": _listening("mqtts", "mtls-uri"), "wss": _listening("wss", "wss"),
            "tls13": _listening("mqtts", "tls13")}
    wait["https"] = re.compile(r"listening on https://(127\.0\.0\.1):(\d+)")
    b = broker_factory(config, wait=wait)
    b.server_files = (cert, key)
    b.acl_file = acl
    return b


def _tls_client(b, listener, pki, version=5, client_id="", cert=None, ca=None,
                transport="tcp"):
    c = MqttClient(HOST, b.ports[listener], version, client_id, transport=transport)
    b._clients.append(c)
    c.c.tls_set(ca_certs=str(ca or pki.ca),
                certfile=str(cert.cert) if cert else None,
                keyfile=str(cert.key) if cert else None)
    return c


def _mosquitto_pub(b, listener, pki, topic, *tls_args, qos=1):
    return subprocess.run(["mosquitto_pub", "-h", HOST, "-p", str(b.ports[listener]),
                           "-t", topic, "-m", "from-mosquitto", "-q", str(qos), *tls_args],
                          capture_output=True, text=True, timeout=10)


def test_clients_verify_the_server_certificate(secure, pki):
    watcher = secure.client(5, "tls-watcher")
    watcher.subscribe("devices/#", qos=1)
    c = _tls_client(secure, "tls", pki, client_id="tls-paho")
    assert c.connect().reason == 0
    # no user name on this listener: anonymous, which the ACL lets only subscribe
    assert c.subscribe("devices/any/#", qos=1) == [1]

    ok = _mosquitto_pub(secure, "tls", pki, "devices/x", "--cafile", str(pki.ca))
    assert ok.returncode == 0, ok.stderr

    # a client that trusts another CA refuses the broker
    rogue = _tls_client(secure, "tls", pki, ca=pki.untrusted_ca)
    with pytest.raises(ssl.SSLCertVerificationError):
        rogue.connect()
    refused = _mosquitto_pub(secure, "tls", pki, "devices/x", "--cafile", str(pki.untrusted_ca))
    assert refused.returncode != 0, refused


def test_mutual_tls_names_the_device_and_refuses_other_certificates(secure, pki):
    watcher = secure.client(5, "mtls-watcher")
    assert watcher.subscribe("devices/#", qos=1) == [1]
    ca = ["--cafile", str(pki.ca)]

    def with_cert(issued, topic):
        return _mosquitto_pub(secure, "mtls", pki, topic, *ca, "--cert", str(issued.cert),
                              "--key", str(issued.key))

    ok = with_cert(pki.device, "devices/device-1/temp")
    assert ok.returncode == 0, ok.stderr
    m = watcher.get()
    assert (m.topic, m.payload) == ("devices/device-1/temp", b"from-mosquitto")

    for bad in (pki.untrusted, pki.expired):
        refused = with_cert(bad, "devices/device-1/temp")
        assert refused.returncode != 0, f"{bad.cert.name} was accepted"
    no_cert = _mosquitto_pub(secure, "mtls", pki, "devices/device-1/temp", *ca)
    assert no_cert.returncode != 0
    # the refusals happened in the TLS handshake, and are logged as such
    secure.wait_log(r"TLS handshake failed")

    # the identity is the user name ACL rules see: device-1 may publish
    # under devices/device-1/ only (paho, MQTT 5: a refusal has a reason)
    device = _tls_client(secure, "mtls", pki, client_id="dev-1", cert=pki.device)
    assert device.connect().reason == 0
    assert device.publish("devices/device-2/temp", b"spoofed", qos=1) == 0x87
    assert device.publish("devices/device-1/temp", b"mine", qos=1) == 0
    m = watcher.get()
    assert (m.topic, m.payload) == ("devices/device-1/temp", b"mine")


def test_identity_can_bind_the_client_id(secure, pki):
    c = _tls_client(secure, "mtls-uri", pki, client_id=DEVICE_URI, cert=pki.device)
    assert c.connect().reason == 0
    other = _tls_client(secure, "mtls-uri", pki, client_id="someone-else", cert=pki.device)
    assert other.connect(expect_success=False).reason == 0x85
    assigned = _tls_client(secure, "mtls-uri", pki, client_id="", cert=pki.device)
    ack = assigned.connect()
    assert ack.props.get("AssignedClientIdentifier") == DEVICE_URI
    # a certificate is optional here, but without one the client proves
    # nothing, and this listener refuses anonymous clients
    anonymous = _tls_client(secure, "mtls-uri", pki, client_id="anon")
    assert anonymous.connect(expect_success=False).reason == 0x87


def test_secure_websocket_and_https(secure, pki):
    ws = _tls_client(secure, "wss", pki, client_id="wss-paho", transport="websockets")
    assert ws.connect().reason == 0
    assert ws.subscribe("devices/a/#") == [0]

    context = ssl.create_default_context(cafile=str(pki.ca))
    base = f"https://{HOST}:{secure.ports['https']}"
    with urllib.request.urlopen(f"{base}/health", context=context, timeout=10) as response:
        assert json.load(response) == {"status": "ok"}
    untrusting = ssl.create_default_context(cafile=str(pki.untrusted_ca))
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{base}/health", context=untrusting, timeout=10)


def test_certificates_reload_on_sighup_without_dropping_connections(secure, pki, tmp_path):
    before = _tls_client(secure, "tls", pki, client_id="before-reload")
    assert before.connect().reason == 0
    # the server's files now hold a certificate from the other CA
    other_ca = Authority(tmp_path, "second-ca")
    renewed = other_ca.issue("renewed", "localhost", server=True,
                             sans=[x509.IPAddress(ipaddress.ip_address(HOST))])
    cert, key = secure.server_files
    cert.write_bytes(renewed.cert.read_bytes())
    key.write_bytes(renewed.key.read_bytes())
    since = len(secure.log_lines())
    os.kill(secure.proc.pid, signal.SIGHUP)
    secure.wait_log(r"reloaded", since=since)

    after = _tls_client(secure, "tls", pki, client_id="after-reload", ca=other_ca.issued.cert)
    assert after.connect().reason == 0
    stale = _tls_client(secure, "tls", pki, client_id="old-trust")
    with pytest.raises(ssl.SSLCertVerificationError):
        stale.connect()
    # the connection made before the reload still works
    assert before.subscribe("devices/still/#") == [0]


def test_a_reload_with_one_bad_certificate_changes_nothing(secure, pki):
    c = _tls_client(secure, "tls", pki, client_id="through-reload")
    assert c.connect().reason == 0
    # the new ACL would refuse everything, but the certificate beside it is broken
    secure.acl_file.write_text('[[rule]]\npermission = "deny"\naction = "all"\ntopics = ["#"]\n')
    cert, _ = secure.server_files
    cert.write_text("not a certificate\n")
    since = len(secure.log_lines())
    os.kill(secure.proc.pid, signal.SIGHUP)
    secure.wait_log(r"reload failed, the previous settings stay: listener tls\b", since=since)
    # so neither was applied: the old ACL still grants, the old certificate still serves
    assert c.subscribe("devices/kept/#") == [0]
    again = _tls_client(secure, "tls", pki, client_id="after-failed-reload")
    assert again.connect().reason == 0


def test_minimum_tls_version(secure, pki):
    def handshake(listener, maximum):
        context = ssl.create_default_context(cafile=str(pki.ca))
        context.maximum_version = maximum
        with socket.create_connection((HOST, secure.ports[listener]), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname=HOST) as tls:
                return tls.version()

    assert handshake("tls", ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    assert handshake("tls13", ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
    with pytest.raises(ssl.SSLError):
        handshake("tls13", ssl.TLSVersion.TLSv1_2)
