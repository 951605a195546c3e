//! The embedded store: one SQLite file in the data directory, in WAL mode.
//!
//! **Writes** go to one thread that owns the only writing connection and
//! commits whatever groups have queued up in one transaction (group
//! commit): under load many callers share one `fsync`, which is what lets
//! durable modifies outrun one-commit-per-request. Each group runs inside
//! its own savepoint, so a group that fails its `Expect` is rolled back
//! alone and the others still commit. A caller is answered only after the
//! transaction that holds its group has committed.
//!
//! **Reads** use a small pool of read-only connections, which WAL lets run
//! beside the writer without waiting for it; each read runs on tokio's
//! blocking pool.
//!
//! **Checkpoints** (copying the WAL back into the database file) run on
//! a thread of their own (`checkpointer.rs`), beside the writer.
//!
//! **Durability:** `synchronous = FULL` makes every commit survive a power
//! cut (one fsync of the WAL per commit); `NORMAL` survives a crash of the
//! process (`kill -9`) but may lose the last commits in a power cut, in
//! exchange for fewer fsyncs. The broker's `fsync` setting picks one.

mod checkpointer;
mod page_cache;

use super::index::{self, Entry, Leaf, ListChanges};
use super::search::sql::{self, Component, ComponentType, Dialect, Param, RECORD_COLUMNS};
use super::search::{Found, SearchRequest};
use super::{
    check_expectation, Committed, EventRecord, PolicyRecord, StoreError, ThingRecord, Write,
    GROUPS_PER_COMMIT, PRUNE_BATCH, PRUNE_EVENTS,
};
use crate::rql::{Filter, TimePlaceholders};
use parking_lot::Mutex;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Transaction};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::oneshot;

/// Writes waiting for the writer thread at most; a caller beyond it waits
/// for room rather than queueing without bound.
const WRITE_QUEUE: usize = 4096;

/// Statements the writer keeps parsed: every statement it runs (20), with
/// room to spare; rusqlite keeps 16 by default.
const WRITER_STATEMENTS: usize = 32;

/// Read connections kept open; more readers than this open their own and
/// close it after.
const READERS: usize = 8;

/// Every connection's settings. SQLite's own page cache is 2 MiB by
/// default, far below a store of 100,000 things (~400 MB): measured, a
/// modify then spent most of the writer's time copying pages in from the
/// kernel's cache with pread. 64 MiB for the writer (whose pages are the
/// indexes every write touches) and 8 MiB per reader.
const WRITER_PRAGMAS: &str = "PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY;";
const READER_PRAGMAS: &str = "PRAGMA cache_size = -8192;";

/// The schema, created on first open. `things.seq` is the key the index
/// rows refer to: shorter than the id and stable while the thing lives.
/// The journal's columns added after it was first released, all `TEXT`:
/// opening a journal written before them adds them.
const JOURNAL_COLUMNS_ADDED_LATER: [&str; 2] = ["correlation_id", "originator"];

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS things (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT NOT NULL,
    policy_id TEXT,
    revision INTEGER NOT NULL,
    created TEXT NOT NULL,
    modified TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS things_namespace ON things (namespace, id);
CREATE TABLE IF NOT EXISTS thing_index (
    thing INTEGER NOT NULL,
    path TEXT NOT NULL,
    wildcard_path TEXT,
    kind INTEGER NOT NULL,
    num REAL,
    str TEXT
);
CREATE INDEX IF NOT EXISTS thing_index_thing ON thing_index (thing);
-- Not `_metadata`'s strings: see `sql::SQLITE_STRING_INDEX_HOLDS`, which
-- must read as the condition here does.
CREATE INDEX IF NOT EXISTS thing_index_str ON thing_index (path, str)
    WHERE str IS NOT NULL AND path NOT GLOB '_metadata/*';
CREATE INDEX IF NOT EXISTS thing_index_num ON thing_index (path, num) WHERE num IS NOT NULL;
CREATE INDEX IF NOT EXISTS thing_index_wild_str ON thing_index (wildcard_path, str)
    WHERE wildcard_path IS NOT NULL AND str IS NOT NULL;
CREATE INDEX IF NOT EXISTS thing_index_wild_num ON thing_index (wildcard_path, num)
    WHERE wildcard_path IS NOT NULL AND num IS NOT NULL;
-- Search: `exists`, `null`s and sort values find a path's rows (and a
-- thing's row at a path) here; the partial indexes above hold no nulls.
CREATE INDEX IF NOT EXISTS thing_index_path ON thing_index (path, thing);
CREATE INDEX IF NOT EXISTS thing_index_wild ON thing_index (wildcard_path, thing)
    WHERE wildcard_path IS NOT NULL;
-- The paths at which a thing holds several values (`index::lists`).
CREATE TABLE IF NOT EXISTS thing_lists (
    thing INTEGER NOT NULL,
    path TEXT NOT NULL,
    PRIMARY KEY (thing, path)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS thing_lists_path ON thing_lists (path, thing);
CREATE TABLE IF NOT EXISTS policies (
    id TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    created TEXT NOT NULL,
    modified TEXT NOT NULL,
    doc TEXT NOT NULL
);
-- The event journal. A sequence number must never be handed out twice,
-- since a client resumes from the last one it saw: pruning keeps the
-- newest entry, so the next row id is always above every one given out
-- (without AUTOINCREMENT, whose bookkeeping row costs a write per insert).
-- Pruning reads the oldest entries by `seq`, so `at` needs no index.
CREATE TABLE IF NOT EXISTS thing_events (
    seq INTEGER PRIMARY KEY,
    thing_id TEXT NOT NULL,
    policy_id TEXT,
    revision INTEGER NOT NULL,
    timestamp TEXT NOT NULL,
    at INTEGER NOT NULL,
    action TEXT NOT NULL,
    path TEXT NOT NULL,
    value TEXT,
    correlation_id TEXT,
    originator TEXT
);
";

struct Job {
    writes: Vec<Write>,
    done: oneshot::Sender<Result<Committed, StoreError>>,
}

pub struct SqliteStore {
    path: PathBuf,
    jobs: mpsc::SyncSender<Job>,
    readers: Arc<Mutex<Vec<Connection>>>,
}

impl SqliteStore {
    /// Opens (creating if need be) the store at `path`; `power_safe`
    /// chooses `synchronous = FULL` over `NORMAL`.
    pub fn open(path: &Path, power_safe: bool) -> Result<SqliteStore, StoreError> {
        let mut writer = page_cache::open(path, OpenFlags::default()).map_err(backend)?;
        writer
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; {WRITER_PRAGMAS}",
                if power_safe { "FULL" } else { "NORMAL" }
            ))
            .map_err(backend)?;
        create_schema(&mut writer)?;
        writer.set_prepared_statement_cache_capacity(WRITER_STATEMENTS);
        checkpointer::start(&mut writer, path)?;
        let (jobs, queue) = mpsc::sync_channel(WRITE_QUEUE);
        std::thread::Builder::new()
            .name("twins-writer".into())
            .spawn(move || write_loop(writer, queue))
            .map_err(|error| StoreError::Backend(format!("starting the writer: {error}")))?;
        Ok(SqliteStore { path: path.to_owned(), jobs, readers: Arc::new(Mutex::new(Vec::new())) })
    }

    pub async fn commit(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        let (done, answer) = oneshot::channel();
        // Queued at once when there is room; only a full queue is waited
        // on from a blocking thread, since `send` blocks. Measured, a hop
        // to the blocking pool on every commit cost as much CPU as the
        // SQLite writer itself.
        match self.jobs.try_send(Job { writes, done }) {
            Ok(()) => {}
            Err(mpsc::TrySendError::Disconnected(_)) => return Err(StoreError::Closed),
            Err(mpsc::TrySendError::Full(job)) => {
                let jobs = self.jobs.clone();
                tokio::task::spawn_blocking(move || jobs.send(job))
                    .await
                    .map_err(|_| StoreError::Closed)?
                    .map_err(|_| StoreError::Closed)?;
            }
        }
        answer.await.map_err(|_| StoreError::Closed)?
    }

    pub async fn thing(&self, id: &str) -> Result<Option<ThingRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |connection| read_thing(connection, &id)).await
    }

    pub async fn policy(&self, id: &str) -> Result<Option<PolicyRecord>, StoreError> {
        let id = id.to_owned();
        self.read(move |connection| read_policy(connection, &id)).await
    }

    pub async fn policies_with_timed_subjects(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<PolicyRecord>, StoreError> {
        let (after, limit) = (after.to_owned(), i64::try_from(limit).unwrap_or(i64::MAX));
        self.read(move |connection| {
            let mut statement = connection.prepare_cached(
                "SELECT id, revision, created, modified, doc FROM policies \
                 WHERE id > ?1 AND (instr(doc, '\"expiry\"') > 0 OR instr(doc, '\"announcement\"') > 0) \
                 ORDER BY id LIMIT ?2",
            )?;
            let rows = statement.query_map(params![after, limit], policy_row)?;
            rows.collect()
        })
        .await
    }

    pub async fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, EventRecord)>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |connection| {
            let mut statement = connection.prepare_cached(
                "SELECT seq, thing_id, policy_id, revision, timestamp, at, action, path, value, \
                 correlation_id, originator FROM thing_events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )?;
            let rows = statement.query_map(params![after, limit], |row| {
                let value: Option<String> = row.get(8)?;
                let value = match value {
                    Some(text) => Some(Arc::new(serde_json::from_str(&text).map_err(|error| {
                        rusqlite::Error::FromSqlConversionFailure(
                            8,
                            rusqlite::types::Type::Text,
                            Box::new(error),
                        )
                    })?)),
                    None => None,
                };
                let record = EventRecord {
                    thing_id: row.get(1)?,
                    policy_id: row.get(2)?,
                    revision: row.get(3)?,
                    timestamp: row.get(4)?,
                    at: row.get(5)?,
                    action: row.get(6)?,
                    path: row.get(7)?,
                    value,
                    correlation_id: row.get(9)?,
                    originator: row.get(10)?,
                };
                Ok((row.get(0)?, record))
            })?;
            rows.collect()
        })
        .await
    }

    /// The journal's newest place, 0 when it is empty.
    pub async fn events_head(&self) -> Result<u64, StoreError> {
        self.read(|connection| {
            connection
                .query_row("SELECT COALESCE(max(seq), 0) FROM thing_events", [], |row| row.get(0))
        })
        .await
    }

    /// The things a search selects (`search.rs`), read in one statement
    /// on a read connection: only the page is loaded.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<Found>, StoreError> {
        let now = TimePlaceholders::at(SystemTime::now());
        let (query, shape) =
            sql::search(Dialect::Sqlite, request, &now).map_err(StoreError::Backend)?;
        self.read(move |connection| {
            let types = shape.types();
            let mut statement = connection.prepare_cached(&query.sql)?;
            let rows = statement.query_map(rusqlite::params_from_iter(&query.params), |row| {
                let record = thing_from_row(row)?;
                let mut components = Vec::with_capacity(types.len());
                for (n, ty) in types.iter().enumerate() {
                    let at = RECORD_COLUMNS + n;
                    components.push(match ty {
                        ComponentType::Int => Component::Int(row.get(at)?),
                        ComponentType::Num => Component::Num(row.get(at)?),
                        ComponentType::Str => Component::Str(row.get(at)?),
                    });
                }
                let key = shape.key(components, record.id.clone());
                Ok(Found { record, key })
            })?;
            rows.collect()
        })
        .await
    }

    /// SQLite's `EXPLAIN QUERY PLAN` of a search, one step a line: for
    /// checking that a filter uses the indexes.
    pub async fn explain_search(&self, request: &SearchRequest) -> Result<String, StoreError> {
        let now = TimePlaceholders::at(SystemTime::now());
        let (query, _) =
            sql::search(Dialect::Sqlite, request, &now).map_err(StoreError::Backend)?;
        self.read(move |connection| {
            let mut statement = connection.prepare(&format!("EXPLAIN QUERY PLAN {}", query.sql))?;
            let rows = statement.query_map(rusqlite::params_from_iter(&query.params), |row| {
                Ok(format!("{} {}", row.get::<_, i64>(1)?, row.get::<_, String>(3)?))
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?.join("\n"))
        })
        .await
    }

    /// Matching things per policy id, ordered by it.
    pub async fn count_by_policy(
        &self,
        filter: Option<&Filter>,
        namespaces: Option<&[String]>,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        let now = TimePlaceholders::at(SystemTime::now());
        let query = sql::count_by_policy(Dialect::Sqlite, filter, namespaces, &now)
            .map_err(StoreError::Backend)?;
        let mut counts = self
            .read(move |connection| {
                let mut statement = connection.prepare_cached(&query.sql)?;
                let rows = statement
                    .query_map(rusqlite::params_from_iter(&query.params), |row| {
                        Ok((row.get::<_, Option<String>>(0)?, row.get::<_, i64>(1)?))
                    })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?
            .into_iter()
            .map(|(policy, count)| (policy, u64::try_from(count).unwrap_or(0)))
            .collect::<Vec<_>>();
        counts.sort();
        Ok(counts)
    }

    /// Runs `query` on a read connection from the pool, on the blocking
    /// pool.
    async fn read<R, F>(&self, query: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<R> + Send + 'static,
    {
        let readers = self.readers.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = readers.lock().pop();
            let connection = match pooled {
                Some(connection) => connection,
                None => {
                    let connection = page_cache::open(
                        &path,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )
                    .map_err(backend)?;
                    connection.execute_batch(READER_PRAGMAS).map_err(backend)?;
                    connection
                }
            };
            let result = query(&connection).map_err(backend);
            let mut pool = readers.lock();
            if pool.len() < READERS {
                pool.push(connection);
            }
            result
        })
        .await
        .map_err(|_| StoreError::Closed)?
    }
}

impl rusqlite::ToSql for Param {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ToSqlOutput;
        Ok(match self {
            Param::Int(i) => ToSqlOutput::from(*i),
            Param::Num(x) => ToSqlOutput::from(*x),
            Param::Str(s) => ToSqlOutput::from(s.as_str()),
        })
    }
}

/// Creates what is missing of the schema, in one transaction: a store
/// written before `thing_lists` existed gets it filled from its index.
fn create_schema(connection: &mut Connection) -> Result<(), StoreError> {
    let transaction = connection.transaction().map_err(backend)?;
    let lists_missing = transaction
        .query_row(
            "SELECT COUNT(*) = 0 FROM sqlite_master WHERE type = 'table' AND name = 'thing_lists'",
            [],
            |row| row.get::<_, bool>(0),
        )
        .map_err(backend)?;
    // A store written before the string index left `_metadata` out has it
    // rebuilt (once, a few seconds per million rows).
    let string_index = transaction
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'thing_index_str'",
            [],
            |row| row.get::<_, String>(0),
        )
        .optional()
        .map_err(backend)?;
    if string_index.is_some_and(|sql| !sql.contains(sql::SQLITE_STRING_INDEX_HOLDS)) {
        transaction.execute_batch("DROP INDEX thing_index_str").map_err(backend)?;
    }
    transaction.execute_batch(SCHEMA).map_err(backend)?;
    // Added after the journal: a journal written before has no columns
    // for them (SQLite's ADD COLUMN has no IF NOT EXISTS).
    for column in JOURNAL_COLUMNS_ADDED_LATER {
        let missing = transaction
            .query_row(
                "SELECT COUNT(*) = 0 FROM pragma_table_info('thing_events') WHERE name = ?1",
                [column],
                |row| row.get::<_, bool>(0),
            )
            .map_err(backend)?;
        if missing {
            transaction
                .execute_batch(&format!("ALTER TABLE thing_events ADD COLUMN {column} TEXT"))
                .map_err(backend)?;
        }
    }
    if lists_missing {
        transaction.execute(index::LISTS_FROM_INDEX, []).map_err(backend)?;
    }
    transaction.commit().map_err(backend)
}

fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(error.to_string())
}

/// The writer thread: waits for a group, takes whatever else has queued
/// meanwhile, and commits them together.
fn write_loop(mut connection: Connection, queue: mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut jobs = vec![first];
        while jobs.len() < GROUPS_PER_COMMIT {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let results = commit_jobs(&mut connection, &jobs);
        for (job, result) in jobs.into_iter().zip(results) {
            let _ = job.done.send(result);
        }
    }
}

fn commit_jobs(connection: &mut Connection, jobs: &[Job]) -> Vec<Result<Committed, StoreError>> {
    let transaction = match connection.transaction() {
        Ok(transaction) => transaction,
        Err(error) => return jobs.iter().map(|_| Err(backend(&error))).collect(),
    };
    let mut results = Vec::with_capacity(jobs.len());
    for job in jobs {
        results.push(apply_group(&transaction, &job.writes));
    }
    if let Err(error) = transaction.commit() {
        let error = backend(error);
        return jobs.iter().map(|_| Err(error.clone())).collect();
    }
    results
}

/// One group in its own savepoint: rolled back alone if any write in it
/// fails.
fn apply_group(transaction: &Transaction<'_>, writes: &[Write]) -> Result<Committed, StoreError> {
    execute(transaction, "SAVEPOINT grp", [])?;
    let mut committed = Committed::default();
    let applied = writes.iter().try_for_each(|write| apply(transaction, write, &mut committed));
    if applied.is_err() {
        execute(transaction, "ROLLBACK TO grp", [])?;
    }
    execute(transaction, "RELEASE grp", [])?;
    applied.map(|()| committed)
}

fn apply(
    transaction: &Transaction<'_>,
    write: &Write,
    committed: &mut Committed,
) -> Result<(), StoreError> {
    match write {
        Write::Thing { record, expect } => {
            let found = thing_revision(transaction, &record.id)?;
            check_expectation("thing", &record.id, *expect, found.map(|(_, revision)| revision))?;
            let doc = serde_json::to_string(&*record.doc).map_err(backend)?;
            let seq = match found {
                Some((seq, _)) => {
                    execute(
                            transaction,
                            "UPDATE things SET policy_id = ?2, revision = ?3, modified = ?4, doc = ?5 WHERE seq = ?1",
                            params![seq, record.policy_id, record.revision, record.modified, doc],
                        )?;
                    let old = index_rows(transaction, seq)?;
                    let changes = index::changes(old, index::entries(&record.doc));
                    let mut delete = transaction
                        .prepare_cached("DELETE FROM thing_index WHERE rowid = ?1")
                        .map_err(backend)?;
                    for row in changes.removed {
                        delete.execute([row]).map_err(backend)?;
                    }
                    // SQLite rewrites only the indexes whose columns an
                    // UPDATE sets: the value's, not the thing's or the
                    // path's.
                    let mut update = transaction
                        .prepare_cached(
                            "UPDATE thing_index SET kind = ?2, num = ?3, str = ?4 WHERE rowid = ?1",
                        )
                        .map_err(backend)?;
                    for (row, entry) in &changes.rewritten {
                        update
                            .execute(params![
                                row,
                                entry.value.kind(),
                                entry.value.number(),
                                entry.value.string()
                            ])
                            .map_err(backend)?;
                    }
                    insert_index(transaction, seq, &changes.added)?;
                    return update_lists(transaction, seq, &changes.lists);
                }
                None => {
                    execute(
                            transaction,
                            "INSERT INTO things (id, namespace, policy_id, revision, created, modified, doc) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                            params![
                                record.id,
                                record.namespace(),
                                record.policy_id,
                                record.revision,
                                record.created,
                                record.modified,
                                doc
                            ],
                        )?;
                    transaction.last_insert_rowid()
                }
            };
            let entries = index::entries(&record.doc);
            insert_index(transaction, seq, &entries)?;
            let added = index::lists(&entries).into_iter().map(str::to_owned).collect();
            update_lists(transaction, seq, &ListChanges { added, removed: Vec::new() })
        }
        Write::DeleteThing { id, expect } => {
            let found = thing_revision(transaction, id)?;
            check_expectation("thing", id, *expect, found.map(|(_, revision)| revision))?;
            if let Some((seq, _)) = found {
                execute(transaction, "DELETE FROM thing_index WHERE thing = ?1", [seq])?;
                execute(transaction, "DELETE FROM thing_lists WHERE thing = ?1", [seq])?;
                execute(transaction, "DELETE FROM things WHERE seq = ?1", [seq])?;
            }
            Ok(())
        }
        Write::Policy { record, expect } => {
            let found = policy_revision(transaction, &record.id)?;
            check_expectation("policy", &record.id, *expect, found)?;
            let doc = serde_json::to_string(&*record.doc).map_err(backend)?;
            execute(
                            transaction,
                    "INSERT INTO policies (id, revision, created, modified, doc) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (id) DO UPDATE SET revision = ?2, modified = ?4, doc = ?5",
                    params![record.id, record.revision, record.created, record.modified, doc],
                )?;
            Ok(())
        }
        Write::DeletePolicy { id, expect } => {
            let found = policy_revision(transaction, id)?;
            check_expectation("policy", id, *expect, found)?;
            execute(transaction, "DELETE FROM policies WHERE id = ?1", [id])?;
            Ok(())
        }
        Write::Event(event) => {
            let value = event.value.as_deref().map(serde_json::to_string).transpose();
            transaction
                .prepare_cached(
                    "INSERT INTO thing_events (thing_id, policy_id, revision, timestamp, at, action, path, value, \
                     correlation_id, originator) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        event.thing_id,
                        event.policy_id,
                        event.revision,
                        event.timestamp,
                        event.at,
                        event.action,
                        event.path,
                        value.map_err(|error| rusqlite::Error::ToSqlConversionFailure(Box::new(error)))?,
                        event.correlation_id,
                        event.originator,
                    ])
                })
                .map_err(backend)?;
            committed.events.push(u64::try_from(transaction.last_insert_rowid()).unwrap_or(0));
            Ok(())
        }
        Write::PruneEvents { before } => {
            let pruned = execute(transaction, PRUNE_EVENTS, params![before, PRUNE_BATCH])?;
            committed.pruned += pruned as u64;
            Ok(())
        }
    }
}

/// Runs a statement through the connection's statement cache: parsed
/// again on every write, the writer's statements cost 2% of its time.
fn execute(
    transaction: &Transaction<'_>,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<usize, StoreError> {
    transaction
        .prepare_cached(sql)
        .and_then(|mut statement| statement.execute(params))
        .map_err(backend)
}

/// The index rows of the thing `seq`, with their row ids.
fn index_rows(transaction: &Transaction<'_>, seq: i64) -> Result<Vec<(i64, Entry)>, StoreError> {
    let mut select = transaction
        .prepare_cached(
            "SELECT rowid, path, wildcard_path, kind, num, str FROM thing_index WHERE thing = ?1",
        )
        .map_err(backend)?;
    let rows = select
        .query_map([seq], |row| {
            Ok((
                row.get(0)?,
                Entry {
                    path: row.get(1)?,
                    wildcard_path: row.get(2)?,
                    value: Leaf::from_columns(row.get(3)?, row.get(4)?, row.get(5)?),
                },
            ))
        })
        .map_err(backend)?;
    rows.collect::<Result<_, _>>().map_err(backend)
}

fn insert_index(
    transaction: &Transaction<'_>,
    seq: i64,
    entries: &[Entry],
) -> Result<(), StoreError> {
    let mut insert = transaction
        .prepare_cached(
            "INSERT INTO thing_index (thing, path, wildcard_path, kind, num, str) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(backend)?;
    for entry in entries {
        insert
            .execute(params![
                seq,
                entry.path,
                entry.wildcard_path,
                entry.value.kind(),
                entry.value.number(),
                entry.value.string(),
            ])
            .map_err(backend)?;
    }
    Ok(())
}

fn update_lists(
    transaction: &Transaction<'_>,
    seq: i64,
    lists: &ListChanges,
) -> Result<(), StoreError> {
    for (statement, paths) in [
        ("DELETE FROM thing_lists WHERE thing = ?1 AND path = ?2", &lists.removed),
        ("INSERT INTO thing_lists (thing, path) VALUES (?1, ?2)", &lists.added),
    ] {
        for path in paths {
            execute(transaction, statement, params![seq, path])?;
        }
    }
    Ok(())
}

fn thing_revision(connection: &Connection, id: &str) -> Result<Option<(i64, u64)>, StoreError> {
    connection
        .prepare_cached("SELECT seq, revision FROM things WHERE id = ?1")
        .and_then(|mut statement| {
            statement.query_row([id], |row| Ok((row.get(0)?, row.get(1)?))).optional()
        })
        .map_err(backend)
}

fn policy_revision(connection: &Connection, id: &str) -> Result<Option<u64>, StoreError> {
    connection
        .prepare_cached("SELECT revision FROM policies WHERE id = ?1")
        .and_then(|mut statement| statement.query_row([id], |row| row.get(0)).optional())
        .map_err(backend)
}

fn read_thing(connection: &Connection, id: &str) -> rusqlite::Result<Option<ThingRecord>> {
    connection
        .prepare_cached(
            "SELECT id, policy_id, revision, created, modified, doc FROM things WHERE id = ?1",
        )?
        .query_row([id], thing_from_row)
        .optional()
}

/// A thing from a row of `id, policy_id, revision, created, modified, doc`.
pub(super) fn thing_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ThingRecord> {
    Ok(ThingRecord {
        id: row.get(0)?,
        policy_id: row.get(1)?,
        revision: row.get(2)?,
        created: row.get(3)?,
        modified: row.get(4)?,
        doc: Arc::new(parse_doc(row, 5)?),
    })
}

fn read_policy(connection: &Connection, id: &str) -> rusqlite::Result<Option<PolicyRecord>> {
    connection
        .prepare_cached("SELECT id, revision, created, modified, doc FROM policies WHERE id = ?1")?
        .query_row([id], policy_row)
        .optional()
}

/// A policy of `SELECT id, revision, created, modified, doc`.
fn policy_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<PolicyRecord> {
    Ok(PolicyRecord {
        id: row.get(0)?,
        revision: row.get(1)?,
        created: row.get(2)?,
        modified: row.get(3)?,
        doc: Arc::new(parse_doc(row, 4)?),
    })
}

fn parse_doc(row: &rusqlite::Row<'_>, column: usize) -> rusqlite::Result<Value> {
    let text: String = row.get(column)?;
    serde_json::from_str(&text).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(
            column,
            rusqlite::types::Type::Text,
            Box::new(error),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Expect;
    use serde_json::json;

    fn thing(id: &str, revision: u64, doc: Value) -> ThingRecord {
        ThingRecord {
            id: id.to_owned(),
            policy_id: Some(id.to_owned()),
            revision,
            created: "2026-11-25T00:00:00Z".into(),
            modified: format!("2026-11-25T00:00:0{revision}Z"),
            doc: Arc::new(doc),
        }
    }

    fn policy(id: &str, revision: u64) -> PolicyRecord {
        PolicyRecord {
            id: id.to_owned(),
            revision,
            created: "2026-11-25T00:00:00Z".into(),
            modified: "2026-11-25T00:00:00Z".into(),
            doc: Arc::new(json!({"policyId": id, "entries": {}})),
        }
    }

    fn index_rows(path: &Path) -> Vec<(String, Option<f64>, Option<String>)> {
        let connection = page_cache::open(path, OpenFlags::default()).unwrap();
        let mut statement =
            connection.prepare("SELECT path, num, str FROM thing_index ORDER BY rowid").unwrap();
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[tokio::test]
    async fn a_thing_and_its_policy_are_created_together_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("twins.db");
        let store = SqliteStore::open(&path, false).unwrap();
        let created = thing("a:b", 1, json!({"thingId": "a:b", "attributes": {"x": 1}}));
        store
            .commit(vec![
                Write::Policy { record: policy("a:b", 1), expect: Expect::Absent },
                Write::Thing { record: created.clone(), expect: Expect::Absent },
            ])
            .await
            .unwrap();
        assert_eq!(store.thing("a:b").await.unwrap(), Some(created));
        assert_eq!(store.policy("a:b").await.unwrap().unwrap().revision, 1);
        assert_eq!(index_rows(&path), vec![("attributes/x".into(), Some(1.0), None)]);
    }

    #[tokio::test]
    async fn a_group_that_finds_the_unexpected_writes_nothing_and_others_still_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("twins.db");
        let store = Arc::new(SqliteStore::open(&path, true).unwrap());
        let first = thing("a:b", 1, json!({"attributes": {"x": 1}}));
        store.commit(vec![Write::Thing { record: first, expect: Expect::Absent }]).await.unwrap();

        // Stale: expects revision 5. Its policy must not be written either.
        let stale = store.commit(vec![
            Write::Policy { record: policy("p:q", 1), expect: Expect::Absent },
            Write::Thing {
                record: thing("a:b", 6, json!({"attributes": {"x": 6}})),
                expect: Expect::Revision(5),
            },
        ]);
        let fresh = store.commit(vec![Write::Thing {
            record: thing("a:b", 2, json!({"attributes": {"x": 2, "y": "s"}})),
            expect: Expect::Revision(1),
        }]);
        let (stale, fresh) = tokio::join!(stale, fresh);
        assert!(matches!(stale, Err(StoreError::Conflict { entity: "thing", .. })), "{stale:?}");
        fresh.unwrap();
        assert_eq!(store.policy("p:q").await.unwrap(), None);
        assert_eq!(store.thing("a:b").await.unwrap().unwrap().revision, 2);
        assert_eq!(
            index_rows(&path),
            vec![
                ("attributes/x".into(), Some(2.0), None),
                ("attributes/y".into(), None, Some("s".into()))
            ]
        );

        store
            .commit(vec![Write::DeleteThing { id: "a:b".into(), expect: Expect::Revision(2) }])
            .await
            .unwrap();
        assert_eq!(store.thing("a:b").await.unwrap(), None);
        assert!(index_rows(&path).is_empty(), "the index goes with the thing");
    }

    #[tokio::test]
    async fn a_journal_written_before_its_later_columns_gains_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("twins.db");
        let old_schema = SCHEMA.replace(",\n    correlation_id TEXT,\n    originator TEXT", "");
        assert_ne!(old_schema, SCHEMA);
        page_cache::open(&path, OpenFlags::default()).unwrap().execute_batch(&old_schema).unwrap();
        let event = |revision, headers: Option<(&str, &str)>| {
            Write::Event(EventRecord {
                thing_id: "ns:t".into(),
                policy_id: None,
                revision,
                timestamp: "2026-11-28T00:00:00Z".into(),
                at: 1_795_824_000,
                action: "modified".into(),
                path: "/attributes/x".into(),
                value: Some(Arc::new(json!(revision))),
                correlation_id: headers.map(|(id, _)| id.to_owned()),
                originator: headers.map(|(_, who)| who.to_owned()),
            })
        };
        {
            let store = SqliteStore::open(&path, false).unwrap();
            store.commit(vec![event(1, Some(("c-1", "nginx:ditto")))]).await.unwrap();
        }
        // Opened again: the columns are there, and not added twice.
        let store = SqliteStore::open(&path, false).unwrap();
        store.commit(vec![event(2, None)]).await.unwrap();
        let found = store.events_after(0, 10).await.unwrap();
        let headers: Vec<_> = found
            .iter()
            .map(|(_, record)| (record.correlation_id.as_deref(), record.originator.as_deref()))
            .collect();
        assert_eq!(headers, [(Some("c-1"), Some("nginx:ditto")), (None, None)]);
    }

    #[tokio::test]
    async fn the_wal_stays_bounded_under_steady_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("twins.db");
        let store = SqliteStore::open(&path, false).unwrap();
        // ~25 pages each, all queued at once so that the writer begins its
        // next transaction right after each commit, as under load: ~15,000
        // pages of WAL, almost four times the limit.
        let writes = (0..600)
            .map(|n| {
                let id = format!("ns:t{n}");
                let filler = "x".repeat(100_000);
                store.commit(vec![Write::Thing {
                    record: thing(&id, 1, json!({"attributes": {"filler": filler}})),
                    expect: Expect::Absent,
                }])
            })
            .collect::<Vec<_>>();
        for write in writes {
            write.await.unwrap();
        }
        let wal = std::fs::metadata(dir.path().join("twins.db-wal")).unwrap().len();
        let bound = checkpointer::WAL_FILE_LIMIT;
        assert!(wal <= bound, "the WAL is {wal} bytes, over {bound}");
    }

    /// The bytes the connection's page cache holds
    /// (`SQLITE_DBSTATUS_CACHE_USED`).
    fn cache_used(connection: &Connection) -> i64 {
        let (mut current, mut highest) = (0, 0);
        // SAFETY: the handle of a live connection, used on this thread
        // only, and two live integers for the answer.
        let status = unsafe {
            rusqlite::ffi::sqlite3_db_status(
                connection.handle(),
                rusqlite::ffi::SQLITE_DBSTATUS_CACHE_USED,
                &mut current,
                &mut highest,
                0,
            )
        };
        assert_eq!(status, rusqlite::ffi::SQLITE_OK);
        i64::from(current)
    }

    #[test]
    fn commits_skip_the_page_cache_scan_and_a_rolled_back_growth_leaves_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let connection = page_cache::open(&dir.path().join("t.db"), OpenFlags::default()).unwrap();
        assert!(
            page_cache::install(),
            "SQLite was initialised before the page cache was installed"
        );
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL; \
                 CREATE TABLE t (n INTEGER PRIMARY KEY, v REAL, filler BLOB); CREATE INDEX t_v ON t (v);",
            )
            .unwrap();
        let skipped = page_cache::skipped();
        // Values all over the index, so that its pages split everywhere
        // (and `balance_nonroot` parks pages beyond the end).
        let mut x: u64 = 1;
        // Opens a transaction and inserts `rows` rows with `filler`.
        let mut insert = |rows: usize, filler: &str| {
            let transaction = connection.unchecked_transaction().unwrap();
            let sql = format!("INSERT INTO t (v, filler) VALUES (?1, {filler})");
            for _ in 0..rows {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                transaction.execute(&sql, [(x >> 11) as f64]).unwrap();
            }
            transaction
        };
        for _ in 0..100 {
            insert(50, "NULL").commit().unwrap();
        }
        assert!(page_cache::skipped() > skipped, "no commit skipped the scan");
        // A growth rolled back: the pages it added beyond the end must
        // leave the cache. (In WAL mode a rollback clears the whole cache;
        // with a rollback journal it is the truncate that drops them.)
        connection.execute_batch("PRAGMA journal_mode = DELETE").unwrap();
        let pages = |connection: &Connection| -> i64 {
            connection.query_row("PRAGMA page_count", [], |row| row.get(0)).unwrap()
        };
        let before = pages(&connection);
        let cached_before = cache_used(&connection);
        insert(500, "zeroblob(2000)").rollback().unwrap();
        assert_eq!(pages(&connection), before);
        // ~250 pages of 4 KiB were added and dropped; what the index's
        // pages changed back take stays within a few dozen of them.
        let cached_after = cache_used(&connection);
        assert!(
            cached_after < cached_before + 200 * 1024,
            "the cache held {cached_before} bytes before the growth and {cached_after} after its rollback"
        );
        insert(500, "randomblob(1000)").commit().unwrap();
        let rows: i64 =
            connection.query_row("SELECT count(*) FROM t", [], |row| row.get(0)).unwrap();
        assert_eq!(rows, 5_500);
        let check: String =
            connection.query_row("PRAGMA integrity_check", [], |row| row.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    #[tokio::test]
    async fn what_was_committed_is_there_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("twins.db");
        {
            let store = SqliteStore::open(&path, false).unwrap();
            let writes = (0..100)
                .map(|n| {
                    let id = format!("ns:t{n}");
                    store.commit(vec![Write::Thing {
                        record: thing(&id, 1, json!({"attributes": {"n": n}})),
                        expect: Expect::Absent,
                    }])
                })
                .collect::<Vec<_>>();
            for write in writes {
                write.await.unwrap();
            }
        }
        let store = SqliteStore::open(&path, false).unwrap();
        let found = store.thing("ns:t99").await.unwrap().unwrap();
        assert_eq!(found.doc["attributes"]["n"], 99);
        assert_eq!(found.namespace(), "ns");
    }

    /// A search request for `filter` in every namespace.
    fn searching(filter: &str) -> SearchRequest {
        let query = crate::rql::SearchQuery::parse(Some(filter), None).unwrap();
        SearchRequest {
            filter: query.filter,
            namespaces: None,
            sort: query.options.effective_sort(),
            after: None,
            limit: 25,
        }
    }

    #[tokio::test]
    async fn strings_outside_metadata_are_found_through_the_string_index_and_metadata_still_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("twins.db");
        // A store as written before the index left `_metadata` out.
        {
            let connection = page_cache::open(&path, OpenFlags::default()).unwrap();
            connection
                .execute_batch(&SCHEMA.replace(" AND path NOT GLOB '_metadata/*'", ""))
                .unwrap();
        }
        let store = SqliteStore::open(&path, false).unwrap();
        let doc = json!({
            "attributes": {"model": "brewer"},
            "_metadata": {"attributes": {"model": {"_modified": "2026-11-27T10:00:00Z"}}},
        });
        store
            .commit(vec![Write::Thing { record: thing("ns:t", 1, doc), expect: Expect::Absent }])
            .await
            .unwrap();

        let attribute = searching(r#"eq(attributes/model,"brewer")"#);
        let plan = store.explain_search(&attribute).await.unwrap();
        assert!(plan.contains("thing_index_str"), "{plan}");
        assert_eq!(store.search(&attribute).await.unwrap().len(), 1);

        let metadata =
            searching(r#"eq(_metadata/attributes/model/_modified,"2026-11-27T10:00:00Z")"#);
        let plan = store.explain_search(&metadata).await.unwrap();
        assert!(!plan.contains("thing_index_str"), "{plan}");
        assert_eq!(store.search(&metadata).await.unwrap().len(), 1);
        let later = searching(r#"gt(_metadata/attributes/model/_modified,"2026-11-27T11:00:00Z")"#);
        assert!(store.search(&later).await.unwrap().is_empty());
    }
}
