//! The shared store: PostgreSQL, for deployments where several Ferry nodes
//! serve the same twins (`[twins] store = "postgres://…"`).
//!
//! The tables are SQLite's (`sqlite.rs`), with the documents as `TEXT`
//! rather than `jsonb`: `jsonb` sorts an object's keys, and Ditto returns a
//! thing's fields in the order they were written. Writes go through one
//! connection and one task that commits queued groups together, each in a
//! savepoint, as SQLite's writer does; reads spread over a few more
//! connections, each of which pipelines the queries given to it.
//! Durability is the server's (`synchronous_commit`, on by default).

use super::index::{self, Entry, Leaf, ListChanges};
use super::search::sql::{self, Component, ComponentType, Dialect, Param, RECORD_COLUMNS};
use super::search::{Found, SearchRequest};
use super::{
    check_expectation, Committed, EventRecord, PolicyRecord, StoreError, ThingRecord, Write,
    GROUPS_PER_COMMIT, PRUNE_BATCH, PRUNE_EVENTS,
};
use crate::rql::{Filter, TimePlaceholders};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, GenericClient, NoTls, Row};

/// As in `sqlite.rs`: the writes that may wait for the writer.
const WRITE_QUEUE: usize = 4096;

/// Read connections: each pipelines its queries, so a few carry many
/// concurrent readers.
const READERS: usize = 4;

/// The text columns that search compares or sorts are `COLLATE "C"`:
/// byte order, as SQLite's `BINARY` and MongoDB compare, whatever the
/// database's locale; search's SQL says `C` too, and the indexes on these
/// columns then serve its ranges, sorts and `LIKE` prefixes. The
/// `(path, thing)` indexes serve `exists`, nulls and sort values, which
/// the partial indexes (no nulls) cannot.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS things (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT COLLATE \"C\" NOT NULL UNIQUE,
    namespace TEXT COLLATE \"C\" NOT NULL,
    policy_id TEXT COLLATE \"C\",
    revision BIGINT NOT NULL,
    created TEXT COLLATE \"C\" NOT NULL,
    modified TEXT COLLATE \"C\" NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS things_namespace ON things (namespace, id);
CREATE TABLE IF NOT EXISTS thing_index (
    thing BIGINT NOT NULL,
    path TEXT COLLATE \"C\" NOT NULL,
    wildcard_path TEXT COLLATE \"C\",
    kind BIGINT NOT NULL,
    num DOUBLE PRECISION,
    str TEXT COLLATE \"C\"
);
CREATE INDEX IF NOT EXISTS thing_index_thing ON thing_index (thing);
CREATE INDEX IF NOT EXISTS thing_index_str ON thing_index (path, str) WHERE str IS NOT NULL;
CREATE INDEX IF NOT EXISTS thing_index_num ON thing_index (path, num) WHERE num IS NOT NULL;
CREATE INDEX IF NOT EXISTS thing_index_wild_str ON thing_index (wildcard_path, str)
    WHERE wildcard_path IS NOT NULL AND str IS NOT NULL;
CREATE INDEX IF NOT EXISTS thing_index_wild_num ON thing_index (wildcard_path, num)
    WHERE wildcard_path IS NOT NULL AND num IS NOT NULL;
CREATE INDEX IF NOT EXISTS thing_index_path ON thing_index (path, thing);
CREATE INDEX IF NOT EXISTS thing_index_wild ON thing_index (wildcard_path, thing)
    WHERE wildcard_path IS NOT NULL;
CREATE TABLE IF NOT EXISTS thing_lists (
    thing BIGINT NOT NULL,
    path TEXT COLLATE \"C\" NOT NULL,
    PRIMARY KEY (thing, path)
);
CREATE INDEX IF NOT EXISTS thing_lists_path ON thing_lists (path, thing);
CREATE TABLE IF NOT EXISTS policies (
    id TEXT PRIMARY KEY,
    revision BIGINT NOT NULL,
    created TEXT NOT NULL,
    modified TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS thing_events (
    seq BIGSERIAL PRIMARY KEY,
    thing_id TEXT NOT NULL,
    policy_id TEXT,
    revision BIGINT NOT NULL,
    timestamp TEXT NOT NULL,
    at BIGINT NOT NULL,
    action TEXT NOT NULL,
    path TEXT NOT NULL,
    value TEXT,
    correlation_id TEXT,
    originator TEXT
);
-- Added after the table: a journal written before has neither.
ALTER TABLE thing_events ADD COLUMN IF NOT EXISTS correlation_id TEXT;
ALTER TABLE thing_events ADD COLUMN IF NOT EXISTS originator TEXT;
";

struct Job {
    writes: Vec<Write>,
    done: oneshot::Sender<Result<Committed, StoreError>>,
}

pub struct PostgresStore {
    jobs: mpsc::Sender<Job>,
    readers: Vec<Client>,
    next_reader: AtomicUsize,
}

impl PostgresStore {
    /// Connects to `url` (a `postgres://` URL or a libpq key=value string)
    /// and creates the tables if they are not there.
    pub async fn open(url: &str) -> Result<PostgresStore, StoreError> {
        let mut writer = connect(url).await?;
        create_schema(&mut writer).await?;
        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            readers.push(connect(url).await?);
        }
        let (jobs, queue) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(write_loop(writer, queue));
        Ok(PostgresStore { jobs, readers, next_reader: AtomicUsize::new(0) })
    }

    pub async fn commit(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        let (done, answer) = oneshot::channel();
        self.jobs.send(Job { writes, done }).await.map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    pub async fn thing(&self, id: &str) -> Result<Option<ThingRecord>, StoreError> {
        let row = self
            .reader()
            .query_opt(
                "SELECT id, policy_id, revision, created, modified, doc FROM things WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(backend)?;
        row.map(|row| thing_from_row(&row)).transpose()
    }

    pub async fn policy(&self, id: &str) -> Result<Option<PolicyRecord>, StoreError> {
        let row = self
            .reader()
            .query_opt(
                "SELECT id, revision, created, modified, doc FROM policies WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(backend)?;
        row.as_ref().map(policy_row).transpose()
    }

    pub async fn policies_with_timed_subjects(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<PolicyRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .reader()
            .query(
                "SELECT id, revision, created, modified, doc FROM policies \
                 WHERE id > $1 AND (strpos(doc, '\"expiry\"') > 0 OR strpos(doc, '\"announcement\"') > 0) \
                 ORDER BY id LIMIT $2",
                &[&after, &limit],
            )
            .await
            .map_err(backend)?;
        rows.iter().map(policy_row).collect()
    }

    pub async fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, EventRecord)>, StoreError> {
        let rows = self
            .reader()
            .query(
                "SELECT seq, thing_id, policy_id, revision, timestamp, at, action, path, value, \
                 correlation_id, originator FROM thing_events WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&revision_to(after), &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|row| {
                let value = row.get::<_, Option<&str>>(8).map(parse_doc).transpose()?;
                let record = EventRecord {
                    thing_id: row.get(1),
                    policy_id: row.get(2),
                    revision: revision_from(row.get(3)),
                    timestamp: row.get(4),
                    at: row.get(5),
                    action: row.get(6),
                    path: row.get(7),
                    value: value.map(Arc::new),
                    correlation_id: row.get(9),
                    originator: row.get(10),
                };
                Ok((revision_from(row.get(0)), record))
            })
            .collect()
    }

    /// The journal's newest place, 0 when it is empty.
    pub async fn events_head(&self) -> Result<u64, StoreError> {
        let row = self
            .reader()
            .query_one("SELECT COALESCE(max(seq), 0)::BIGINT FROM thing_events", &[])
            .await
            .map_err(backend)?;
        Ok(revision_from(row.get(0)))
    }

    /// The things a search selects (`search.rs`), in one statement on a
    /// read connection: only the page is loaded.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<Found>, StoreError> {
        let now = TimePlaceholders::at(SystemTime::now());
        let (query, shape) =
            sql::search(Dialect::Postgres, request, &now).map_err(StoreError::Backend)?;
        let rows = self.query(&query.sql, &query.params).await?;
        let types = shape.types();
        rows.iter()
            .map(|row| {
                let record = thing_from_row(row)?;
                let components = types
                    .iter()
                    .enumerate()
                    .map(|(n, ty)| {
                        let at = RECORD_COLUMNS + n;
                        match ty {
                            ComponentType::Int => Component::Int(row.get(at)),
                            ComponentType::Num => Component::Num(row.get(at)),
                            ComponentType::Str => Component::Str(row.get(at)),
                        }
                    })
                    .collect();
                let key = shape.key(components, record.id.clone());
                Ok(Found { record, key })
            })
            .collect()
    }

    /// PostgreSQL's `EXPLAIN ANALYZE` of a search: for checking that a
    /// filter uses the indexes.
    pub async fn explain_search(&self, request: &SearchRequest) -> Result<String, StoreError> {
        let now = TimePlaceholders::at(SystemTime::now());
        let (query, _) =
            sql::search(Dialect::Postgres, request, &now).map_err(StoreError::Backend)?;
        let rows = self.query(&format!("EXPLAIN ANALYZE {}", query.sql), &query.params).await?;
        Ok(rows.iter().map(|row| row.get::<_, String>(0)).collect::<Vec<_>>().join("\n"))
    }

    /// Matching things per policy id, ordered by it.
    pub async fn count_by_policy(
        &self,
        filter: Option<&Filter>,
        namespaces: Option<&[String]>,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        let now = TimePlaceholders::at(SystemTime::now());
        let query = sql::count_by_policy(Dialect::Postgres, filter, namespaces, &now)
            .map_err(StoreError::Backend)?;
        let rows = self.query(&query.sql, &query.params).await?;
        let mut counts: Vec<(Option<String>, u64)> = rows
            .iter()
            .map(|row| (row.get(0), u64::try_from(row.get::<_, i64>(1)).unwrap_or(0)))
            .collect();
        counts.sort();
        Ok(counts)
    }

    async fn query(&self, text: &str, params: &[Param]) -> Result<Vec<Row>, StoreError> {
        let values: Vec<Box<dyn ToSql + Sync + Send>> = params
            .iter()
            .map(|param| -> Box<dyn ToSql + Sync + Send> {
                match param {
                    Param::Int(i) => Box::new(*i),
                    Param::Num(x) => Box::new(*x),
                    Param::Str(s) => Box::new(s.clone()),
                }
            })
            .collect();
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|value| value.as_ref() as &(dyn ToSql + Sync)).collect();
        self.reader().query(text, &refs).await.map_err(backend)
    }

    fn reader(&self) -> &Client {
        let next = self.next_reader.fetch_add(1, Ordering::Relaxed);
        &self.readers[next % self.readers.len()]
    }
}

/// Creates what is missing of the schema, in one transaction: a store
/// written before `thing_lists` existed gets it filled from its index.
async fn create_schema(client: &mut Client) -> Result<(), StoreError> {
    let transaction = client.transaction().await.map_err(backend)?;
    let lists_missing: bool = transaction
        .query_one("SELECT to_regclass('thing_lists') IS NULL", &[])
        .await
        .map_err(backend)?
        .get(0);
    transaction.batch_execute(SCHEMA).await.map_err(backend)?;
    if lists_missing {
        transaction.execute(index::LISTS_FROM_INDEX, &[]).await.map_err(backend)?;
    }
    transaction.commit().await.map_err(backend)
}

async fn connect(url: &str) -> Result<Client, StoreError> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.map_err(backend)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::error!(%error, "twin store: PostgreSQL connection lost");
        }
    });
    // A search over many things crosses PostgreSQL's cost threshold for
    // compiling its plan to machine code, and the compiling costs more
    // than it saves, on every search, since the code is not kept:
    // measured at 1,000,000 things (`features/*` with a sort), 855 ms of
    // compiling in a search that took 880 ms, and 216 ms without it.
    client.batch_execute("SET jit = off").await.map_err(backend)?;
    Ok(client)
}

fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(error.to_string())
}

/// PostgreSQL has no unsigned integers; revisions and journal sequence
/// numbers never reach 2^63.
fn revision_to(revision: u64) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

fn revision_from(revision: i64) -> u64 {
    u64::try_from(revision).unwrap_or(0)
}

/// A thing from a row of `id, policy_id, revision, created, modified, doc`.
pub(super) fn thing_from_row(row: &Row) -> Result<ThingRecord, StoreError> {
    Ok(ThingRecord {
        id: row.get(0),
        policy_id: row.get(1),
        revision: revision_from(row.get(2)),
        created: row.get(3),
        modified: row.get(4),
        doc: Arc::new(parse_doc(row.get(5))?),
    })
}

fn parse_doc(text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Backend(format!("a stored document: {error}")))
}

async fn write_loop(mut client: Client, mut queue: mpsc::Receiver<Job>) {
    while let Some(first) = queue.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < GROUPS_PER_COMMIT {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let results = commit_jobs(&mut client, &jobs).await;
        for (job, result) in jobs.into_iter().zip(results) {
            let _ = job.done.send(result);
        }
    }
}

async fn commit_jobs(client: &mut Client, jobs: &[Job]) -> Vec<Result<Committed, StoreError>> {
    let mut transaction = match client.transaction().await {
        Ok(transaction) => transaction,
        Err(error) => return jobs.iter().map(|_| Err(backend(&error))).collect(),
    };
    let mut results = Vec::with_capacity(jobs.len());
    for job in jobs {
        let result = match transaction.savepoint("grp").await {
            Ok(mut group) => {
                let mut applied = Ok(());
                let mut committed = Committed::default();
                for write in &job.writes {
                    applied = apply(&mut group, write, &mut committed).await;
                    if applied.is_err() {
                        break;
                    }
                }
                match applied {
                    Ok(()) => group.commit().await.map_err(backend).map(|()| committed),
                    Err(error) => group.rollback().await.map_err(backend).and(Err(error)),
                }
            }
            Err(error) => Err(backend(error)),
        };
        results.push(result);
    }
    if let Err(error) = transaction.commit().await {
        let error = backend(error);
        return jobs.iter().map(|_| Err(error.clone())).collect();
    }
    results
}

async fn apply(
    client: &mut impl GenericClient,
    write: &Write,
    committed: &mut Committed,
) -> Result<(), StoreError> {
    match write {
        Write::Thing { record, expect } => {
            let found = thing_revision(client, &record.id).await?;
            check_expectation("thing", &record.id, *expect, found.map(|(_, revision)| revision))?;
            let doc = serde_json::to_string(&*record.doc).map_err(backend)?;
            let revision = revision_to(record.revision);
            let seq: i64 = match found {
                Some((seq, _)) => {
                    client
                        .execute(
                            "UPDATE things SET policy_id = $2, revision = $3, modified = $4, doc = $5 WHERE seq = $1",
                            &[&seq, &record.policy_id, &revision, &record.modified, &doc],
                        )
                        .await
                        .map_err(backend)?;
                    let old = index_rows(client, seq).await?;
                    let mut changes = index::changes(old, index::entries(&record.doc));
                    let lists = std::mem::take(&mut changes.lists);
                    let (removed, added) = changes.into_removed_and_added();
                    delete_index_rows(client, seq, &removed).await?;
                    insert_index(client, seq, &added).await?;
                    return update_lists(client, seq, &lists).await;
                }
                None => client
                    .query_one(
                        "INSERT INTO things (id, namespace, policy_id, revision, created, modified, doc) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq",
                        &[
                            &record.id,
                            &record.namespace(),
                            &record.policy_id,
                            &revision,
                            &record.created,
                            &record.modified,
                            &doc,
                        ],
                    )
                    .await
                    .map_err(backend)?
                    .get(0),
            };
            let entries = index::entries(&record.doc);
            insert_index(client, seq, &entries).await?;
            let added = index::lists(&entries).into_iter().map(str::to_owned).collect();
            update_lists(client, seq, &ListChanges { added, removed: Vec::new() }).await
        }
        Write::DeleteThing { id, expect } => {
            let found = thing_revision(client, id).await?;
            check_expectation("thing", id, *expect, found.map(|(_, revision)| revision))?;
            if let Some((seq, _)) = found {
                for table in ["thing_index", "thing_lists"] {
                    client
                        .execute(&format!("DELETE FROM {table} WHERE thing = $1"), &[&seq])
                        .await
                        .map_err(backend)?;
                }
                client
                    .execute("DELETE FROM things WHERE seq = $1", &[&seq])
                    .await
                    .map_err(backend)?;
            }
            Ok(())
        }
        Write::Policy { record, expect } => {
            let found = policy_revision(client, &record.id).await?;
            check_expectation("policy", &record.id, *expect, found)?;
            let doc = serde_json::to_string(&*record.doc).map_err(backend)?;
            client
                .execute(
                    "INSERT INTO policies (id, revision, created, modified, doc) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (id) DO UPDATE SET revision = $2, modified = $4, doc = $5",
                    &[&record.id, &revision_to(record.revision), &record.created, &record.modified, &doc],
                )
                .await
                .map_err(backend)?;
            Ok(())
        }
        Write::DeletePolicy { id, expect } => {
            let found = policy_revision(client, id).await?;
            check_expectation("policy", id, *expect, found)?;
            client.execute("DELETE FROM policies WHERE id = $1", &[&id]).await.map_err(backend)?;
            Ok(())
        }
        Write::Event(event) => {
            let value =
                event.value.as_deref().map(serde_json::to_string).transpose().map_err(backend)?;
            let seq: i64 = client
                .query_one(
                    "INSERT INTO thing_events (thing_id, policy_id, revision, timestamp, at, action, path, value, \
                     correlation_id, originator) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq",
                    &[
                        &event.thing_id,
                        &event.policy_id,
                        &revision_to(event.revision),
                        &event.timestamp,
                        &event.at,
                        &event.action,
                        &event.path,
                        &value,
                        &event.correlation_id,
                        &event.originator,
                    ],
                )
                .await
                .map_err(backend)?
                .get(0);
            committed.events.push(revision_from(seq));
            Ok(())
        }
        Write::PruneEvents { before } => {
            let pruned = client
                .execute(
                    // PostgreSQL writes the parameters `$1`, `$2`.
                    &PRUNE_EVENTS.replace('?', "$"),
                    &[before, &i64::try_from(PRUNE_BATCH).unwrap_or(i64::MAX)],
                )
                .await
                .map_err(backend)?;
            committed.pruned += pruned;
            Ok(())
        }
    }
}

/// The index rows of the thing `seq`, each named by itself: the table
/// has no row key, and one row of each removed entry is deleted by value.
async fn index_rows(
    client: &mut impl GenericClient,
    seq: i64,
) -> Result<Vec<(Entry, Entry)>, StoreError> {
    let rows = client
        .query(
            "SELECT path, wildcard_path, kind, num, str FROM thing_index WHERE thing = $1",
            &[&seq],
        )
        .await
        .map_err(backend)?;
    Ok(rows
        .iter()
        .map(|row| {
            let entry = Entry {
                path: row.get(0),
                wildcard_path: row.get(1),
                value: Leaf::from_columns(row.get(2), row.get(3), row.get(4)),
            };
            (entry.clone(), entry)
        })
        .collect())
}

/// Deletes one row of each of `entries` (a leaf repeated in an array has
/// one row per occurrence).
async fn delete_index_rows(
    client: &mut impl GenericClient,
    seq: i64,
    entries: &[Entry],
) -> Result<(), StoreError> {
    for_each_entry(
        client,
        "DELETE FROM thing_index WHERE ctid = (SELECT ctid FROM thing_index WHERE thing = $1 \
         AND path = $2 AND wildcard_path IS NOT DISTINCT FROM $3 AND kind = $4 \
         AND num IS NOT DISTINCT FROM $5 AND str IS NOT DISTINCT FROM $6 LIMIT 1)",
        seq,
        entries,
    )
    .await
}

async fn insert_index(
    client: &mut impl GenericClient,
    seq: i64,
    entries: &[Entry],
) -> Result<(), StoreError> {
    for_each_entry(
        client,
        "INSERT INTO thing_index (thing, path, wildcard_path, kind, num, str) VALUES ($1, $2, $3, $4, $5, $6)",
        seq,
        entries,
    )
    .await
}

async fn update_lists(
    client: &mut impl GenericClient,
    seq: i64,
    lists: &ListChanges,
) -> Result<(), StoreError> {
    for (statement, paths) in [
        ("DELETE FROM thing_lists WHERE thing = $1 AND path = $2", &lists.removed),
        ("INSERT INTO thing_lists (thing, path) VALUES ($1, $2)", &lists.added),
    ] {
        for path in paths {
            client.execute(statement, &[&seq, path]).await.map_err(backend)?;
        }
    }
    Ok(())
}

/// Runs `statement`, whose parameters are a thing's `seq` and an index
/// row's columns, once for each of `entries`.
async fn for_each_entry(
    client: &mut impl GenericClient,
    statement: &str,
    seq: i64,
    entries: &[Entry],
) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let statement = client.prepare(statement).await.map_err(backend)?;
    for entry in entries {
        client
            .execute(
                &statement,
                &[
                    &seq,
                    &entry.path,
                    &entry.wildcard_path,
                    &entry.value.kind(),
                    &entry.value.number(),
                    &entry.value.string(),
                ],
            )
            .await
            .map_err(backend)?;
    }
    Ok(())
}

async fn thing_revision(
    client: &mut impl GenericClient,
    id: &str,
) -> Result<Option<(i64, u64)>, StoreError> {
    let row = client
        .query_opt("SELECT seq, revision FROM things WHERE id = $1 FOR UPDATE", &[&id])
        .await
        .map_err(backend)?;
    Ok(row.map(|row| (row.get(0), revision_from(row.get(1)))))
}

async fn policy_revision(
    client: &mut impl GenericClient,
    id: &str,
) -> Result<Option<u64>, StoreError> {
    let row = client
        .query_opt("SELECT revision FROM policies WHERE id = $1 FOR UPDATE", &[&id])
        .await
        .map_err(backend)?;
    Ok(row.map(|row| revision_from(row.get(0))))
}

/// A policy of `SELECT id, revision, created, modified, doc`.
fn policy_row(row: &tokio_postgres::Row) -> Result<PolicyRecord, StoreError> {
    Ok(PolicyRecord {
        id: row.get(0),
        revision: revision_from(row.get(1)),
        created: row.get(2),
        modified: row.get(3),
        doc: Arc::new(parse_doc(row.get(4))?),
    })
}
