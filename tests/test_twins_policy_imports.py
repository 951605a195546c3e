"""Policy imports (Ditto 3.x) on the real binary: the imports routes and
their errors, and things enforced with what an imported policy brings
in, as it is now; on SQLite and on PostgreSQL (the `twin_store`
fixture)."""

from __future__ import annotations

import pytest

from conftest import make_password_file
from twins import Ditto
from twins_ws import DittoWs, envelope

pytestmark = pytest.mark.ferry_only

TEMPLATE = "org.acme:template"
IMPORTING = "org.acme:importing"
THING = "org.acme:lamp"


def _users(tmp_path, broker_factory, twin_store):
    """A Ferry with a password file: alice (owner of everything), bob (the
    reader an imported entry names) and carol (nobody)."""
    passwords = make_password_file(tmp_path / "passwords",
                                   {"alice": "a-secret", "bob": "b-secret", "carol": "c-secret"})
    broker = broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})
    base = Ditto(f"http://{broker.host}:{broker.http_port}")
    return (broker, base.as_user("alice", "a-secret"), base.as_user("bob", "b-secret"),
            base.as_user("carol", "c-secret"))


def _owner(subject: str = "nginx:alice", importable: str = "never") -> dict:
    return {
        "subjects": {subject: {"type": "generated"}},
        "resources": {
            "thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
            "policy:/": {"grant": ["READ", "WRITE"], "revoke": []},
        },
        "importable": importable,
    }


def _reader(importable: str | None = None, subject: str = "nginx:bob") -> dict:
    entry = {"subjects": {subject: {"type": "generated"}},
             "resources": {"thing:/": {"grant": ["READ"], "revoke": []}}}
    if importable is not None:
        entry["importable"] = importable
    return entry


def _setup(alice: Ditto, reader: dict, imports: dict) -> None:
    """The template with bob's entry, the importing policy and a thing."""
    r = alice.put(f"/policies/{TEMPLATE}", {"entries": {"OWNER": _owner(), "READER": reader}})
    assert r.status_code == 201, r.text
    r = alice.put(f"/policies/{IMPORTING}", {"imports": imports, "entries": {"OWNER": _owner()}})
    assert r.status_code == 201, r.text
    r = alice.put(f"/things/{THING}", {"policyId": IMPORTING, "attributes": {"on": True}})
    assert r.status_code == 201, r.text


def test_a_thing_is_enforced_with_the_entries_its_policy_imports(tmp_path, broker_factory,
                                                                  twin_store):
    _, alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    _setup(alice, _reader(), {TEMPLATE: {}})

    read = bob.get(f"/things/{THING}")
    assert read.status_code == 200, read.text
    assert read.json()["attributes"] == {"on": True}
    # Imported READ is no WRITE, and the importing policy lists only its
    # own entries.
    assert bob.put(f"/things/{THING}/attributes/on", False).status_code == 403
    assert alice.get(f"/policies/{IMPORTING}/entries").json().keys() == {"OWNER"}
    search = bob.get("/search/things", params={"filter": f'eq(thingId,"{THING}")'})
    assert [t["thingId"] for t in search.json()["items"]] == [THING]

    # The imported entry made never importable: the change reaches the
    # thing at once.
    r = alice.put(f"/policies/{TEMPLATE}/entries/READER", _reader("never"))
    assert r.status_code == 204, r.text
    gone = bob.get(f"/things/{THING}")
    assert gone.status_code == 404 and gone.json()["error"] == "things:thing.notfound"
    assert bob.get("/search/things").json()["items"] == []

    # Back to implicit, then the import deleted.
    assert alice.put(f"/policies/{TEMPLATE}/entries/READER", _reader()).status_code == 204
    assert bob.get(f"/things/{THING}").status_code == 200
    assert alice.delete(f"/policies/{IMPORTING}/imports/{TEMPLATE}").status_code == 204
    assert bob.get(f"/things/{THING}").status_code == 404

    # Imported again, and then the imported policy deleted and made anew.
    assert alice.put(f"/policies/{IMPORTING}/imports/{TEMPLATE}", {}).status_code == 201
    assert bob.get(f"/things/{THING}").status_code == 200
    assert alice.delete(f"/policies/{TEMPLATE}").status_code == 204
    assert bob.get(f"/things/{THING}").status_code == 404
    r = alice.put(f"/policies/{TEMPLATE}", {"entries": {"OWNER": _owner(), "READER": _reader()}})
    assert r.status_code == 201, r.text
    assert bob.get(f"/things/{THING}").status_code == 200


def test_explicit_entries_are_imported_only_when_listed(tmp_path, broker_factory, twin_store):
    _, alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    _setup(alice, _reader("explicit"), {TEMPLATE: {}})
    assert bob.get(f"/things/{THING}").status_code == 404

    entries = f"/policies/{IMPORTING}/imports/{TEMPLATE}/entries"
    assert alice.get(entries).json() == []
    assert alice.put(entries, ["READER"]).status_code == 204
    assert alice.get(entries).json() == ["READER"]
    assert alice.get(f"/policies/{IMPORTING}/imports").json() == {
        TEMPLATE: {"entries": ["READER"]}}
    assert bob.get(f"/things/{THING}").status_code == 200

    # Listed but never importable: not imported.
    assert alice.put(f"/policies/{TEMPLATE}/entries/READER", _reader("never")).status_code == 204
    assert bob.get(f"/things/{THING}").status_code == 404
    # Implicit: imported whether listed or not.
    assert alice.put(f"/policies/{TEMPLATE}/entries/READER", _reader("implicit")).status_code == 204
    assert alice.put(entries, []).status_code == 204
    assert bob.get(f"/things/{THING}").status_code == 200


def test_imports_are_not_followed_further(tmp_path, broker_factory, twin_store):
    """Ditto resolves one level: what the imported policy imports itself
    is not brought in."""
    _, alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    base = "org.acme:base"
    r = alice.put(f"/policies/{base}", {"entries": {"OWNER": _owner(), "READER": _reader()}})
    assert r.status_code == 201, r.text
    _setup(alice, _reader(subject="nginx:carol"), {TEMPLATE: {}})
    r = alice.put(f"/policies/{TEMPLATE}/imports", {base: {}})
    assert r.status_code == 204, r.text
    assert bob.get(f"/things/{THING}").status_code == 404


def test_the_imports_routes_answer_as_ditto(tmp_path, broker_factory, twin_store):
    _, alice, _, _ = _users(tmp_path, broker_factory, twin_store)
    _setup(alice, _reader(), {})
    imports = f"/policies/{IMPORTING}/imports"
    one = f"{imports}/{TEMPLATE}"

    assert alice.get(imports).json() == {}
    missing = alice.get(one)
    assert missing.status_code == 404
    assert missing.json() == {
        "status": 404,
        "error": "policies:import.notfound",
        "message": f"The Policy import '{TEMPLATE}' of Policy '{IMPORTING}' could not be found "
                   "or requester had insufficient permissions to access it.",
        "description": "Check if the ID of the Policy and the imported Policy was correct and "
                       "you have sufficient permissions.",
    }
    assert alice.get(f"{one}/entries").json()["error"] == "policies:import.notfound"
    assert alice.put(f"{one}/entries", []).json()["error"] == "policies:import.notfound"
    assert alice.delete(one).json()["error"] == "policies:import.notfound"

    created = alice.put(one, {"entries": ["READER"]})
    assert created.status_code == 201, created.text
    assert created.json() == {"entries": ["READER"]}
    assert created.headers["Location"].endswith(f"/api/2/policies/{IMPORTING}/imports/{TEMPLATE}")
    assert alice.put(one, {}).status_code == 204
    assert alice.get(one).json() == {}
    assert alice.get(f"/policies/{IMPORTING}").json()["imports"] == {TEMPLATE: {}}

    assert alice.put(imports, {TEMPLATE: {"entries": []}}).status_code == 204
    assert alice.get(imports).json() == {TEMPLATE: {"entries": []}}
    assert alice.delete(imports).status_code == 204
    assert alice.get(imports).json() == {}
    assert alice.get(f"/policies/{IMPORTING}").json()["imports"] == {}
    refused = alice.delete(f"{one}/entries")
    assert refused.status_code == 405


def test_malformed_imports_are_refused_with_dittos_errors(tmp_path, broker_factory, twin_store):
    _, alice, _, _ = _users(tmp_path, broker_factory, twin_store)
    _setup(alice, _reader(), {})
    imports = f"/policies/{IMPORTING}/imports"

    itself = alice.put(f"{imports}/{IMPORTING}", {})
    assert itself.status_code == 400
    assert itself.json() == {
        "status": 400,
        "error": "policies:import.invalid",
        "message": "The Policy Import is invalid.",
        "description": "The Policy Import references the policy where it is defined.",
    }
    whole = alice.put(f"/policies/{IMPORTING}",
                      {"imports": {IMPORTING: {}}, "entries": {"OWNER": _owner()}})
    assert whole.status_code == 400 and whole.json()["error"] == "policies:import.invalid"
    cases = [
        (imports, [], "json.invalid"),
        (imports, {"not-an-id": {}}, "policies:id.invalid"),
        (imports, {TEMPLATE: []}, "json.invalid"),
        (f"{imports}/{TEMPLATE}", {"entries": "READER"}, "json.invalid"),
        (f"{imports}/{TEMPLATE}", {"entries": ["imported-x"]}, "policies:label.invalid"),
        (f"{imports}/{TEMPLATE}", {"transitiveImports": [1]}, "policies:import.invalid"),
        (f"{imports}/not-an-id", {}, "policies:id.invalid"),
    ]
    for path, body, error in cases:
        r = alice.put(path, body)
        assert (r.status_code, r.json()["error"]) == (400, error), (path, body, r.text)

    # At most ten imports (Ditto's `imports-limit`).
    for n in range(10):
        other = f"org.acme:t{n}"
        assert alice.put(f"/policies/{other}", {"entries": {"OWNER": _owner()}}).status_code == 201
        assert alice.put(f"{imports}/{other}", {}).status_code == 201
    eleventh = alice.put(f"{imports}/{TEMPLATE}", {})
    assert eleventh.status_code == 400
    assert eleventh.json()["error"] == "policies:imports.toolarge"
    assert eleventh.json()["message"] == (
        f"The Imports of the Policy with ID '{TEMPLATE}' could not be modified as they exceed "
        "the allowed number of '10'.")
    many = {f"org.acme:t{n}": {} for n in range(10)} | {TEMPLATE: {}}
    replaced = alice.put(imports, many)
    assert replaced.status_code == 400
    assert replaced.json()["message"] == (
        "The number of '11' policy imports exceeds the allowed maximum number of '10'.")


def test_importing_needs_read_on_the_imported_entries(tmp_path, broker_factory, twin_store):
    """Ditto's PolicyImportsPreEnforcer: READ on every entry an import
    brings in, in the imported policy; its 404 otherwise."""
    _, alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    # bob owns his own policy; the template is alice's and bob reads only
    # its PUBLIC entry.
    bobs = "org.acme:bobs"
    r = bob.put(f"/policies/{bobs}", {"entries": {"OWNER": _owner("nginx:bob")}})
    assert r.status_code == 201, r.text
    template = {"entries": {
        "OWNER": _owner(),
        "PUBLIC": {"subjects": {"nginx:carol": {"type": "generated"}},
                   "resources": {"thing:/": {"grant": ["READ"], "revoke": []}},
                   "importable": "implicit"},
        "BOB": {"subjects": {"nginx:bob": {"type": "generated"}},
                "resources": {"policy:/entries/PUBLIC": {"grant": ["READ"], "revoke": []}},
                "importable": "never"},
        "SECRET": {"subjects": {}, "resources": {}, "importable": "explicit"},
    }}
    assert alice.put(f"/policies/{TEMPLATE}", template).status_code == 201

    one = f"/policies/{bobs}/imports/{TEMPLATE}"
    assert bob.put(one, {}).status_code == 201
    refused = bob.put(one, {"entries": ["SECRET"]})
    assert refused.status_code == 404
    assert refused.json() == {
        "status": 404,
        "error": "policies:policy.notfound",
        "message": f"The Policy with ID '{TEMPLATE}' could not be found or requester had "
                   "insufficient permissions to access it.",
        "description": "Check if the ID of the imported Policy was correct and you have "
                       "sufficient permissions on all imported policy entries.",
    }
    assert bob.put(f"{one}/entries", ["SECRET"]).status_code == 404
    assert bob.put(f"/policies/{bobs}/imports", {TEMPLATE: {"entries": ["SECRET"]}}).status_code == 404
    nowhere = bob.put(f"/policies/{bobs}/imports/org.acme:nowhere", {})
    assert nowhere.status_code == 404
    assert nowhere.json()["message"].startswith("The Policy with ID 'org.acme:nowhere'")
    # An implicit entry bob may not read makes the whole import refused.
    assert alice.put(f"/policies/{TEMPLATE}/entries/OWNER", _owner(importable="implicit")).status_code == 204
    assert bob.put(f"/policies/{bobs}", {"imports": {TEMPLATE: {}},
                                        "entries": {"OWNER": _owner("nginx:bob")}}).status_code == 404
    # Deleting an import needs no READ on what it imported.
    assert bob.delete(one).status_code == 204


def test_imports_need_write_on_the_importing_policy(tmp_path, broker_factory, twin_store):
    _, alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    _setup(alice, _reader(), {TEMPLATE: {}})
    # bob may read the importing policy's imports, not change them.
    guest = {"subjects": {"nginx:bob": {"type": "generated"}},
             "resources": {"policy:/imports": {"grant": ["READ"], "revoke": []},
                           "policy:/entries/READER": {"grant": ["READ"], "revoke": []}}}
    assert alice.put(f"/policies/{IMPORTING}/entries/GUEST", guest).status_code == 201
    assert alice.put(f"/policies/{TEMPLATE}/entries/GUEST", {**guest, "importable": "never"}).status_code == 201
    imports = f"/policies/{IMPORTING}/imports"
    assert bob.get(imports).json() == {TEMPLATE: {}}
    cases = [
        (bob.put(imports, {}), "policies:imports.notmodifiable"),
        (bob.delete(imports), "policies:imports.notmodifiable"),
        (bob.put(f"{imports}/{TEMPLATE}", {}), "policies:import.notmodifiable"),
        (bob.delete(f"{imports}/{TEMPLATE}"), "policies:import.notmodifiable"),
        (bob.put(f"{imports}/{TEMPLATE}/entries", []), "policies:import.notmodifiable"),
    ]
    for refused, error in cases:
        assert (refused.status_code, refused.json()["error"]) == (403, error), refused.text
    assert bob.put(f"{imports}/{TEMPLATE}", {}).json()["message"] == (
        f"The Import of the Policy with ID '{TEMPLATE}' in Policy with ID '{IMPORTING}' could "
        "not be modified as the requester had insufficient permissions.")


def test_imports_over_the_ditto_protocol(tmp_path, broker_factory, twin_store):
    broker, alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    _setup(alice, _reader("explicit"), {})
    ws = DittoWs(broker, "alice", "a-secret")
    topic = "org.acme/importing/policies/commands/"

    ws.send(envelope(topic + "modify", f"/imports/{TEMPLATE}", {}, **{"correlation-id": "c1"}))
    created = ws.recv()
    assert (created["status"], created["value"], created["path"]) == (201, {}, f"/imports/{TEMPLATE}")
    ws.send(envelope(topic + "modify", f"/imports/{TEMPLATE}/entries", ["READER"]))
    assert ws.recv()["status"] == 204
    ws.send(envelope(topic + "retrieve", "/imports"))
    assert ws.recv()["value"] == {TEMPLATE: {"entries": ["READER"]}}
    assert bob.get(f"/things/{THING}").status_code == 200
    ws.send(envelope(topic + "delete", f"/imports/{TEMPLATE}"))
    assert ws.recv()["status"] == 204
    ws.send(envelope(topic + "retrieve", f"/imports/{TEMPLATE}"))
    error = ws.recv()
    assert error["topic"] == "org.acme/importing/policies/errors"
    assert (error["status"], error["value"]["error"]) == (404, "policies:import.notfound")
    assert bob.get(f"/things/{THING}").status_code == 404
    ws.close()
