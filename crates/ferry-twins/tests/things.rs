//! The things service through its public API: the change feed's order
//! under concurrent writers, on both stores.

mod support;

use ferry_twins::id::ThingId;
use ferry_twins::service::{Caller, Conditions, ThingAction, ThingWrite, Twins, TwinsConfig};
use ferry_twins::store::postgres::PostgresStore;
use ferry_twins::store::sqlite::SqliteStore;
use ferry_twins::store::Store;
use ferry_twins::thing::ThingResource;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

const WRITERS: usize = 4;
const WRITES_EACH: usize = 25;

async fn events_follow_revisions(store: Store) {
    let twins = Arc::new(Twins::new(store, TwinsConfig::default()));
    let caller = Caller::new(vec!["nginx:ditto".into()]);
    let mut feed = twins.subscribe();
    let ids: Vec<ThingId> =
        (0..2).map(|n| ThingId::parse(&format!("org.example:t{n}")).unwrap()).collect();
    for id in &ids {
        let body = json!({"attributes": {}});
        twins
            .write_thing(
                &caller,
                id,
                &ThingResource::Thing,
                ThingWrite::Put(&body),
                &Conditions::default(),
            )
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let twins = twins.clone();
        let caller = caller.clone();
        let ids = ids.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..WRITES_EACH {
                let id = &ids[(writer + n) % ids.len()];
                let resource =
                    ThingResource::parse(&format!("/attributes/w{writer}")).unwrap().unwrap();
                let value = json!(n);
                twins
                    .write_thing(
                        &caller,
                        id,
                        &resource,
                        ThingWrite::Put(&value),
                        &Conditions::default(),
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut last: HashMap<String, u64> = HashMap::new();
    let total = ids.len() + WRITERS * WRITES_EACH;
    for _ in 0..total {
        let event = feed.recv().await.unwrap();
        let previous = last.insert(event.thing_id.to_string(), event.revision).unwrap_or(0);
        assert_eq!(event.revision, previous + 1, "{event:?}");
        if event.revision == 1 {
            assert_eq!(event.action, ThingAction::Created);
        }
    }
    assert_eq!(last.values().sum::<u64>(), total as u64);
    assert!(feed.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_events_follow_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
    events_follow_revisions(Store::Sqlite(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_events_follow_revisions() {
    let cluster = support::postgres::Cluster::start();
    let store = PostgresStore::open(&cluster.url()).await.unwrap();
    events_follow_revisions(Store::Postgres(store)).await;
}
