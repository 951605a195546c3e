"""Ditto's policies API (/api/2/policies) on the real binary, with a real
HTTP client, on SQLite and on PostgreSQL (the `twin_store` fixture)."""

from __future__ import annotations

import pytest

from conftest import make_password_file
from twins import Ditto

pytestmark = pytest.mark.ferry_only

PID = "org.eclipse.ditto:policy-1"


def _entry(subject: str, resources: dict[str, tuple[list, list]]) -> dict:
    """An entry for one subject; resources map a key to (grant, revoke)."""
    return {
        "subjects": {subject: {"type": "generated"}},
        "resources": {key: {"grant": grant, "revoke": revoke}
                      for key, (grant, revoke) in resources.items()},
    }


def _owner(subject: str) -> dict:
    return {
        "subjects": {subject: {"type": "generated"}},
        "resources": {
            "thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
            "policy:/": {"grant": ["READ", "WRITE"], "revoke": []},
        },
    }


def _ditto(broker) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}")


def _users(tmp_path, broker_factory, twin_store) -> tuple[Ditto, Ditto, Ditto]:
    """A Ferry with a password file: alice, bob and carol."""
    passwords = make_password_file(tmp_path / "passwords",
                                   {"alice": "a-secret", "bob": "b-secret", "carol": "c-secret"})
    b = broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})
    base = _ditto(b)
    return (base.as_user("alice", "a-secret"), base.as_user("bob", "b-secret"),
            base.as_user("carol", "c-secret"))


def test_a_policy_and_each_of_its_parts_are_created_read_and_deleted(broker_factory, twin_store):
    ditto = _ditto(broker_factory({"twins": twin_store}))
    policy = {"entries": {"DEFAULT": _owner("nginx:ditto")}}

    created = ditto.put(f"/policies/{PID}", policy)
    assert created.status_code == 201, created.text
    assert created.headers["Location"].endswith(f"/api/2/policies/{PID}")
    assert created.json()["policyId"] == PID
    assert created.json()["entries"]["DEFAULT"]["subjects"] == {"nginx:ditto": {"type": "generated"}}

    assert ditto.put(f"/policies/{PID}", policy).status_code == 204
    assert ditto.get(f"/policies/{PID}").json()["entries"].keys() == {"DEFAULT"}
    assert ditto.get(f"/policies/{PID}/entries/DEFAULT/resources/thing:/").json() == {
        "grant": ["READ", "WRITE"], "revoke": []}

    subject = f"/policies/{PID}/entries/DEFAULT/subjects/nginx:guest"
    assert ditto.put(subject, {"type": "generated"}).status_code == 201
    assert ditto.put(subject, {"type": "other"}).status_code == 204
    assert ditto.get(subject).json() == {"type": "other"}
    assert ditto.delete(subject).status_code == 204
    missing = ditto.get(subject)
    assert missing.status_code == 404 and missing.json()["error"] == "policies:subject.notfound"

    entry = f"/policies/{PID}/entries/READER"
    assert ditto.put(entry, _entry("nginx:reader", {"thing:/": (["READ"], [])})).status_code == 201
    assert ditto.get(f"{entry}/subjects").json() == {"nginx:reader": {"type": "generated"}}
    assert ditto.delete(entry).status_code == 204
    gone = ditto.get(entry)
    assert gone.status_code == 404 and gone.json()["error"] == "policies:entry.notfound"

    assert ditto.delete(f"/policies/{PID}").status_code == 204
    after = ditto.get(f"/policies/{PID}")
    assert after.status_code == 404
    assert after.json() == {
        "status": 404,
        "error": "policies:policy.notfound",
        "message": f"The Policy with ID '{PID}' could not be found or requester had insufficient "
                   "permissions to access it.",
        "description": "Check if the ID of your requested Policy was correct and you have "
                       "sufficient permissions.",
    }


def test_another_user_reads_what_is_granted_and_writes_nothing(tmp_path, broker_factory,
                                                               twin_store):
    alice, bob, carol = _users(tmp_path, broker_factory, twin_store)
    policy = {"entries": {
        "OWNER": _owner("nginx:alice"),
        "GUEST": _entry("nginx:bob", {"policy:/entries/GUEST": (["READ"], [])}),
    }}
    assert alice.put(f"/policies/{PID}", policy).status_code == 201

    # bob reads his own entry and nothing else of the policy.
    view = bob.get(f"/policies/{PID}")
    assert view.status_code == 200, view.text
    assert view.json()["entries"].keys() == {"GUEST"}
    assert bob.get(f"/policies/{PID}/entries/GUEST/subjects").status_code == 200
    owner = bob.get(f"/policies/{PID}/entries/OWNER")
    assert owner.status_code == 404 and owner.json()["error"] == "policies:entry.notfound"

    refused = bob.put(f"/policies/{PID}/entries/GUEST/subjects/nginx:carol", {"type": "x"})
    assert refused.status_code == 403
    assert refused.json()["error"] == "policies:subject.notmodifiable"
    whole = bob.put(f"/policies/{PID}", policy)
    assert whole.status_code == 403 and whole.json()["error"] == "policies:policy.notmodifiable"
    assert bob.delete(f"/policies/{PID}").status_code == 403

    hidden = carol.get(f"/policies/{PID}")
    assert hidden.status_code == 404 and hidden.json()["error"] == "policies:policy.notfound"


def test_request_subject_id_names_whoever_writes(tmp_path, broker_factory, twin_store):
    """Ditto's `{{ request:subjectId }}` as a subject id, in a policy, an
    entry, a subject's path and a thing's inline policy: replaced by the
    writer's own subject, so a creator names itself without knowing how
    its login maps to a subject."""
    alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    me = "{{ request:subjectId }}"
    created = alice.put(f"/policies/{PID}", {"entries": {"OWNER": _owner(me)}})
    assert created.status_code == 201, created.text
    assert created.json()["entries"]["OWNER"]["subjects"] == {"nginx:alice": {"type": "generated"}}
    assert alice.get(f"/policies/{PID}/entries/OWNER/subjects").json() == {
        "nginx:alice": {"type": "generated"}}

    # alice lets bob in by his own placeholder: he writes his subject.
    guest = _entry("nginx:bob", {"policy:/entries/GUEST": (["READ", "WRITE"], [])})
    assert alice.put(f"/policies/{PID}/entries/GUEST", guest).status_code == 201
    added = bob.put(f"/policies/{PID}/entries/GUEST/subjects/{me}", {"type": "by-path"})
    assert added.status_code == 204, added.text
    assert bob.get(f"/policies/{PID}/entries/GUEST/subjects").json() == {
        "nginx:bob": {"type": "by-path"}}, "his own, replaced: not a second one"
    replaced = bob.put(f"/policies/{PID}/entries/GUEST",
                       _entry(me, {"policy:/entries/GUEST": (["READ", "WRITE"], [])}))
    assert replaced.status_code == 204, replaced.text
    assert bob.get(f"/policies/{PID}/entries/GUEST").json()["subjects"] == {
        "nginx:bob": {"type": "generated"}}

    thing = {"_policy": {"entries": {"OWNER": _owner(me)}}, "attributes": {"by": me}}
    made = bob.put("/things/org.acme:bobs", thing)
    assert made.status_code == 201, made.text
    assert made.json()["attributes"] == {"by": me}, "only subject ids are replaced"
    assert bob.get("/policies/org.acme:bobs/entries/OWNER/subjects").json() == {
        "nginx:bob": {"type": "generated"}}
    assert alice.get("/things/org.acme:bobs").status_code == 404


def test_a_revoke_beats_a_grant_at_the_same_level(tmp_path, broker_factory, twin_store):
    alice, bob, _ = _users(tmp_path, broker_factory, twin_store)
    policy = {"entries": {
        "OWNER": _owner("nginx:alice"),
        "GUEST": _entry("nginx:bob", {"policy:/": (["READ"], [])}),
        "DENY": _entry("nginx:bob", {"policy:/entries": ([], ["READ"])}),
    }}
    assert alice.put(f"/policies/{PID}", policy).status_code == 201
    view = bob.get(f"/policies/{PID}")
    assert view.status_code == 200
    assert "entries" not in view.json() and view.json()["policyId"] == PID


def test_writes_that_would_lock_every_writer_out_are_refused(tmp_path, broker_factory, twin_store):
    alice, _, _ = _users(tmp_path, broker_factory, twin_store)
    others_only = {"entries": {"OWNER": _owner("nginx:somebody-else")}}
    refused = alice.put(f"/policies/{PID}", others_only)
    assert refused.status_code == 403
    assert refused.json()["error"] == "policies:policy.notcreatable"

    assert alice.put(f"/policies/{PID}", {"entries": {"OWNER": _owner("nginx:alice")}}
                     ).status_code == 201
    lockout = alice.put(f"/policies/{PID}/entries/OWNER/resources/policy:/",
                        {"grant": ["READ"], "revoke": []})
    assert lockout.status_code == 403
    assert lockout.json()["error"] == "policies:entry.modificationinvalid"
    assert alice.get(f"/policies/{PID}/entries/OWNER/resources/policy:/").json()["grant"] == [
        "READ", "WRITE"]


def test_bad_bodies_ids_and_credentials_get_dittos_errors(tmp_path, broker_factory, twin_store):
    alice, _, _ = _users(tmp_path, broker_factory, twin_store)
    broken = alice.put_raw(f"/policies/{PID}", b'{"entries": ')
    assert broken.status_code == 400 and broken.json()["error"] == "json.invalid"

    bad_id = alice.put("/policies/no-namespace-separator", {"entries": {}})
    assert bad_id.status_code == 400 and bad_id.json()["error"] == "policies:id.invalid"

    anonymous = Ditto(alice.base[: -len("/api/2")]).get(f"/policies/{PID}")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"] == "gateway:authentication.failed"
    wrong = alice.as_user("alice", "not-her-password").get(f"/policies/{PID}")
    assert wrong.status_code == 401


def test_an_answered_write_survives_kill_9(broker_factory, twin_store):
    b = broker_factory({"twins": twin_store})
    policy = {"entries": {"DEFAULT": _owner("nginx:ditto")}}
    for n in range(20):
        assert _ditto(b).put(f"/policies/org.eclipse.ditto:p{n}", policy).status_code == 201
    b.restart(kill=True)
    ditto = _ditto(b)
    for n in range(20):
        assert ditto.get(f"/policies/org.eclipse.ditto:p{n}").status_code == 200
