"""Policy announcements and subject expiry (Ditto's
SubjectDeletionAnnouncement) on the real binary: a subject told before it
expires over a real WebSocket, one removed from its policy at expiry and
told then, one told again after a restart, and an http-push connection
target that acknowledges announcements, with the announcement sent again
while its acknowledgement fails; on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime
import json

import pytest
import websocket

from conftest import make_password_file
from test_metrics import scrape, value
from test_twins_connections import Receiver, eventually, outbound
from twins import Ditto
from twins_ws import DittoWs

pytestmark = pytest.mark.ferry_only

PID = "org.acme:lamp-1"
ANNOUNCEMENT_TOPIC = "org.acme/lamp-1/policies/announcements/subjectDeletion"


def _in(seconds: int) -> str:
    """An instant `seconds` from now, to the second, as Ditto writes one."""
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return at.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _instant(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _policy(owner: str, guest: str, guest_subject: dict) -> dict:
    return {"entries": {
        "owner": {"subjects": {owner: {"type": "owner"}},
                  "resources": {"policy:/": {"grant": ["READ", "WRITE"], "revoke": []},
                                "thing:/": {"grant": ["READ", "WRITE"], "revoke": []}}},
        "guest": {"subjects": {guest: guest_subject},
                  "resources": {"thing:/": {"grant": ["READ"], "revoke": []}}},
    }}


def _start(tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords",
                                   {"alice": "a-secret", "bob": "b-secret"})
    return broker_factory({"auth": {"password_file": str(passwords)},
                           "twins": {**twin_store, "subject_expiry_granularity": "1s"}})


def _listening(broker, user: str, password: str) -> DittoWs:
    ws = DittoWs(broker, user, password)
    ws.control("START-SEND-POLICY-ANNOUNCEMENTS")
    return ws


def _quiet(ws: DittoWs, within: float = 0.5) -> bool:
    ws.ws.settimeout(within)
    try:
        ws.recv_text()
        return False
    except websocket.WebSocketTimeoutException:
        return True


def test_a_subject_is_told_before_its_expiry_and_only_once(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")
    bob_ws = _listening(broker, "bob", "b-secret")
    alice_ws = _listening(broker, "alice", "a-secret")

    expiry = _in(62)
    bob = {"type": "guest", "expiry": expiry,
           "announcement": {"beforeExpiry": "1m", "whenDeleted": True}}
    created = alice.put(f"/policies/{PID}", _policy("nginx:alice", "nginx:bob", bob))
    assert created.status_code == 201, created.text

    told = bob_ws.recv()  # a minute before the expiry: at once
    assert told["topic"] == ANNOUNCEMENT_TOPIC and told["path"] == "/"
    assert told["value"] == {"deleteAt": expiry, "subjectIds": ["nginx:bob"]}
    assert told["headers"]["correlation-id"]
    assert _quiet(alice_ws), "an announcement went to a subject it does not name"

    # Deleted now: told before, so not again, although it asks whenDeleted.
    deleted = alice.delete(f"/policies/{PID}/entries/guest/subjects/nginx:bob")
    assert deleted.status_code == 204, deleted.text
    assert _quiet(bob_ws)


def test_an_expired_subject_is_removed_and_told_when_it_asks(tmp_path, broker_factory,
                                                              twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")
    bob = alice.as_user("bob", "b-secret")
    bob_ws = _listening(broker, "bob", "b-secret")

    guest = {"type": "guest", "expiry": _in(2), "announcement": {"whenDeleted": True}}
    assert alice.put(f"/policies/{PID}", _policy("nginx:alice", "nginx:bob", guest)).status_code == 201
    assert alice.put(f"/things/{PID}", {"policyId": PID}).status_code == 201
    assert bob.get(f"/things/{PID}").status_code == 200
    stored = alice.get(f"/policies/{PID}/entries/guest/subjects/nginx:bob").json()
    assert stored["announcement"] == {"whenDeleted": True}

    told = bob_ws.recv()  # at expiry, once the subject is removed
    assert told["topic"] == ANNOUNCEMENT_TOPIC
    assert told["value"]["subjectIds"] == ["nginx:bob"]
    assert _instant(told["value"]["deleteAt"]) >= _instant(guest["expiry"])
    assert alice.get(f"/policies/{PID}/entries/guest/subjects").json() == {}
    assert bob.get(f"/things/{PID}").status_code == 404


def test_an_announcement_due_while_ferry_was_down_is_sent_after_the_restart(
        tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")
    bob = {"type": "guest", "expiry": _in(61), "announcement": {"beforeExpiry": "1m"}}
    assert alice.put(f"/policies/{PID}", _policy("nginx:alice", "nginx:bob", bob)).status_code == 201
    broker.restart(kill=True)
    # Read from the store at start; due already, so sent at once to the
    # subject's session.
    bob_ws = _listening(broker, "bob", "b-secret")
    told = bob_ws.recv()
    assert told["value"] == {"deleteAt": bob["expiry"], "subjectIds": ["nginx:bob"]}


def test_refused_and_rounded_announcements(tmp_path, broker_factory, twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")
    for announcement, code in [({"beforeExpiry": "1d"}, "policies:subjectannouncement.invalid"),
                               ({"beforeExpiry": 60}, "json.invalid"),
                               ({"whenDeleted": "yes"}, "json.invalid"),
                               ({"requestedAcks": {"labels": ["x"]}},
                                "acknowledgement:label.invalid")]:
        guest = {"type": "guest", "expiry": _in(3600), "announcement": announcement}
        refused = alice.put(f"/policies/{PID}", _policy("nginx:alice", "nginx:bob", guest))
        assert (refused.status_code, refused.json()["error"]) == (400, code), refused.text
    guest = {"type": "guest", "expiry": _in(3600),
             "announcement": {"beforeExpiry": "30s", "requestedAcks": {"timeout": "5s"}}}
    assert alice.put(f"/policies/{PID}", _policy("nginx:alice", "nginx:bob", guest)).status_code == 201
    stored = alice.get(f"/policies/{PID}/entries/guest/subjects/nginx:bob").json()
    assert stored["announcement"] == {"beforeExpiry": "60s", "whenDeleted": False,
                                      "requestedAcks": {"timeout": "5s"}}


def test_a_connection_target_acknowledges_announcements_and_a_failure_is_retried(broker_factory):
    broker = broker_factory({"twins": {"subject_expiry_granularity": "1s"}})
    ditto = Ditto(f"http://{broker.host}:{broker.http_port}")
    receiver = Receiver()
    receiver.answers = [500]  # the first sending fails; the next is answered 204
    try:
        connection = {
            "connectionType": "http-push", "connectionStatus": "open",
            "uri": f"http://127.0.0.1:{receiver.port}", "sources": [],
            "targets": [{
                "address": "POST:/announcements/{{ topic:entityName }}",
                "topics": ["_/_/policies/announcements?namespaces=org.acme"],
                "authorizationContext": ["integration:device"],
                "issuedAcknowledgementLabel": "{{connection:id}}:told",
            }],
        }
        assert ditto.put("/connections/tell", connection).status_code == 201
        device = {"type": "device", "expiry": _in(62),
                  "announcement": {"beforeExpiry": "1m",
                                   "requestedAcks": {"labels": ["tell:told"], "timeout": "5s"}}}
        created = ditto.put(f"/policies/{PID}", _policy("nginx:ditto", "integration:device", device))
        assert created.status_code == 201, created.text

        first = receiver.next()
        second = receiver.next()
        for method, path, headers, body, _ in (first, second):
            assert (method, path) == ("POST", "/announcements/lamp-1")
            sent = json.loads(body)
            assert sent["topic"] == ANNOUNCEMENT_TOPIC
            assert sent["value"] == {"deleteAt": device["expiry"],
                                     "subjectIds": ["integration:device"]}
            assert sent["headers"]["requested-acks"] == ["tell:told"]
        assert (first[4], second[4]) == (500, 204)
        # A new correlation id for each sending, as Ditto's.
        ids = {json.loads(request[3])["headers"]["correlation-id"] for request in (first, second)}
        assert len(ids) == 2
        assert receiver.nothing(1.5), "sent again although acknowledged"
        eventually(lambda: outbound(ditto, "tell")["published"]["success"]["total"] == 1)
        samples = scrape(broker)
        assert value(samples, "ferry_twin_policy_announcements_total") == 2
        assert value(samples, "ferry_twin_subjects_watched") == 1
    finally:
        receiver.close()


def test_a_session_acknowledges_an_announcement_or_is_told_again(tmp_path, broker_factory,
                                                                 twin_store):
    broker = _start(tmp_path, broker_factory, twin_store)
    alice = Ditto(f"http://{broker.host}:{broker.http_port}", "alice", "a-secret")
    bob_ws = DittoWs(broker, "bob", "b-secret", query="?declared-acks=bob-told")
    bob_ws.control("START-SEND-POLICY-ANNOUNCEMENTS")
    bob = {"type": "guest", "expiry": _in(62),
           "announcement": {"beforeExpiry": "1m",
                            "requestedAcks": {"labels": ["bob-told"], "timeout": "1s"}}}
    assert alice.put(f"/policies/{PID}", _policy("nginx:alice", "nginx:bob", bob)).status_code == 201

    unanswered = bob_ws.recv()
    assert unanswered["headers"]["requested-acks"] == ["bob-told"]
    again = bob_ws.recv()  # after its 1 s timeout and the 1 s back-off
    assert again["value"] == unanswered["value"]
    correlation_id = again["headers"]["correlation-id"]
    assert correlation_id != unanswered["headers"]["correlation-id"]
    bob_ws.send({"topic": "org.acme/lamp-1/things/twin/acks/bob-told",
                 "headers": {"correlation-id": correlation_id}, "path": "/", "status": 200})
    assert _quiet(bob_ws, within=4.0), "told again although acknowledged"
