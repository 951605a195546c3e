//! Where things and policies are kept: SQLite in the data directory by
//! default, PostgreSQL for deployments that share one database.
//!
//! A store keeps each thing as its JSON document (without the housekeeping
//! fields, which are columns: revision, created, modified) and, beside it,
//! an index of every leaf of that document (`index.rs`): one row per
//! value, keyed by its path, which is what search filters on. Both are
//! written in one transaction, so a search sees a write as soon as the
//! write is answered (Ditto's search lags its writes by one to two
//! seconds).
//!
//! Writes go in groups (`commit`): a group is all or nothing, which is how
//! a thing and the policy made for it are created together. Each group
//! states what it expects to find (`Expect`): that is the optimistic check
//! that turns a lost race into a clear conflict instead of a lost update.
//!
//! The choice between the two databases is an enum rather than a trait
//! object: there are two, both known here, and every call is async.

pub mod index;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod search;
pub mod sqlite;

use crate::rql::Filter;
use search::{Found, SearchRequest};
use serde_json::Value;
use std::sync::Arc;

/// A thing as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ThingRecord {
    /// `namespace:name`.
    pub id: String,
    pub policy_id: Option<String>,
    /// Increments by one with every change; starts at 1.
    pub revision: u64,
    /// RFC 3339, UTC.
    pub created: String,
    pub modified: String,
    /// The thing's JSON document, without `_revision`, `_created` and
    /// `_modified`.
    pub doc: Arc<Value>,
}

impl ThingRecord {
    /// The part of the id before its first `:`.
    pub fn namespace(&self) -> &str {
        self.id.split_once(':').map_or("", |(namespace, _)| namespace)
    }
}

/// A policy as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRecord {
    pub id: String,
    pub revision: u64,
    pub created: String,
    pub modified: String,
    pub doc: Arc<Value>,
}

/// What a write expects to find in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing under that id: a create.
    Absent,
    /// The entity at exactly this revision: a change of what was read.
    Revision(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    Thing {
        record: ThingRecord,
        expect: Expect,
    },
    DeleteThing {
        id: String,
        expect: Expect,
    },
    Policy {
        record: PolicyRecord,
        expect: Expect,
    },
    DeletePolicy {
        id: String,
        expect: Expect,
    },
    /// An entry of the event journal, in the group of the change it
    /// records, so that the journal holds exactly what was committed.
    Event(EventRecord),
    /// Removes the oldest journal entries from before `before` (Unix
    /// seconds), at most [`PRUNE_BATCH`] of them.
    PruneEvents {
        before: i64,
    },
}

/// One committed change of a thing as the event journal keeps it, for
/// streams that resume where they left off (`service/journal.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub thing_id: String,
    /// The thing's policy when the change was made: who may see it.
    pub policy_id: Option<String>,
    pub revision: u64,
    /// RFC 3339, UTC, as the thing's `_modified`.
    pub timestamp: String,
    /// `timestamp` in Unix seconds: what pruning compares, since the text
    /// of an instant does not sort (`…:00Z` after `…:00.5Z`).
    pub at: i64,
    /// `created`, `modified`, `merged` or `deleted`.
    pub action: String,
    /// The resource changed, a JSON pointer into the thing.
    pub path: String,
    /// What was written there; `None` for a deletion.
    pub value: Option<Arc<Value>>,
    /// The `correlation-id` of the command that made the change, which
    /// its event carries when replayed as when it was new (one of Ditto's
    /// default `historical-headers-to-persist`).
    pub correlation_id: Option<String>,
    /// Who made the change: the first subject of the command's caller,
    /// Ditto's `ditto-originator` (the other default historical header).
    pub originator: Option<String>,
}

/// Groups committed in one transaction at most: enough to share an fsync
/// among a burst of callers, few enough that one transaction stays short
/// and a failed commit answers a bounded number of them with its error.
/// Also how far apart in the journal two events can be that the change
/// feed announces out of order (the waiters of one commit wake in any
/// order; a group journals at most one event).
pub const GROUPS_PER_COMMIT: usize = 256;

/// Journal entries one prune removes at most: one prune is one write
/// transaction, and the writer serves every change, so it stays short.
pub const PRUNE_BATCH: u64 = 10_000;

/// A prune in both stores' SQL (`?1` the bound, `?2` the batch): of the
/// oldest entries by place, those from before the bound. Places follow
/// commit order and times nearly so, so this reads a batch of rows rather
/// than an index on the time that every insert would pay for. The newest
/// entry stays: SQLite gives the next row the highest id plus one, which
/// must never be one a client has seen.
pub(crate) const PRUNE_EVENTS: &str = "DELETE FROM thing_events WHERE seq IN \
    (SELECT seq FROM (SELECT seq, at FROM thing_events ORDER BY seq LIMIT ?2) AS oldest \
     WHERE at < ?1 AND seq < (SELECT max(seq) FROM thing_events))";

/// What a commit did beyond writing: where its journal entries landed
/// and how many old ones it pruned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// The sequence number of each `Write::Event`, in order: store-wide,
    /// increasing in commit order, never reused.
    pub events: Vec<u64>,
    pub pruned: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A write found something other than it expected: another write got
    /// there first. Nothing of its group was written.
    #[error("{entity} {id:?} changed meanwhile: expected {expected}, found {found}")]
    Conflict { entity: &'static str, id: String, expected: String, found: String },
    #[error("the twin store failed: {0}")]
    Backend(String),
    #[error("the twin store is closed")]
    Closed,
}

/// Whether what a write `found` (its revision, or nothing) is what it
/// `expect`ed: the check every store makes inside the write's transaction.
pub(crate) fn check_expectation(
    entity: &'static str,
    id: &str,
    expect: Expect,
    found: Option<u64>,
) -> Result<(), StoreError> {
    let matches = match expect {
        Expect::Absent => found.is_none(),
        Expect::Revision(revision) => found == Some(revision),
    };
    if matches {
        return Ok(());
    }
    let describe = |revision: Option<u64>| match revision {
        Some(revision) => format!("revision {revision}"),
        None => "none".to_owned(),
    };
    let expected = match expect {
        Expect::Absent => None,
        Expect::Revision(revision) => Some(revision),
    };
    Err(StoreError::Conflict {
        entity,
        id: id.to_owned(),
        expected: describe(expected),
        found: describe(found),
    })
}

/// The store in use.
pub enum Store {
    Sqlite(sqlite::SqliteStore),
    #[cfg(feature = "postgres")]
    Postgres(postgres::PostgresStore),
}

impl Store {
    /// Writes each group all or nothing, in order.
    pub async fn commit(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        self.commit_journaled(writes).await.map(drop)
    }

    /// [`Store::commit`], answering where the group's journal entries
    /// landed and how many it pruned.
    pub async fn commit_journaled(&self, writes: Vec<Write>) -> Result<Committed, StoreError> {
        match self {
            Store::Sqlite(store) => store.commit(writes).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.commit(writes).await,
        }
    }

    /// Journal entries after sequence number `after`, oldest first, at
    /// most `limit`.
    pub async fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, EventRecord)>, StoreError> {
        match self {
            Store::Sqlite(store) => store.events_after(after, limit).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.events_after(after, limit).await,
        }
    }

    /// The journal's newest place, 0 when it is empty.
    pub async fn events_head(&self) -> Result<u64, StoreError> {
        match self {
            Store::Sqlite(store) => store.events_head().await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.events_head().await,
        }
    }

    pub async fn thing(&self, id: &str) -> Result<Option<ThingRecord>, StoreError> {
        match self {
            Store::Sqlite(store) => store.thing(id).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.thing(id).await,
        }
    }

    pub async fn policy(&self, id: &str) -> Result<Option<PolicyRecord>, StoreError> {
        match self {
            Store::Sqlite(store) => store.policy(id).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.policy(id).await,
        }
    }

    /// Policies after the id `after` (in id order, at most `limit`) whose
    /// JSON names an `expiry` or an `announcement`: those with subjects
    /// the announcements' agenda watches, and a few that merely use the
    /// words, which it skips.
    pub async fn policies_with_timed_subjects(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<PolicyRecord>, StoreError> {
        match self {
            Store::Sqlite(store) => store.policies_with_timed_subjects(after, limit).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.policies_with_timed_subjects(after, limit).await,
        }
    }

    /// The things `request` selects, in its order, after its `after`;
    /// see `search.rs` for the semantics and the order. Runs in the
    /// database the writes commit to: a write that was answered is found.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<Found>, StoreError> {
        match self {
            Store::Sqlite(store) => store.search(request).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.search(request).await,
        }
    }

    /// The database's plan for a search, for checking that it uses the
    /// indexes (SQLite: `EXPLAIN QUERY PLAN`; PostgreSQL: `EXPLAIN
    /// ANALYZE`, which runs it).
    pub async fn explain_search(&self, request: &SearchRequest) -> Result<String, StoreError> {
        match self {
            Store::Sqlite(store) => store.explain_search(request).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.explain_search(request).await,
        }
    }

    /// How many things match, per policy id (`None`: things without one),
    /// ordered by policy id: the service answers a count with the things
    /// whose policies let the caller read them.
    pub async fn count_by_policy(
        &self,
        filter: Option<&Filter>,
        namespaces: Option<&[String]>,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        match self {
            Store::Sqlite(store) => store.count_by_policy(filter, namespaces).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.count_by_policy(filter, namespaces).await,
        }
    }
}
