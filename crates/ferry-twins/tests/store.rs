//! One suite, both stores: SQLite in a temporary directory and PostgreSQL
//! in a throwaway cluster (`support/postgres.rs`).

mod support;

use ferry_twins::store::postgres::PostgresStore;
use ferry_twins::store::sqlite::SqliteStore;
use ferry_twins::store::{
    EventRecord, Expect, PolicyRecord, Store, StoreError, ThingRecord, Write, PRUNE_BATCH,
};
use serde_json::{json, Value};
use std::sync::Arc;

fn thing(id: &str, revision: u64, doc: Value) -> ThingRecord {
    ThingRecord {
        id: id.to_owned(),
        policy_id: Some(id.to_owned()),
        revision,
        created: "2026-11-25T00:00:00Z".into(),
        modified: format!("2026-11-25T00:00:{revision:02}Z"),
        doc: Arc::new(doc),
    }
}

fn policy(id: &str, revision: u64) -> PolicyRecord {
    PolicyRecord {
        id: id.to_owned(),
        revision,
        created: "2026-11-25T00:00:00Z".into(),
        modified: "2026-11-25T00:00:00Z".into(),
        doc: Arc::new(json!({"policyId": id, "entries": {"DEFAULT": {}}})),
    }
}

async fn conformance(store: Store) {
    let store = Arc::new(store);

    // A thing and its policy, created together; the document keeps its
    // field order.
    let doc =
        json!({"thingId": "a:b", "policyId": "a:b", "zeta": 1, "attributes": {"y": 1, "x": 2}});
    let created = thing("a:b", 1, doc);
    store
        .commit(vec![
            Write::Policy { record: policy("a:b", 1), expect: Expect::Absent },
            Write::Thing { record: created.clone(), expect: Expect::Absent },
        ])
        .await
        .unwrap();
    let read = store.thing("a:b").await.unwrap().unwrap();
    assert_eq!(read, created);
    assert_eq!(
        serde_json::to_string(&*read.doc).unwrap(),
        serde_json::to_string(&*created.doc).unwrap()
    );
    assert_eq!(store.policy("a:b").await.unwrap().unwrap().revision, 1);
    assert_eq!(store.thing("a:none").await.unwrap(), None);

    // Creating it again conflicts.
    let again =
        store.commit(vec![Write::Thing { record: created.clone(), expect: Expect::Absent }]);
    assert!(matches!(again.await, Err(StoreError::Conflict { entity: "thing", .. })));

    // Two writers from revision 1: one wins, the other conflicts, and the
    // loser's policy in the same group is not written.
    let first = store.commit(vec![Write::Thing {
        record: thing("a:b", 2, json!({"attributes": {"x": 2}})),
        expect: Expect::Revision(1),
    }]);
    let second = store.commit(vec![
        Write::Policy { record: policy("p:q", 1), expect: Expect::Absent },
        Write::Thing {
            record: thing("a:b", 2, json!({"attributes": {"x": 3}})),
            expect: Expect::Revision(1),
        },
    ]);
    let (first, second) = tokio::join!(first, second);
    assert!(first.is_ok() != second.is_ok(), "{first:?} {second:?}");
    assert_eq!(store.policy("p:q").await.unwrap().is_some(), second.is_ok());
    let now = store.thing("a:b").await.unwrap().unwrap();
    assert_eq!(now.revision, 2);
    assert_eq!(now.modified, "2026-11-25T00:00:02Z");
    assert_eq!(now.created, "2026-11-25T00:00:00Z", "created stays");

    // Many concurrent writers, one group each: all commit.
    let writes: Vec<_> = (0..200)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .commit(vec![Write::Thing {
                        record: thing(&format!("ns.x:t{n}"), 1, json!({"attributes": {"n": n}})),
                        expect: Expect::Absent,
                    }])
                    .await
            })
        })
        .collect();
    for write in writes {
        write.await.unwrap().unwrap();
    }
    let t7 = store.thing("ns.x:t7").await.unwrap().unwrap();
    assert_eq!(t7.doc["attributes"]["n"], 7);
    assert_eq!(t7.namespace(), "ns.x");

    // Deleting with a stale revision conflicts; with the right one it goes.
    let stale =
        store.commit(vec![Write::DeleteThing { id: "a:b".into(), expect: Expect::Revision(1) }]);
    assert!(stale.await.is_err());
    store
        .commit(vec![Write::DeleteThing { id: "a:b".into(), expect: Expect::Revision(2) }])
        .await
        .unwrap();
    assert_eq!(store.thing("a:b").await.unwrap(), None);
    store
        .commit(vec![Write::DeletePolicy { id: "a:b".into(), expect: Expect::Revision(1) }])
        .await
        .unwrap();
    assert_eq!(store.policy("a:b").await.unwrap(), None);
    journal_conformance(&store).await;
}

#[tokio::test]
async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
    conformance(Store::Sqlite(store)).await;
}

#[tokio::test]
async fn postgres() {
    let cluster = support::postgres::Cluster::start();
    let store = PostgresStore::open(&cluster.url()).await.unwrap();
    conformance(Store::Postgres(store)).await;
}

// ---------------------------------------------------------------- journal

fn event(thing_id: &str, revision: u64, at: i64) -> EventRecord {
    EventRecord {
        thing_id: thing_id.to_owned(),
        policy_id: Some(thing_id.to_owned()),
        revision,
        timestamp: format!("2026-11-25T00:00:{revision:02}Z"),
        at,
        action: "modified".into(),
        path: "/attributes/x".into(),
        value: Some(Arc::new(json!({"x": [revision, null, "s"]}))),
        correlation_id: Some(format!("change-{revision}")),
        originator: Some("nginx:ditto".into()),
    }
}

/// Run by `conformance`, after it.
async fn journal_conformance(store: &Store) {
    let first = event("a:b", 1, 100);
    let created = thing("a:b", 1, json!({"attributes": {"x": 1}}));
    let committed = store
        .commit_journaled(vec![
            Write::Thing { record: created, expect: Expect::Absent },
            Write::Event(first.clone()),
        ])
        .await
        .unwrap();
    let [one] = committed.events[..] else { panic!("{committed:?}") };
    let second = EventRecord {
        action: "deleted".into(),
        value: None,
        correlation_id: None,
        originator: None,
        ..event("a:b", 2, 200)
    };
    let [two] =
        store.commit_journaled(vec![Write::Event(second.clone())]).await.unwrap().events[..]
    else {
        panic!("one place")
    };
    assert!(two > one);

    // A group that fails writes no entry either.
    let failed = store.commit_journaled(vec![
        Write::Thing { record: thing("a:b", 9, json!({})), expect: Expect::Revision(8) },
        Write::Event(event("a:b", 9, 300)),
    ]);
    assert!(matches!(failed.await, Err(StoreError::Conflict { .. })));
    assert_eq!(
        store.events_after(0, 10).await.unwrap(),
        [(one, first.clone()), (two, second.clone())]
    );
    assert_eq!(store.events_after(one, 10).await.unwrap(), [(two, second.clone())]);
    assert_eq!(store.events_after(0, 1).await.unwrap(), [(one, first)]);

    // Pruning takes what is older than its bound, oldest first, a batch
    // at most, and leaves the newest entry.
    let pruned = store.commit_journaled(vec![Write::PruneEvents { before: 200 }]).await.unwrap();
    assert_eq!(pruned.pruned, 1);
    assert_eq!(store.events_after(0, 10).await.unwrap(), [(two, second.clone())]);
    let pruned = store.commit_journaled(vec![Write::PruneEvents { before: i64::MAX }]);
    assert_eq!(pruned.await.unwrap().pruned, 0, "the newest stays");
    let many: Vec<Write> =
        (0..=PRUNE_BATCH).map(|n| Write::Event(event("a:c", n + 1, 400))).collect();
    store.commit(many).await.unwrap();
    let pruned = store.commit_journaled(vec![Write::PruneEvents { before: 500 }]);
    assert_eq!(pruned.await.unwrap().pruned, PRUNE_BATCH);
    assert_eq!(store.events_after(0, 10).await.unwrap().len(), 2);

    // A place is never handed out again, even after pruning all it may.
    store.commit(vec![Write::PruneEvents { before: i64::MAX }]).await.unwrap();
    let [(newest, _)] = store.events_after(0, 10).await.unwrap()[..] else {
        panic!("the newest entry stays")
    };
    let [three] =
        store.commit_journaled(vec![Write::Event(event("a:b", 3, 600))]).await.unwrap().events[..]
    else {
        panic!("one place")
    };
    assert!(three > newest);
    assert!(three > two + PRUNE_BATCH);
}

// ---------------------------------------------------------------- search

use ferry_twins::rql::{Filter, NoPlaceholders, Scope, SearchQuery, Semantics};
use ferry_twins::store::index::{entries, Leaf};
use ferry_twins::store::search::{Cursor, Found, SearchRequest, SortValue};
use std::cmp::Ordering;

/// Things that exercise types, arrays, nesting, features, missing fields
/// and characters SQL gives a meaning.
fn search_fixture() -> Vec<ThingRecord> {
    let docs = [
        (
            "t:1",
            json!({"definition": "d:a:1", "attributes": {"location": "x", "n": 1, "tags": ["a", "b"], "on": true, "nested": {"deep": {"v": "q"}}, "mixed": 5},
            "features": {"temp": {"properties": {"value": 19.5, "unit": "C"}}, "hum": {"properties": {"value": 40}}}}),
        ),
        (
            "t:2",
            json!({"attributes": {"location": "y", "n": 2, "tags": ["c"], "on": false, "mixed": "5", "s": "it's 100% _true_\\"},
            "features": {"temp": {"properties": {"value": 21}, "desiredProperties": {"value": 22}}}}),
        ),
        ("t:3", json!({"attributes": {"location": "X", "n": 2.5, "mixed": null, "e": ""}})),
        (
            "t:4",
            json!({"attributes": {"n": -1, "mixed": true, "tags": [1, "a", null]},
            "features": {"f": {"definition": ["a:b:1"], "properties": {"p": 1}}}}),
        ),
        (
            "u:5",
            json!({"attributes": {"location": "Ä", "n": 10, "obj": {"a": 1}, "mixed": [3, "z"]}}),
        ),
        ("u:6", json!({"features": {"w": {"properties": {"x": "%_'"}}}})),
        ("t:7", json!({"attributes": {"location": "x%", "n": 3, "s": "a[b]c*", "mixed": false}})),
        (
            "t:8",
            json!({"attributes": {"location": "x_y", "items": [{"k": 1}, {"k": 2}], "mixed": "abc"}}),
        ),
        ("t:9", json!({"attributes": {"location": "x'--", "n": 3, "mixed": -2.5}})),
    ];
    docs.into_iter()
        .enumerate()
        .map(|(n, (id, doc))| {
            let mut record = thing(id, 1 + n as u64 % 3, doc);
            record.policy_id = match n % 3 {
                0 => Some("p:a".into()),
                1 => Some("p:b".into()),
                _ => None,
            };
            record
        })
        .collect()
}

/// The thing as the in-memory evaluator reads it.
fn eval_doc(record: &ThingRecord) -> Value {
    let mut doc = (*record.doc).clone();
    let fields = doc.as_object_mut().unwrap();
    fields.insert("thingId".into(), json!(record.id));
    if let Some(policy) = &record.policy_id {
        fields.insert("policyId".into(), json!(policy));
    }
    fields.insert("_revision".into(), json!(record.revision));
    fields.insert("_created".into(), json!(record.created));
    fields.insert("_modified".into(), json!(record.modified));
    doc
}

fn request(filter: Option<&str>, options: Option<&str>) -> SearchRequest {
    let query = SearchQuery::parse(filter, options).unwrap();
    SearchRequest {
        filter: query.filter,
        namespaces: None,
        sort: query.options.effective_sort(),
        after: None,
        limit: 1000,
    }
}

fn ids(found: &[Found]) -> Vec<String> {
    found.iter().map(|f| f.record.id.clone()).collect()
}

/// The order `search.rs` defines, as a model: rank, then value.
fn model_value(record: &ThingRecord, field: &str, descending: bool) -> SortValue {
    match field {
        "thingId" => return SortValue::String(record.id.clone()),
        "policyId" => return record.policy_id.clone().map_or(SortValue::Null, SortValue::String),
        "_revision" => return SortValue::Number(record.revision as f64),
        _ => {}
    }
    let values =
        entries(&record.doc).into_iter().filter(|e| e.path == field).map(|e| match e.value {
            Leaf::Null => SortValue::Null,
            Leaf::Bool(b) => SortValue::Bool(b),
            Leaf::Number(x) => SortValue::Number(x),
            Leaf::String(s) => SortValue::String(s),
        });
    let best = if descending { values.max_by(model_order) } else { values.min_by(model_order) };
    best.unwrap_or(SortValue::Null)
}

fn model_order(a: &SortValue, b: &SortValue) -> Ordering {
    let rank = |v: &SortValue| match v {
        SortValue::Null => 0,
        SortValue::Number(_) => 1,
        SortValue::String(_) => 2,
        SortValue::Bool(_) => 3,
    };
    match (a, b) {
        (SortValue::Number(x), SortValue::Number(y)) => x.partial_cmp(y).unwrap(),
        (SortValue::String(x), SortValue::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (SortValue::Bool(x), SortValue::Bool(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

fn model_sorted(things: &[ThingRecord], sort: &[(&str, bool)]) -> Vec<String> {
    let mut sorted: Vec<&ThingRecord> = things.iter().collect();
    sorted.sort_by(|a, b| {
        for (field, descending) in sort {
            let order = model_order(
                &model_value(a, field, *descending),
                &model_value(b, field, *descending),
            );
            let order = if *descending { order.reverse() } else { order };
            if order != Ordering::Equal {
                return order;
            }
        }
        a.id.cmp(&b.id)
    });
    sorted.into_iter().map(|r| r.id.clone()).collect()
}

/// Every page of `request` of `size`, through the opaque cursor.
async fn all_pages(store: &Store, request: &SearchRequest, size: usize) -> Vec<String> {
    let mut seen = Vec::new();
    let mut next = SearchRequest { limit: size, ..request.clone() };
    for _ in 0..1000 {
        let page = store.search(&next).await.unwrap();
        assert!(page.len() <= size);
        seen.extend(ids(&page));
        let Some(last) = page.last() else { break };
        let cursor = Cursor::decode(&Cursor::after(request, last.key.clone()).encode()).unwrap();
        cursor.check(request.filter.as_ref(), None, Some(&request.sort)).unwrap();
        next = cursor.request(size);
    }
    seen
}

async fn search_conformance(store: Store) {
    let things = search_fixture();
    for record in &things {
        store
            .commit(vec![Write::Thing { record: record.clone(), expect: Expect::Absent }])
            .await
            .unwrap();
    }

    // Filters: the store agrees with RQL's evaluator under search's
    // semantics, thing by thing.
    let filters = [
        r#"eq(attributes/location,"x")"#,
        r#"ne(attributes/location,"x")"#,
        r#"not(eq(attributes/location,"x"))"#,
        "gt(attributes/n,1)",
        "ge(attributes/n,2)",
        "lt(attributes/n,2)",
        "le(attributes/n,2.5)",
        "eq(attributes/n,2)",
        "eq(attributes/n,2.0)",
        r#"in(attributes/n,1,2,"x")"#,
        r#"in(attributes/location,"x","y",null)"#,
        "eq(attributes/mixed,5)",
        r#"eq(attributes/mixed,"5")"#,
        "eq(attributes/mixed,null)",
        "ge(attributes/mixed,null)",
        "gt(attributes/mixed,null)",
        "eq(attributes/mixed,true)",
        "lt(attributes/mixed,true)",
        r#"gt(attributes/mixed,"0")"#,
        "gt(attributes/mixed,0)",
        r#"eq(attributes/tags,"a")"#,
        r#"ne(attributes/tags,"a")"#,
        "eq(attributes/tags,1)",
        "eq(attributes/tags,null)",
        r#"like(attributes/location,"x*")"#,
        r#"like(attributes/location,"X")"#,
        r#"ilike(attributes/location,"x")"#,
        r#"like(attributes/location,"x?y")"#,
        r#"like(attributes/location,"x%")"#,
        r#"like(attributes/location,"x_y")"#,
        r#"like(attributes/location,"x'*")"#,
        r#"like(attributes/s,"*100%*")"#,
        r#"like(attributes/s,"a[b]c*")"#,
        r#"like(attributes/s,"*\\")"#,
        r#"like(attributes/n,"1")"#,
        r#"eq(attributes/s,"it's 100% _true_\\")"#,
        r#"eq(features/w/properties/x,"%_'")"#,
        r#"like(features/w/properties/x,"%*")"#,
        r#"like(features/w/properties/x,"_*")"#,
        r#"eq(attributes/location,"x' OR '1'='1")"#,
        "exists(attributes/nested)",
        "exists(attributes/nested/deep)",
        "exists(attributes/nest)",
        "exists(attributes/obj)",
        "exists(attributes/)",
        "exists(features/temp)",
        "exists(features/te)",
        "exists(features/temp/properties)",
        "exists(features/temp/desiredProperties/value)",
        "exists(features/*/properties/value)",
        "exists(features/*)",
        "eq(features/*/properties/value,40)",
        "gt(features/*/properties/value,20)",
        "eq(features/temp/properties/value,21)",
        "eq(features/temp/desiredProperties/value,22)",
        r#"eq(features/f/definition,"a:b:1")"#,
        r#"eq(definition,"d:a:1")"#,
        r#"eq(thingId,"t:1")"#,
        r#"gt(thingId,"t:3")"#,
        r#"like(thingId,"u:*")"#,
        r#"in(thingId,"t:1","u:6",5)"#,
        "eq(thingId,1)",
        r#"eq(policyId,"p:b")"#,
        r#"ne(policyId,"p:b")"#,
        r#"not(eq(policyId,"p:b"))"#,
        "exists(policyId)",
        "empty(policyId)",
        r#"eq(_namespace,"u")"#,
        "eq(_revision,1)",
        "gt(_revision,1)",
        r#"eq(_revision,"1")"#,
        r#"gt(_modified,"2026-11-25T00:00:01Z")"#,
        "empty(attributes/e)",
        "empty(attributes/location)",
        "empty(attributes/mixed)",
        "empty(features/*)",
        "empty(features/temp)",
        "eq(attributes/items/k,2)",
        "eq(attributes/on,true)",
        "eq(attributes/on,1)",
        r#"eq(attributes/n,"1")"#,
        r#"and(exists(attributes/n),not(exists(features/*)))"#,
        r#"or(eq(attributes/n,1),eq(attributes/location,"y"),like(thingId,"u*"))"#,
        r#"not(or(eq(attributes/n,1),exists(features/temp)))"#,
        r#"and(gt(attributes/n,0),or(ne(attributes/tags,"c"),not(exists(attributes/tags))))"#,
        // Several conditions on one path: one value meets them all, or,
        // where the path holds several values, different values do.
        "and(ge(attributes/n,2),lt(attributes/n,3))",
        "and(ge(attributes/n,1),le(attributes/n,3),not(eq(attributes/n,2)),exists(attributes/location))",
        "and(gt(attributes/items/k,1),lt(attributes/items/k,2))",
        r#"and(eq(attributes/tags,"a"),eq(attributes/tags,"b"))"#,
        "and(gt(attributes/mixed,2),lt(attributes/mixed,4))",
        r#"and(ge(attributes/mixed,"a"),lt(attributes/mixed,5))"#,
        "and(gt(features/*/properties/value,20),lt(features/*/properties/value,41))",
        "or(and(gt(attributes/n,1),lt(attributes/n,2)),and(gt(attributes/n,9),le(attributes/n,10)))",
    ];
    let mut matched = 0;
    for text in filters {
        let filter = Filter::parse(text, Scope::THINGS).unwrap();
        let mut expected: Vec<String> = things
            .iter()
            .filter(|r| filter.matches(&eval_doc(r), Semantics::Search, &NoPlaceholders))
            .map(|r| r.id.clone())
            .collect();
        expected.sort();
        let found = store.search(&request(Some(text), None)).await.unwrap();
        assert_eq!(ids(&found), expected, "{text}");
        matched += usize::from(!expected.is_empty() && expected.len() < things.len());
        let counted: u64 =
            store.count_by_policy(Some(&filter), None).await.unwrap().iter().map(|(_, n)| n).sum();
        assert_eq!(counted, expected.len() as u64, "count {text}");
    }
    assert!(matched > filters.len() * 3 / 4, "most filters select some things, not all");

    // Sorts: the order `search.rs` defines (missing and null first, then
    // numbers, strings, booleans; arrays by their least value ascending
    // and greatest descending; ties by thing id), and paging through
    // every page with cursors yields the same, once each.
    let sorts: [&[(&str, bool)]; 9] = [
        &[],
        &[("thingId", true)],
        &[("attributes/mixed", false)],
        &[("attributes/mixed", true)],
        &[("attributes/n", false)],
        &[("attributes/n", true), ("attributes/location", false)],
        &[("attributes/tags", false)],
        &[("policyId", false), ("_revision", true)],
        &[("features/temp/properties/value", true)],
    ];
    for sort in sorts {
        let options: Vec<String> =
            sort.iter().map(|(f, d)| format!("{}{f}", if *d { '-' } else { '+' })).collect();
        let options = (!options.is_empty()).then(|| format!("sort({})", options.join(",")));
        let request = request(None, options.as_deref());
        let expected = model_sorted(&things, sort);
        let found = store.search(&request).await.unwrap();
        assert_eq!(ids(&found), expected, "{options:?}");
        for size in [1, 2, 4] {
            assert_eq!(all_pages(&store, &request, size).await, expected, "{options:?} by {size}");
        }
        let limited = store.search(&SearchRequest { limit: 3, ..request.clone() }).await.unwrap();
        assert_eq!(ids(&limited), expected[..3], "{options:?}");
    }
    // The key holds the sort values as typed.
    let found = store
        .search(&request(Some(r#"eq(thingId,"u:5")"#), Some("sort(-attributes/mixed)")))
        .await
        .unwrap();
    assert_eq!(
        found[0].key.values,
        [SortValue::String("z".into()), SortValue::String("u:5".into())]
    );
    assert_eq!(found[0].key.thing_id, "u:5");

    // Paging with a filter and a sort on a field some things lack.
    let filtered = request(Some("not(eq(attributes/n,3))"), Some("sort(+attributes/location)"));
    let all = ids(&store.search(&filtered).await.unwrap());
    assert_eq!(all_pages(&store, &filtered, 2).await, all);

    // Namespaces.
    let in_u = SearchRequest { namespaces: Some(vec!["u".into()]), ..request(None, None) };
    assert_eq!(ids(&store.search(&in_u).await.unwrap()), ["u:5", "u:6"]);
    let nowhere = SearchRequest { namespaces: Some(vec![]), ..request(None, None) };
    assert!(store.search(&nowhere).await.unwrap().is_empty());
    assert_eq!(
        store.count_by_policy(None, Some(&["u".into(), "nope".into()])).await.unwrap(),
        vec![(None, 1), (Some("p:b".to_owned()), 1)]
    );

    // Counts per policy.
    assert_eq!(
        store.count_by_policy(None, None).await.unwrap(),
        vec![(None, 3), (Some("p:a".to_owned()), 3), (Some("p:b".to_owned()), 3)]
    );

    // Read-your-writes: every answered write is found by the next search.
    for n in 0..20 {
        let id = format!("rw:{n}");
        let filter = format!("eq(attributes/rw,{n})");
        store
            .commit(vec![Write::Thing {
                record: thing(&id, 1, json!({"attributes": {"rw": n}})),
                expect: Expect::Absent,
            }])
            .await
            .unwrap();
        assert_eq!(ids(&store.search(&request(Some(&filter), None)).await.unwrap()), [id.as_str()]);
        store
            .commit(vec![Write::Thing {
                record: thing(&id, 2, json!({"attributes": {"rw": -1}})),
                expect: Expect::Revision(1),
            }])
            .await
            .unwrap();
        assert!(store.search(&request(Some(&filter), None)).await.unwrap().is_empty());
        store
            .commit(vec![Write::DeleteThing { id: id.clone(), expect: Expect::Revision(2) }])
            .await
            .unwrap();
        assert!(store
            .search(&request(Some("eq(attributes/rw,-1)"), None))
            .await
            .unwrap()
            .is_empty());
    }

    // A write that turns one value into several, or back, is searched as
    // the thing now is, by conditions met by one value or by two.
    let conditions = [
        "and(gt(attributes/span,5),lt(attributes/span,8))",
        "and(gt(attributes/span,5),lt(attributes/span,1))",
    ];
    let spans = [json!(6), json!([0, 10]), json!([10]), json!([0, 6]), json!(0.5)];
    for (revision, span) in (1..).zip(spans) {
        let record = thing("span:1", revision, json!({"attributes": {"span": span}}));
        let expect = if revision == 1 { Expect::Absent } else { Expect::Revision(revision - 1) };
        store.commit(vec![Write::Thing { record: record.clone(), expect }]).await.unwrap();
        for text in conditions {
            let filter = Filter::parse(text, Scope::THINGS).unwrap();
            let expected = filter.matches(&eval_doc(&record), Semantics::Search, &NoPlaceholders);
            let found = store.search(&request(Some(text), None)).await.unwrap();
            assert_eq!(
                ids(&found),
                if expected { vec!["span:1"] } else { vec![] },
                "{text} {span}"
            );
        }
    }
}

/// A thing holding two values at a path that different conditions meet,
/// and the filter that finds it only if the store knows the path holds
/// several values.
fn apart() -> (ThingRecord, &'static str) {
    let record = thing("apart:1", 1, json!({"attributes": {"span": [0, 10]}}));
    (record, "and(gt(attributes/span,5),lt(attributes/span,1))")
}

#[tokio::test]
async fn sqlite_learns_the_lists_of_a_store_written_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("twins.db");
    let (record, filter) = apart();
    let store = SqliteStore::open(&path, false).unwrap();
    store.commit(vec![Write::Thing { record, expect: Expect::Absent }]).await.unwrap();
    drop(store);
    rusqlite::Connection::open(&path).unwrap().execute_batch("DROP TABLE thing_lists").unwrap();
    let store = SqliteStore::open(&path, false).unwrap();
    assert_eq!(ids(&store.search(&request(Some(filter), None)).await.unwrap()), ["apart:1"]);
}

#[tokio::test]
async fn postgres_learns_the_lists_of_a_store_written_before_them() {
    let cluster = support::postgres::Cluster::start();
    let (record, filter) = apart();
    let store = PostgresStore::open(&cluster.url()).await.unwrap();
    store.commit(vec![Write::Thing { record, expect: Expect::Absent }]).await.unwrap();
    drop(store);
    let (client, connection) =
        tokio_postgres::connect(&cluster.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute("DROP TABLE thing_lists").await.unwrap();
    let store = PostgresStore::open(&cluster.url()).await.unwrap();
    assert_eq!(ids(&store.search(&request(Some(filter), None)).await.unwrap()), ["apart:1"]);
}

#[tokio::test]
async fn sqlite_search() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
    search_conformance(Store::Sqlite(store)).await;
}

#[tokio::test]
async fn postgres_search() {
    let cluster = support::postgres::Cluster::start();
    let store = PostgresStore::open(&cluster.url()).await.unwrap();
    search_conformance(Store::Postgres(store)).await;
}

/// Plans and times at scale: `cargo test --release -p ferry-twins --test
/// store -- --ignored --nocapture at_scale` (N from `FERRY_SEARCH_THINGS`,
/// 100,000 by default).
async fn at_scale(store: Store) {
    let things: usize =
        std::env::var("FERRY_SEARCH_THINGS").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let started = std::time::Instant::now();
    for chunk in (0..things).collect::<Vec<_>>().chunks(1000) {
        let writes = chunk
            .iter()
            .map(|n| Write::Thing {
                record: thing(
                    &format!("ns{}:t{n:06}", n % 10),
                    1,
                    json!({"attributes": {"location": format!("loc{}", n % 1000), "n": n, "tags": [format!("a{}", n % 7)]},
                           "features": {"temp": {"properties": {"value": n % 100}}}}),
                ),
                expect: Expect::Absent,
            })
            .collect();
        store.commit(writes).await.unwrap();
    }
    eprintln!("loaded {things} things in {:?}", started.elapsed());
    let cases = [
        (Some(r#"eq(attributes/location,"loc42")"#), None),
        (Some(r#"like(attributes/location,"loc42*")"#), None),
        (Some("and(ge(attributes/n,50000),lt(attributes/n,60000))"), Some("sort(-attributes/n)")),
        (Some("gt(features/*/properties/value,97)"), Some("sort(+attributes/location)")),
        (None, None),
        (None, Some("sort(+attributes/n)")),
    ];
    for (filter, options) in cases {
        let request = SearchRequest { limit: 26, ..request(filter, options) };
        eprintln!("\n== filter={filter:?} options={options:?}");
        eprintln!("{}", store.explain_search(&request).await.unwrap());
        let started = std::time::Instant::now();
        let page = store.search(&request).await.unwrap();
        let first = started.elapsed();
        let next = SearchRequest { after: page.last().map(|f| f.key.clone()), ..request.clone() };
        eprintln!("-- page 2:\n{}", store.explain_search(&next).await.unwrap());
        let started = std::time::Instant::now();
        let second = store.search(&next).await.unwrap();
        eprintln!(
            "page 1: {} things in {first:?}; page 2: {} in {:?}",
            page.len(),
            second.len(),
            started.elapsed()
        );
        let started = std::time::Instant::now();
        let counts = store.count_by_policy(request.filter.as_ref(), None).await.unwrap();
        eprintln!(
            "count: {} in {:?}",
            counts.iter().map(|(_, n)| n).sum::<u64>(),
            started.elapsed()
        );
    }
}

#[tokio::test]
#[ignore = "loads 100,000 things; run by hand for plans and times"]
async fn sqlite_at_scale() {
    let dir = tempfile::tempdir().unwrap();
    at_scale(Store::Sqlite(SqliteStore::open(&dir.path().join("twins.db"), false).unwrap())).await;
}

#[tokio::test]
#[ignore = "loads 100,000 things; run by hand for plans and times"]
async fn postgres_at_scale() {
    let cluster = support::postgres::Cluster::start();
    at_scale(Store::Postgres(PostgresStore::open(&cluster.url()).await.unwrap())).await;
}
