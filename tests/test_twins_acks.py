"""Acknowledgements of twin commands (`requested-acks`, `response-required`,
`timeout`) on the real binary, over HTTP (requests) and the Ditto protocol
on /ws/2 (websocket-client), as Ditto's gateway answers them: the plain
response for twin-persisted alone, the aggregated acknowledgements (200,
or 424 with each one's status) for more, 202 without a response, a label
nobody declared timing out with 408, and 400 for what Ditto refuses."""

from __future__ import annotations

import pytest

from conftest import make_password_file
from twins import Ditto
from twins_ws import DittoWs, envelope

pytestmark = pytest.mark.ferry_only

TID = "org.acme:lamp-1"
TOPIC = "org.acme/lamp-1/things/twin"
LAMP = {"attributes": {"room": "hall"}}


@pytest.fixture
def ditto(broker_factory) -> Ditto:
    b = broker_factory()
    return Ditto(f"http://{b.host}:{b.http_port}")


def test_twin_persisted_alone_is_the_plain_response(ditto):
    created = ditto.put(f"/things/{TID}", LAMP, headers={"requested-acks": "twin-persisted"})
    assert created.status_code == 201, created.text
    assert created.json()["attributes"] == {"room": "hall"}
    modified = ditto.put(f"/things/{TID}/attributes/room", "attic",
                         params={"requested-acks": "twin-persisted", "timeout": "5s"})
    assert (modified.status_code, modified.text) == (204, "")


def test_several_labels_answer_the_aggregated_acknowledgements(ditto):
    created = ditto.put(f"/things/{TID}", LAMP,
                        headers={"requested-acks": "twin-persisted,search-persisted",
                                 "correlation-id": "c-1"})
    assert created.status_code == 200, created.text
    body = created.json()
    assert set(body) == {"twin-persisted", "search-persisted"}
    persisted = body["twin-persisted"]
    assert persisted["status"] == 201
    assert persisted["payload"]["thingId"] == TID
    assert persisted["headers"]["correlation-id"] == "c-1"
    assert persisted["headers"]["etag"] == '"rev:1"'
    assert persisted["headers"]["location"].endswith(f"/api/2/things/{TID}")
    assert body["search-persisted"] == {"status": 204, "headers": {"correlation-id": "c-1"}}
    # search-persisted means what it says: the search finds the change.
    found = ditto.get("/search/things", params={"filter": 'eq(attributes/room,"hall")'}).json()
    assert [item["thingId"] for item in found["items"]] == [TID]

    # One label other than twin-persisted: its own status and payload.
    alone = ditto.patch(f"/things/{TID}", {"attributes": {"room": "cellar"}},
                        params={"requested-acks": "search-persisted"})
    assert (alone.status_code, alone.text) == (204, "")


def test_a_label_nobody_declared_times_out_and_fails_the_whole(ditto):
    assert ditto.put(f"/things/{TID}", LAMP).status_code == 201
    answer = ditto.put(f"/things/{TID}/attributes/room", "attic",
                       headers={"requested-acks": "twin-persisted,my-app:processed",
                                "timeout": "300ms"})
    assert answer.status_code == 424, answer.text
    body = answer.json()
    assert body["twin-persisted"]["status"] == 204
    assert body["my-app:processed"]["status"] == 408
    assert body["my-app:processed"]["payload"] == {
        "status": 408,
        "error": "acknowledgement:request.timeout",
        "message": "The acknowledgement request reached the specified timeout of 300ms.",
        "description": "Try increasing the timeout and make sure that the requested "
                       "acknowledgement is sent back in time.",
    }
    # The change itself was committed: the acknowledgement is about the
    # subscriber, not the twin.
    assert ditto.get(f"/things/{TID}/attributes/room").json() == "attic"

    # Without a response, a failure still says which label failed, and no more.
    quiet = ditto.put(f"/things/{TID}/attributes/room", "roof",
                      headers={"requested-acks": "my-app:processed", "timeout": "200ms",
                               "response-required": "false"})
    assert quiet.status_code == 408, quiet.text
    assert quiet.text == ""


def test_no_response_is_202_and_what_ditto_refuses_is_400(ditto):
    accepted = ditto.put(f"/things/{TID}", LAMP,
                         headers={"requested-acks": "twin-persisted,search-persisted",
                                  "response-required": "false"})
    assert (accepted.status_code, accepted.text) == (202, "")
    assert ditto.get(f"/things/{TID}").status_code == 200
    fire = ditto.put(f"/things/{TID}/attributes/room", "attic", params={"timeout": "0"})
    assert fire.status_code == 202

    for headers, complaint in [
        ({"timeout": "0", "response-required": "true"}, "must not be zero"),
        ({"timeout": "0", "requested-acks": "twin-persisted"}, "must not be zero"),
        ({"requested-acks": "no"}, "requested-acks"),
        ({"requested-acks": "white space"}, "requested-acks"),
    ]:
        refused = ditto.put(f"/things/{TID}/attributes/room", "x", headers=headers)
        assert refused.status_code == 400, (headers, refused.text)
        assert refused.json()["error"] == "header.invalid"
        assert complaint in refused.json()["message"]
    assert ditto.get(f"/things/{TID}/attributes/room").json() == "attic"


def test_the_ditto_protocol_answers_acknowledgements(tmp_path, broker_factory):
    passwords = make_password_file(tmp_path / "passwords", {"alice": "a-secret"})
    broker = broker_factory({"auth": {"password_file": str(passwords)}})
    ws = DittoWs(broker, "alice", "a-secret")
    ws.send(envelope(f"{TOPIC}/commands/create", value=LAMP,
                     **{"correlation-id": "c-1",
                        "requested-acks": ["twin-persisted", "search-persisted"]}))
    acks = ws.recv()
    assert acks["topic"] == f"{TOPIC}/acks"
    assert (acks["path"], acks["status"]) == ("/", 200)
    assert acks["headers"]["correlation-id"] == "c-1"
    assert acks["value"]["twin-persisted"]["status"] == 201
    assert acks["value"]["twin-persisted"]["payload"]["thingId"] == TID
    assert acks["value"]["search-persisted"] == {"status": 204,
                                                 "headers": {"correlation-id": "c-1"}}

    # twin-persisted alone: the command's own response.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "attic",
                     **{"correlation-id": "c-2", "requested-acks": ["twin-persisted"]}))
    response = ws.recv()
    assert (response["topic"], response["status"]) == (f"{TOPIC}/commands/modify", 204)

    # A custom label nobody declared: 424 after the timeout.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "roof",
                     **{"correlation-id": "c-3", "timeout": "200ms",
                        "requested-acks": ["twin-persisted", "their:ack"]}))
    failed = ws.recv()
    assert (failed["topic"], failed["status"]) == (f"{TOPIC}/acks", 424)
    assert failed["value"]["their:ack"]["status"] == 408

    # An invalid label: the error, on the command's errors topic.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "x",
                     **{"correlation-id": "c-4", "requested-acks": ["x"]}))
    error = ws.recv()
    assert (error["topic"], error["status"]) == (f"{TOPIC}/errors", 400)
    assert error["value"]["error"] == "header.invalid"
    assert error["headers"]["correlation-id"] == "c-4"

    # No response required and all acknowledged: nothing comes back; the
    # next answer is the next command's.
    ws.send(envelope(f"{TOPIC}/commands/modify", "/attributes/room", "cellar",
                     **{"response-required": False,
                        "requested-acks": ["twin-persisted", "search-persisted"]}))
    ws.send(envelope(f"{TOPIC}/commands/retrieve", "/attributes/room",
                     **{"correlation-id": "c-5"}))
    answer = ws.recv()
    assert (answer["headers"]["correlation-id"], answer["value"]) == ("c-5", "cellar")
    ws.close()
