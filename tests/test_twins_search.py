"""Ditto's search API (/api/2/search/things and /count) on the real binary,
on SQLite and PostgreSQL (`twin_store`): every RQL operator over HTTP,
paging, counts, namespaces, fields, policies, errors, and the examples of
Ditto's documentation (httpapi-search.md, basic-rql.md) as written.

Things are made with `PUT /api/2/things/{id}` (the things API)."""

from __future__ import annotations

import pytest

from conftest import make_password_file
from twins import Ditto

pytestmark = pytest.mark.ferry_only

OWNER = "nginx:ditto"


def _policy(*entries: tuple[str, dict]) -> dict:
    return {"entries": {f"E{i}": {
        "subjects": {subject: {"type": "generated"}},
        "resources": {key: {"grant": grant, "revoke": revoke}
                      for key, (grant, revoke) in resources.items()},
    } for i, (subject, resources) in enumerate(entries)}}


def _owner(subject: str) -> tuple[str, dict]:
    return subject, {"thing:/": (["READ", "WRITE"], []), "policy:/": (["READ", "WRITE"], [])}


def _put_thing(ditto: Ditto, thing_id: str, policy_id: str, attributes: dict,
               features: dict | None = None) -> None:
    body = {"policyId": policy_id, "attributes": attributes}
    if features is not None:
        body["features"] = features
    r = ditto.put(f"/things/{thing_id}", body)
    assert r.status_code in (201, 204), r.text


def _search(ditto: Ditto, **params) -> dict:
    r = ditto.get("/search/things", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def _ids(ditto: Ditto, **params) -> list[str]:
    return [item["thingId"] for item in _search(ditto, **params)["items"]]


def _count(ditto: Ditto, **params) -> int:
    r = ditto.get("/search/things/count", params=params)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def ditto(broker_factory, twin_store) -> Ditto:
    b = broker_factory({"twins": twin_store})
    d = Ditto(f"http://{b.host}:{b.http_port}")
    assert d.put("/policies/org.eclipse.ditto:p", _policy(_owner(OWNER))).status_code == 201
    return d


THINGS = {
    # id: (attributes, features)
    "org.eclipse.ditto:a": ({"location": "living-room", "n": 1, "name": "Alpha", "tags": ["x", "y"],
                             "manufacturer": "ACME"},
                            {"temp": {"properties": {"value": 21.5}}}),
    "org.eclipse.ditto:b": ({"location": "kitchen", "n": 2, "name": "beta", "flag": True},
                            {"temp": {"properties": {"value": 19}}, "lamp": {"properties": {"on": True}}}),
    "org.eclipse.ditto:c": ({"location": "living-room", "n": 3, "name": "Gamma", "nothing": None},
                            {}),
    "foo.bar:d": ({"location": "living-room", "n": 4, "name": "delta"},
                  {"lamp": {"properties": {"on": False}}}),
}


@pytest.fixture
def things(ditto) -> Ditto:
    for thing_id, (attributes, features) in THINGS.items():
        _put_thing(ditto, thing_id, "org.eclipse.ditto:p", attributes, features)
    return ditto


@pytest.mark.parametrize("filter_, expected", [
    ('eq(attributes/location,"kitchen")', ["org.eclipse.ditto:b"]),
    ('ne(attributes/location,"kitchen")', ["foo.bar:d", "org.eclipse.ditto:a", "org.eclipse.ditto:c"]),
    ("gt(attributes/n,2)", ["foo.bar:d", "org.eclipse.ditto:c"]),
    ("ge(attributes/n,2)", ["foo.bar:d", "org.eclipse.ditto:b", "org.eclipse.ditto:c"]),
    ("lt(attributes/n,2)", ["org.eclipse.ditto:a"]),
    ("le(attributes/n,2)", ["org.eclipse.ditto:a", "org.eclipse.ditto:b"]),
    ('in(attributes/location,"kitchen","nowhere")', ["org.eclipse.ditto:b"]),
    ('like(attributes/name,"*amma")', ["org.eclipse.ditto:c"]),
    ('like(attributes/name,"?eta")', ["org.eclipse.ditto:b"]),
    ('ilike(attributes/name,"ALPHA")', ["org.eclipse.ditto:a"]),
    ("exists(attributes/flag)", ["org.eclipse.ditto:b"]),
    ("exists(features/lamp)", ["foo.bar:d", "org.eclipse.ditto:b"]),
    ('and(eq(attributes/location,"living-room"),gt(attributes/n,1))', ["foo.bar:d", "org.eclipse.ditto:c"]),
    ('or(eq(attributes/n,1),eq(attributes/n,4))', ["foo.bar:d", "org.eclipse.ditto:a"]),
    ('not(eq(attributes/location,"living-room"))', ["org.eclipse.ditto:b"]),
    ('eq(attributes/tags,"y")', ["org.eclipse.ditto:a"]),
    ("gt(features/*/properties/value,20)", ["org.eclipse.ditto:a"]),
    ("eq(features/lamp/properties/on,true)", ["org.eclipse.ditto:b"]),
    ('eq(thingId,"org.eclipse.ditto:c")', ["org.eclipse.ditto:c"]),
    ('eq(_namespace,"foo.bar")', ["foo.bar:d"]),
])
def test_every_rql_operator_over_http(things, filter_, expected):
    assert _ids(things, filter=filter_) == expected
    assert _count(things, filter=filter_) == len(expected)
    posted = things.session.post(things.base + "/search/things", data={"filter": filter_})
    assert posted.status_code == 200, posted.text
    assert [i["thingId"] for i in posted.json()["items"]] == expected


def test_sort_size_cursor_and_limit(things):
    assert _ids(things, option="sort(-attributes/n)") == [
        "foo.bar:d", "org.eclipse.ditto:c", "org.eclipse.ditto:b", "org.eclipse.ditto:a"]
    assert _ids(things, option="sort(+attributes/name)")[0] == "org.eclipse.ditto:a"  # "Alpha" < "Gamma" < "beta"
    whole = _search(things)
    assert whole["nextPageOffset"] == -1 and "cursor" not in whole

    first = _search(things, option="size(3)")
    assert len(first["items"]) == 3 and "nextPageOffset" not in first
    second = _search(things, option=f"cursor({first['cursor']}),size(3)")
    assert [i["thingId"] for i in second["items"]] == ["org.eclipse.ditto:c"]
    assert "cursor" not in second and "nextPageOffset" not in second

    no_size = _search(things, option="sort(+attributes/n)", filter="exists(attributes/n)")
    assert no_size["nextPageOffset"] == -1
    limited = _search(things, option="sort(+attributes/n),limit(1,2)")
    assert [i["thingId"] for i in limited["items"]] == ["org.eclipse.ditto:b", "org.eclipse.ditto:c"]
    assert limited["nextPageOffset"] == 3 and "cursor" not in limited
    assert _search(things, option="limit(2,5)")["nextPageOffset"] == -1


def test_paging_through_many_with_cursors_has_no_duplicates_and_no_gaps(ditto):
    for n in range(53):
        _put_thing(ditto, f"org.eclipse.ditto:t{n:03}", "org.eclipse.ditto:p", {"n": n % 7})
    for option in ("size(5)", "sort(-attributes/n),size(4)", "sort(+attributes/n,-thingId),size(10)"):
        seen = []
        page = _search(ditto, option=option)
        while True:
            seen += [i["thingId"] for i in page["items"]]
            if "cursor" not in page:
                break
            page = _search(ditto, option=f"cursor({page['cursor']}),size(5)")
        assert sorted(seen) == [f"org.eclipse.ditto:t{n:03}" for n in range(53)], option
        assert len(set(seen)) == 53
    assert _count(ditto) == 53


def test_namespaces_and_fields(things):
    assert _ids(things, namespaces="foo.bar") == ["foo.bar:d"]
    assert len(_ids(things, namespaces="foo.bar,org.eclipse.ditto")) == 4
    assert _count(things, namespaces="foo.bar") == 1
    assert _ids(things, namespaces="nope") == []
    items = _search(things, filter='eq(thingId,"org.eclipse.ditto:a")',
                    fields="thingId,attributes/manufacturer")["items"]
    assert items == [{"thingId": "org.eclipse.ditto:a", "attributes": {"manufacturer": "ACME"}}]
    items = _search(things, filter='eq(thingId,"org.eclipse.ditto:b")', fields="attributes/n")["items"]
    assert items == [{"attributes": {"n": 2}}]


def test_a_second_user_finds_only_what_policies_allow(tmp_path, broker_factory, twin_store):
    passwords = make_password_file(tmp_path / "passwords", {"alice": "a-secret", "bob": "b-secret"})
    b = broker_factory({"auth": {"password_file": str(passwords)}, "twins": twin_store})
    base = Ditto(f"http://{b.host}:{b.http_port}")
    alice, bob = base.as_user("alice", "a-secret"), base.as_user("bob", "b-secret")
    assert alice.put("/policies/ns:alice", _policy(_owner("nginx:alice"))).status_code == 201
    shared = _policy(_owner("nginx:alice"),
                     ("nginx:bob", {"thing:/": (["READ"], []), "thing:/attributes/secret": ([], ["READ"])}))
    assert alice.put("/policies/ns:shared", shared).status_code == 201
    assert bob.put("/policies/ns:bob", _policy(_owner("nginx:bob"))).status_code == 201
    for n in range(6):
        _put_thing(alice, f"ns:a{n}", "ns:shared" if n % 2 else "ns:alice", {"n": n, "secret": n % 3})
    _put_thing(bob, "ns:b0", "ns:bob", {"n": 100, "secret": 1})

    assert _ids(alice) == [f"ns:a{n}" for n in range(6)]
    assert _ids(bob) == ["ns:a1", "ns:a3", "ns:a5", "ns:b0"]
    assert _count(alice) == 6 and _count(bob) == 4
    shown = _search(bob, filter='eq(thingId,"ns:a1")')["items"][0]
    assert shown["attributes"] == {"n": 1}
    # The revoked attribute cannot be matched, nor matched against.
    assert _ids(bob, filter="eq(attributes/secret,1)") == ["ns:b0"]
    assert _count(bob, filter="exists(attributes/secret)") == 1
    assert _ids(bob, filter="not(eq(attributes/secret,1))") == ["ns:a1", "ns:a3", "ns:a5"]
    assert _count(bob, filter="not(eq(attributes/secret,1))") == 3
    assert _ids(alice, filter="eq(attributes/secret,1)") == ["ns:a1", "ns:a4"]
    # Unauthenticated: 401.
    anonymous = base.session.__class__().get(base.base + "/search/things", timeout=10)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"] == "gateway:authentication.failed"


def test_read_your_writes(ditto):
    for n in range(30):
        _put_thing(ditto, f"org.eclipse.ditto:w{n}", "org.eclipse.ditto:p", {"n": n})
        assert _ids(ditto, filter=f"eq(attributes/n,{n})") == [f"org.eclipse.ditto:w{n}"]
        assert _count(ditto) == n + 1


@pytest.mark.parametrize("params, status, error", [
    ({"filter": "eq(attributes/a"}, 400, "rql.expression.invalid"),
    ({"filter": "eq(foo,1)"}, 400, "rql.expression.invalid"),
    ({"filter": " eq(thingId,1)"}, 400, "rql.expression.invalid"),
    ({"option": "size(500)"}, 400, "thing-search:search.option.invalid"),
    ({"option": "sort(+foo)"}, 400, "thing-search:search.option.invalid"),
    ({"option": "size(0)"}, 400, "thing-search:search.option.invalid"),
    ({"option": "cursor(a),limit(0,5)"}, 400, "thing-search:search.option.invalid"),
    ({"option": "cursor(not-a-cursor)"}, 400, "thing-search:search.option.invalid"),
    ({"option": "bogus(1)"}, 400, "rql.expression.invalid"),
    ({"fields": "attributes(model"}, 400, "json.fieldselector.invalid"),
])
def test_malformed_input(ditto, params, status, error):
    r = ditto.get("/search/things", params=params)
    assert r.status_code == status, r.text
    assert r.json()["error"] == error and r.json()["status"] == status


def test_a_cursor_continues_only_its_own_query(things):
    page = _search(things, option="size(1)", filter="exists(attributes/n)")
    other = things.get("/search/things", params={"option": f"cursor({page['cursor']})",
                                                 "filter": "exists(attributes/name)"})
    assert other.status_code == 400 and other.json()["error"] == "thing-search:search.option.invalid"
    same = _search(things, option=f"cursor({page['cursor']})", filter="exists(attributes/n)")
    assert len(same["items"]) == 3


def test_count_errors_and_post_media_type(ditto):
    r = ditto.get("/search/things/count", params={"filter": "eq("})
    assert r.status_code == 400 and r.json()["error"] == "rql.expression.invalid"
    r = ditto.session.post(ditto.base + "/search/things", json={"filter": "exists(thingId)"})
    assert r.status_code == 415 and r.json()["error"] == "mediatype.unsupported"
    assert ditto.session.post(ditto.base + "/search/things/count",
                             data={"namespaces": "org.eclipse.ditto"}).json() == 0


def test_dittos_documentation_examples_run_as_written(things):
    """httpapi-search.md and basic-rql.md, their requests as printed."""
    base = things.base
    get = lambda q: things.session.get(base + q, timeout=10)  # noqa: E731
    r = get('/search/things?filter=eq(attributes/location,"living-room")&option=sort(+thingId),limit(0,5)')
    assert r.status_code == 200, r.text
    assert [i["thingId"] for i in r.json()["items"]] == [
        "foo.bar:d", "org.eclipse.ditto:a", "org.eclipse.ditto:c"]
    r = get('/search/things?filter=eq(attributes/location,"living-room")&namespaces=org.eclipse.ditto,foo.bar')
    assert len(r.json()["items"]) == 3
    r = get('/search/things?filter=eq(attributes/location,"living-room")&fields=thingId,attributes/manufacturer')
    assert r.json()["items"][1] == {"thingId": "org.eclipse.ditto:a", "attributes": {"manufacturer": "ACME"}}
    # The documentation prints the form body unencoded; sent as a form,
    # its "+" must be %2B, since in a form body "+" is a space (Ditto's
    # gateway decodes forms so too).
    r = things.session.post(base + "/search/things",
                            data={"filter": 'eq(attributes/location,"living-room")',
                                  "option": "sort(+thingId),limit(0,5)"})
    assert r.status_code == 200 and len(r.json()["items"]) == 3, r.text
    assert get('/search/things/count?filter=eq(attributes/location,"living-room")').json() == 3
    r = things.session.post(base + "/search/things/count", data='filter=eq(attributes/location,"living-room")',
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.json() == 3
    # basic-rql.md
    for q, n in [
        ('/search/things?filter=and(eq(attributes/location,"living-room"),gt(attributes/n,2))', 2),
        ('/search/things?filter=exists(features/lamp)', 2),
        ('/search/things?filter=like(attributes/name,"*eta")', 1),
        ('/search/things?option=sort(+thingId),size(2)', 2),
    ]:
        r = get(q)
        assert r.status_code == 200 and len(r.json()["items"]) == n, (q, r.text)


BASIC_RQL_FILTERS = [
    'and(eq(attributes/floor,"upper floor"),eq(attributes/location,"living-room"))',
    'and(exists(features/lamp),eq(attributes/location,"living-room"))',
    'eq(attributes/location,"kitchen")',
    'eq(attributes/owner,"SID123")',
    "exists(features/feature_1)",
    'ge(thingId,"A000")', 'gt(thingId,"A000")', 'le(thingId,"A000")', 'lt(thingId,"A000")',
    'ilike(attributes/key1,"*KNOWN-CHARS-IN-BETWEEN*")',
    'ilike(attributes/key1,"*known-CHARS-at-end")',
    'ilike(attributes/key1,"just-som?-char?-unkn?wn")',
    'ilike(attributes/key1,"known-chars-AT-start*")',
    'in(thingId,"A000","AB00","AZ99")',
    'like(attributes/key1,"*known-chars-at-end")',
    'like(attributes/key1,"*known-chars-in-between*")',
    'like(attributes/key1,"just-som?-char?-unkn?wn")',
    'like(attributes/key1,"known-chars-at-start*")',
    'ne(attributes/owner,"SID123")',
    'not(like(thingId,"org.eclipse.ditto:blocked*"))',
    'or(eq(attributes/floor,"upper floor"),eq(attributes/location,"living-room"))',
]


def test_basic_rql_examples_run_as_written(things):
    """basic-rql.md's filters and sorts; its `and(eq(foo,…))` names fields
    Ditto does not know, and Ditto refuses it so."""
    for filter_ in BASIC_RQL_FILTERS:
        r = things.get("/search/things", params={"filter": filter_})
        assert r.status_code == 200, (filter_, r.text)
    assert len(_ids(things, filter='not(like(thingId,"org.eclipse.ditto:blocked*"))')) == 4
    assert _ids(things, filter='gt(thingId,"A000")') == list(sorted(THINGS))
    for option in ("sort(+attributes/location)", "sort(+thingId)", "sort(-attributes/location,+thingId)"):
        assert len(_ids(things, option=option)) == 4
    r = things.get("/search/things", params={"filter": 'and(eq(foo,"ditto"),lt(bar,10))'})
    assert r.status_code == 400 and r.json()["error"] == "rql.expression.invalid"
