"""Differential tests: the same scenario against the broker under test and a
reference Mosquitto; the observable transcripts must be identical.

The scenarios are chosen where the spec leaves no freedom (topic matching,
retained-message selection, CONNECT validation), so any difference is a bug
in one of the two brokers."""

import time

import pytest

import rawmqtt as R
from helpers import VERSIONS

FILTERS = ["a/b", "a/+", "a/#", "+/b", "+/+", "#", "+", "/+", "+/", "a/+/c", "+/b/#",
           "a//c", "ü/+", "a/b/c/#", "A/b", "+/+/+/+"]
TOPICS = ["a", "a/b", "a/c", "a/b/c", "a//c", "/b", "b/", "/", "x/b/y", "ü/ß", "a/b/c/d",
          " a/b", "A/b", "a/b/", "sp ace/b"]
QUIESCE = 0.5  # the reference run's "no more messages are coming" wait


def _collect(subs, expected=None):
    """Per filter, the received (topic, payload, qos, retain) list. With
    `expected` (the reference transcript) waits for that many messages,
    otherwise for quiescence; then checks nothing more arrives."""
    out = {}
    if expected is None:
        time.sleep(QUIESCE)
    for f, c in subs.items():
        n = len(expected[f]) if expected is not None else c.messages.qsize()
        try:
            msgs = c.get_n(n)
        except AssertionError as e:
            raise AssertionError(f"filter {f!r}: {e}") from None
        out[f] = [(m.topic, m.payload, m.qos, m.retain) for m in msgs]
    if expected is not None:
        time.sleep(0.3)
    for f, c in subs.items():
        while not c.messages.empty():
            m = c.messages.get()
            out[f].append((m.topic, m.payload, m.qos, m.retain))
    return out


def routing_transcript(b, version, expected=None):
    subs = {}
    for i, f in enumerate(FILTERS):
        c = b.client(version, f"diff-sub-{i}")
        assert c.subscribe(f, qos=1) == [1]
        subs[f] = c
    pub = b.client(version, "diff-pub")
    for i, t in enumerate(TOPICS):
        pub.publish(t, t.encode(), qos=i % 3)
    # ordering is only guaranteed per topic, and every topic is used once
    return _sorted(_collect(subs, expected))


def retained_transcript(b, version, expected=None):
    pub = b.client(version, "diffr-pub")
    for i, t in enumerate(TOPICS):
        pub.publish(t, t.encode(), qos=1 + i % 2, retain=True)
    subs = {}
    for i, f in enumerate(FILTERS):
        c = b.client(version, f"diffr-sub-{i}")
        c.subscribe(f, qos=2)
        subs[f] = c
    got = _collect(subs, expected)
    # the order of retained messages for one SUBSCRIBE is not specified
    return {f: sorted(v) for f, v in got.items()}


def _sorted(transcript):
    return {f: sorted(v) for f, v in transcript.items()}


@pytest.mark.parametrize("version", VERSIONS)
def test_topic_matching_same_as_mosquitto(broker, reference, version):
    ref = routing_transcript(reference, version)
    assert sum(map(len, ref.values())) > 20  # the scenario exercises something
    got = routing_transcript(broker, version, ref)
    diff = {f: (got[f], ref[f]) for f in FILTERS if got[f] != ref[f]}
    assert not diff, f"filter: (ours, mosquitto's): {diff}"


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_selection_same_as_mosquitto(broker, reference, version):
    ref = retained_transcript(reference, version)
    got = retained_transcript(broker, version, ref)
    diff = {f: (got[f], ref[f]) for f in FILTERS if got[f] != ref[f]}
    assert not diff, f"filter: (ours, mosquitto's): {diff}"


def _connect_outcome(b, version, **kw):
    r = b.raw(version)
    r.send(R.encode_connect(version=version, **kw))
    try:
        p = r.read_packet(3)
    except R.Closed:
        return "closed"
    assert p.type == R.CONNACK, p
    if p.reason == 0:
        r.ping()
        return "accepted"
    if version == 5 and p.reason >= 0x80:
        # a v5 server may or may not send CONNACK with the reason first
        r.read_until_closed()
        return "closed"
    r.read_until_closed()
    return f"refused 0x{p.reason:02x}"


CONNECT_VARIANTS = {
    "plain": dict(client_id="c1"),
    "empty_id_clean": dict(client_id="", clean=True),
    "empty_id_persistent": dict(client_id="", clean=False),
    "username_only": dict(client_id="c2", username="user"),
    "username_and_password": dict(client_id="c3", username="user", password=b"pw"),
    "will_qos3": dict(client_id="c4", extra_flags=0x04 | 0x18,),
    "will_qos_without_will_flag": dict(client_id="c5", extra_flags=0x08),
    "will_retain_without_will_flag": dict(client_id="c6", extra_flags=0x20),
    "keepalive_zero": dict(client_id="c7", keepalive=0),
    # v3.1.1: malformed [MQTT-3.1.2-22]; v5: allowed
    "password_without_username": dict(client_id="c8", password=b"pw"),
}


# MQTT 5 leaves an empty client id with Clean Start 0 to the server
CONNECT_CASES = [pytest.param(v, name, id=f"{'v5' if v == 5 else 'v311'}-{name}")
                 for v in (4, 5) for name in sorted(CONNECT_VARIANTS)
                 if not (v == 5 and name == "empty_id_persistent")]


@pytest.mark.parametrize("version,variant", CONNECT_CASES)
def test_connect_validation_same_as_mosquitto(broker, reference, version, variant):
    kw = dict(CONNECT_VARIANTS[variant])
    if variant == "will_qos3":
        # a will with QoS 3: needs the will topic/payload in the payload
        kw.pop("extra_flags")
        kw["will"] = {"topic": "w", "payload": b"x", "qos": 3}
    ref = _connect_outcome(reference, version, **kw)
    got = _connect_outcome(broker, version, **kw)
    assert got == ref, f"ours: {got}, mosquitto: {ref}"
