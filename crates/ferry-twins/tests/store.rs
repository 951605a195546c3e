//! One suite, both stores: SQLite in a temporary directory and PostgreSQL
//! in a throwaway cluster (`support/postgres.rs`).

mod support;

use ferry_twins::store::postgres::PostgresStore;
use ferry_twins::store::sqlite::SqliteStore;
use ferry_twins::store::{Expect, PolicyRecord, Store, StoreError, ThingRecord, Write};
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
