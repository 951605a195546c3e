"""Ditto's metadata headers on the real binary: `put-metadata` on writes,
`get-metadata` on reads (answered in `ditto-metadata`), `delete-metadata`,
over HTTP and the Ditto protocol, beside Ferry's own per-leaf `_modified`;
on SQLite and on PostgreSQL (the `twin_store` fixture)."""

from __future__ import annotations

import json

import pytest

from conftest import make_password_file
from twins import Ditto
from twins_ws import DittoWs, envelope

pytestmark = pytest.mark.ferry_only

THING = "org.acme:lamp"
LAMP = {"thingId": THING, "attributes": {"serial": "X1"},
        "features": {"lamp": {"properties": {"color": {"r": 100, "g": 0, "b": 255},
                                             "on": True}}}}


def _ferry(tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords", {"alice": "a-secret", "bob": "b-secret"})
    broker = broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})
    base = Ditto(f"http://{broker.host}:{broker.http_port}")
    return broker, base.as_user("alice", "a-secret"), base.as_user("bob", "b-secret")


def _put_metadata(*entries: tuple[str, object]) -> dict:
    return {"put-metadata": json.dumps([{"key": k, "value": v} for k, v in entries])}


def _metadata(ditto: Ditto) -> dict:
    r = ditto.get(f"/things/{THING}", params={"fields": "_metadata"})
    assert r.status_code == 200, r.text
    return r.json()["_metadata"]


def _without_modified(node):
    """The metadata without Ferry's `_modified` entries, pruned."""
    if not isinstance(node, dict):
        return node
    kept = {k: _without_modified(v) for k, v in node.items()
            if not (k == "_modified" and isinstance(v, str))}
    return {k: v for k, v in kept.items() if v != {}}


def test_put_metadata_sets_keys_and_wildcards_beside_ferrys_modified(tmp_path, broker_factory,
                                                                      twin_store):
    _, alice, _ = _ferry(tmp_path, broker_factory, twin_store)
    created = alice.put(f"/things/{THING}", LAMP, headers=_put_metadata(
        ("*/changeLog", {"by": "ditto"}),
        ("/features/lamp/properties/color/description", "RGB")))
    assert created.status_code == 201, created.text
    meta = _metadata(alice)
    color = meta["features"]["lamp"]["properties"]["color"]
    assert color["description"] == "RGB"
    for leaf in ("r", "g", "b"):
        assert color[leaf]["changeLog"] == {"by": "ditto"}
        assert isinstance(color[leaf]["_modified"], str)
    assert meta["thingId"]["changeLog"] == {"by": "ditto"}
    assert meta["attributes"]["serial"]["changeLog"] == {"by": "ditto"}
    # What is put is searchable, as Ditto indexes _metadata.
    found = alice.get("/search/things", params={
        "filter": 'eq(_metadata/features/lamp/properties/color/description,"RGB")'})
    assert [t["thingId"] for t in found.json()["items"]] == [THING], found.text

    # Keys are relative to the resource written; a specific key wins over
    # a wildcard; a later write keeps what was put and re-stamps.
    before = color["r"]["_modified"]
    r = alice.put(f"/things/{THING}/features/lamp/properties/color/r", 7, headers=_put_metadata(
        ("issuedBy", {"name": "alice"})))
    assert r.status_code == 204, r.text
    r_meta = _metadata(alice)["features"]["lamp"]["properties"]["color"]["r"]
    assert r_meta["issuedBy"] == {"name": "alice"}
    assert r_meta["changeLog"] == {"by": "ditto"}
    assert r_meta["_modified"] > before

    r = alice.put(f"/things/{THING}/attributes", {"serial": "X2", "year": 2024},
                  headers=_put_metadata(("*/unit", "none"), ("/year/unit", "a")))
    assert r.status_code == 204, r.text
    attributes = _without_modified(_metadata(alice)["attributes"])
    assert attributes == {"serial": {"changeLog": {"by": "ditto"}, "unit": "none"},
                          "year": {"unit": "a"}}

    # A merge: wildcards over what the patch writes; a null deletes the
    # value and its metadata.
    r = alice.patch(f"/things/{THING}/attributes", {"year": 2025, "serial": None},
                    headers=_put_metadata(("*/source", "merge")))
    assert r.status_code == 204, r.text
    attributes = _without_modified(_metadata(alice)["attributes"])
    assert attributes == {"year": {"unit": "a", "source": "merge"}}

    # A delete takes the metadata along.
    assert alice.delete(f"/things/{THING}/attributes/year").status_code == 204
    assert "attributes" not in _metadata(alice)


def test_get_metadata_answers_in_ditto_metadata(tmp_path, broker_factory, twin_store):
    _, alice, bob = _ferry(tmp_path, broker_factory, twin_store)
    r = alice.put(f"/things/{THING}", LAMP, headers=_put_metadata(
        ("features/lamp/properties/*/description", "about"),
        ("*/unit", "°C")))
    assert r.status_code == 201, r.text

    got = alice.get(f"/things/{THING}", headers={"get-metadata": "features/lamp/properties/color/r/unit"})
    assert got.status_code == 200
    assert json.loads(got.headers["ditto-metadata"]) == {
        "features": {"lamp": {"properties": {"color": {"r": {"unit": "°C"}}}}}}

    # `*/…` stands for the leaves below the resource, other wildcards for
    # every key of their level.
    props = alice.get(f"/things/{THING}/features/lamp/properties",
                      headers={"get-metadata": "*/description,color/r/unit"})
    assert json.loads(props.headers["ditto-metadata"]) == {
        "on": {"description": "about"}, "color": {"r": {"unit": "°C"}}}
    feature = alice.get(f"/things/{THING}/features/lamp",
                        headers={"get-metadata": "properties/*/description"})
    assert json.loads(feature.headers["ditto-metadata"]) == {
        "properties": {"color": {"description": "about"}, "on": {"description": "about"}}}

    everything = alice.get(f"/things/{THING}/attributes", headers={"get-metadata": "*"})
    assert _without_modified(json.loads(everything.headers["ditto-metadata"])) == {
        "serial": {"unit": "°C"}}
    nothing = alice.get(f"/things/{THING}/attributes", headers={"get-metadata": "missing"})
    assert json.loads(nothing.headers["ditto-metadata"]) == {}
    assert "ditto-metadata" not in alice.get(f"/things/{THING}").headers

    # bob reads the attributes only: no metadata, as with fields=_metadata.
    guest = {"subjects": {"nginx:bob": {"type": "generated"}},
             "resources": {"thing:/attributes": {"grant": ["READ"], "revoke": []}}}
    assert alice.put(f"/policies/{THING}/entries/GUEST", guest).status_code == 201
    hidden = bob.get(f"/things/{THING}/attributes", headers={"get-metadata": "*"})
    assert hidden.status_code == 200
    assert json.loads(hidden.headers["ditto-metadata"]) == {}


def test_delete_metadata_removes_what_was_put_and_keeps_modified(tmp_path, broker_factory,
                                                                 twin_store):
    _, alice, _ = _ferry(tmp_path, broker_factory, twin_store)
    r = alice.put(f"/things/{THING}", LAMP, headers=_put_metadata(
        ("*/unit", "u"), ("features/lamp/properties/color/description", "RGB")))
    assert r.status_code == 201, r.text

    r = alice.put(f"/things/{THING}/features/lamp/properties/on", False,
                  headers={"delete-metadata": "unit"})
    assert r.status_code == 204, r.text
    on = _metadata(alice)["features"]["lamp"]["properties"]["on"]
    assert list(on) == ["_modified"]

    r = alice.patch(f"/things/{THING}/features/lamp/properties", {"color": {"r": 1}},
                    headers={"delete-metadata": "*/unit"})
    assert r.status_code == 204, r.text
    color = _metadata(alice)["features"]["lamp"]["properties"]["color"]
    assert _without_modified(color) == {"description": "RGB"}

    r = alice.put(f"/things/{THING}/attributes", {"serial": "X3"}, headers={"delete-metadata": "*"})
    assert r.status_code == 204
    assert _without_modified(_metadata(alice).get("attributes", {})) == {}
    assert isinstance(_metadata(alice)["attributes"]["serial"]["_modified"], str)
    r = alice.put(f"/things/{THING}", LAMP, headers={"delete-metadata": "*"})
    assert r.status_code == 204
    assert _without_modified(_metadata(alice)) == {}


def test_malformed_metadata_headers_are_refused_as_ditto_refuses_them(tmp_path, broker_factory,
                                                                      twin_store):
    _, alice, _ = _ferry(tmp_path, broker_factory, twin_store)
    assert alice.put(f"/things/{THING}", LAMP).status_code == 201
    path = f"/things/{THING}/attributes/serial"

    invalid = alice.put(path, "X", headers={"put-metadata": "{}"})
    assert invalid.status_code == 400
    assert invalid.json() == {
        "status": 400,
        "error": "header.invalid",
        "message": "The value '{}' of the header 'put-metadata' is not a valid MetadataHeaders.",
        "description": "<{}> is not a valid JSON array! Check if the JSON was valid (e.g. on "
                       "https://jsonlint.com) and if it was in required format.",
    }
    missing = alice.put(path, "X", headers={"put-metadata": '[{"value": 1}]'})
    assert missing.json()["description"] == (
        "Metadata header entry JSON object did not include required </key> field! "
        "Check if all required JSON fields were set.")
    empty = alice.put(path, "X", headers=_put_metadata(("/", 1)))
    assert empty.json()["error"] == "header.invalid"
    wildcard = alice.put(f"/things/{THING}/features", LAMP["features"],
                         headers=_put_metadata(("*/unit", "u")))
    assert wildcard.status_code == 400
    assert wildcard.json()["message"] == (
        "The wildcard expression '/*/unit' in header 'put-metadata' is not valid.")
    selector = alice.get(path, headers={"get-metadata": "a(b"})
    assert (selector.status_code, selector.json()["error"]) == (400, "header.invalid")
    both = alice.put(path, "X", headers={**_put_metadata(("a", 1)), "delete-metadata": "a"})
    assert both.status_code == 400
    assert both.json()["error"] == "things:metadata.headersconflict"
    reserved = alice.put(path, "X", headers=_put_metadata(("_modified", "now")))
    assert reserved.status_code == 400 and "Ferry's own" in reserved.json()["description"]
    # A value where the thing has values must be an object: it keeps their
    # _modified.
    collides = alice.put(f"/things/{THING}/features/lamp/properties", LAMP["features"]["lamp"]["properties"],
                         headers=_put_metadata(("color", "flat")))
    assert collides.status_code == 400
    assert collides.json()["error"] == "things:metadata.notmodifiable"
    assert alice.get(f"/things/{THING}/features/lamp/properties").json() == \
        LAMP["features"]["lamp"]["properties"], "a refused write changes nothing"


def test_metadata_counts_towards_the_size_limit(tmp_path, broker_factory, twin_store):
    _, alice, _ = _ferry(tmp_path, broker_factory, twin_store)
    assert alice.put(f"/things/{THING}", LAMP).status_code == 201
    big = "x" * (101 * 1024)
    r = alice.put(f"/things/{THING}/attributes/serial", "X", headers=_put_metadata(("note", big)))
    assert (r.status_code, r.json()["error"]) == (413, "things:thing.toolarge")


def test_metadata_headers_over_the_ditto_protocol(tmp_path, broker_factory, twin_store):
    broker, alice, _ = _ferry(tmp_path, broker_factory, twin_store)
    ws = DittoWs(broker, "alice", "a-secret")
    topic = "org.acme/lamp/things/twin/commands/"
    put = [{"key": "*/unit", "value": "°C"}]
    ws.send(envelope(topic + "create", "/", LAMP, **{"put-metadata": put, "correlation-id": "c1"}))
    assert ws.recv()["status"] == 201
    ws.send(envelope(topic + "modify", "/attributes/serial", "X9",
                     **{"put-metadata": json.dumps([{"key": "by", "value": "ws"}])}))
    assert ws.recv()["status"] == 204
    ws.send(envelope(topic + "retrieve", "/attributes", **{"get-metadata": "serial"}))
    answer = ws.recv()
    assert answer["status"] == 200
    assert _without_modified(answer["headers"]["ditto-metadata"]) == {
        "serial": {"unit": "°C", "by": "ws"}}
    ws.send(envelope(topic + "modify", "/attributes/serial", "X", **{"put-metadata": "nope"}))
    error = ws.recv()
    assert error["topic"] == "org.acme/lamp/things/twin/errors"
    assert (error["status"], error["value"]["error"]) == (400, "header.invalid")
    ws.close()
    assert _metadata(alice)["attributes"]["serial"]["by"] == "ws"
