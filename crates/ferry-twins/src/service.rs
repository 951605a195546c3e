//! The twin service: what the HTTP API (and, next, the Ditto protocol over
//! MQTT and WebSocket) calls. It reads through bounded caches, checks every
//! read and write against the policy in force, and writes through the
//! store.
//!
//! **Concurrency.** Reads take no lock: a cached entity is an immutable
//! `Arc` replaced whole on change. A write to one entity is a
//! read-modify-write (apply the command to the current revision, store it
//! expecting that revision), and writes to the same entity are serialised
//! by a striped lock, so they do not race each other into conflicts; the
//! store's revision check still guards against another node writing the
//! same PostgreSQL database.
//!
//! **Caches.** Policies are cached with their compiled enforcer
//! (`Enforcer::compile` once per policy revision and revision of what it
//! imports, shared by every thing that uses the policy and every request
//! that reads it; `imports.rs`).

mod enforcers;
mod events;
mod if_equal;
mod imports;
mod journal;
mod policies;
mod read_through;
pub mod search;
mod things;
pub mod watch;

pub(crate) use things::with_always_shown;

pub use events::{next_event, ThingAction, ThingEvent, EVENT_BUFFER};
pub use if_equal::IfEqual;
pub(crate) use imports::policy_of;
pub use imports::CachedPolicy;
pub use policies::PolicyResource;
pub(crate) use things::{not_accessible, not_modifiable};
pub use things::{
    view, Conditions, Outcome as ThingOutcome, Refused, Retrieved as RetrievedThing, TagMatch,
    ThingWrite, Written as ThingWritten,
};

use crate::error::DittoError;
use crate::policy::PolicyLimits;
use crate::store::{Store, StoreError};
use quick_cache::sync::Cache;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use tokio::sync::{Mutex, MutexGuard};

/// Settings of the twin service (`[twins]` in the configuration).
#[derive(Debug, Clone)]
pub struct TwinsConfig {
    pub policy_limits: PolicyLimits,
    /// Policies kept in memory, compiled, at most.
    pub cached_policies: usize,
    /// Things kept in memory at most.
    pub cached_things: usize,
    pub thing_limits: crate::thing::ThingLimits,
    /// How long the event journal keeps an event for streams to resume
    /// from (`journal.rs`); `None`: no journal, and no resuming.
    pub event_retention: Option<std::time::Duration>,
}

impl Default for TwinsConfig {
    fn default() -> Self {
        TwinsConfig {
            policy_limits: PolicyLimits::default(),
            cached_policies: 100_000,
            cached_things: 100_000,
            thing_limits: crate::thing::ThingLimits::default(),
            event_retention: Some(std::time::Duration::from_secs(24 * 3600)),
        }
    }
}

/// Who is asking: the subjects authentication proved (`nginx:alice`,
/// `jwt:…`), as policies name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub subjects: Vec<String>,
}

impl Caller {
    pub fn new(subjects: Vec<String>) -> Caller {
        Caller { subjects }
    }
}

/// Write locks: one of `STRIPES` mutexes per entity id, by hash. Two ids
/// sharing a stripe only wait for each other's writes, which are short.
const STRIPES: usize = 1024;

pub struct Twins {
    store: Store,
    config: TwinsConfig,
    /// `None`: known not to exist (`imports.rs` remembers that of the
    /// policies it imports; a creation overwrites it).
    policies: Cache<String, Option<Arc<CachedPolicy>>>,
    enforcers: enforcers::Enforcers,
    /// Serialized (`thing/compact.rs`): parsed again on each use.
    things: Cache<String, Arc<crate::thing::CompactThing>>,
    stripes: Vec<Mutex<()>>,
    hasher: RandomState,
    events: tokio::sync::broadcast::Sender<ThingEvent>,
    /// Set when the server shuts down: streams of events end on it.
    closing: tokio::sync::watch::Sender<bool>,
    /// Event subscribers that fell behind the feed (`watch.rs`).
    lagged: std::sync::atomic::AtomicU64,
    live: crate::live::Live,
    acks: Arc<crate::acks::AckHub>,
    announcements: crate::announcements::Announcements,
}

impl Twins {
    pub fn new(store: Store, config: TwinsConfig) -> Twins {
        Twins {
            store,
            policies: Cache::new(config.cached_policies.max(1)),
            enforcers: enforcers::Enforcers::default(),
            things: Cache::new(config.cached_things.max(1)),
            config,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: RandomState::new(),
            events: tokio::sync::broadcast::channel(EVENT_BUFFER).0,
            closing: tokio::sync::watch::channel(false).0,
            lagged: std::sync::atomic::AtomicU64::new(0),
            live: crate::live::Live::default(),
            acks: Arc::default(),
            announcements: Default::default(),
        }
    }

    /// Subscribers' acknowledgement labels and the commands waiting for
    /// them (`acks.rs`).
    pub fn ack_hub(&self) -> &Arc<crate::acks::AckHub> {
        &self.acks
    }

    /// Ends every stream of events, for a shutdown: a stream would
    /// otherwise hold the HTTP server's graceful shutdown open forever.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Becomes `true` when [`Twins::close`] is called.
    pub fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Puts `event` on the change feed as a commit would: for tests of
    /// what subscribers make of an order the store's commits can give.
    #[cfg(test)]
    pub(crate) fn announce(&self, event: ThingEvent) {
        let _ = self.events.send(event);
    }

    /// The change feed: every thing change committed from now on, in
    /// revision order per thing (`events.rs`).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<ThingEvent> {
        self.events.subscribe()
    }

    /// Subject expiry and policy announcements (`announcements.rs`).
    pub fn announcements(&self) -> &crate::announcements::Announcements {
        &self.announcements
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The revision of the policy `id` in the cache, if it is there.
    pub(crate) fn cached_policy_revision(&self, id: &str) -> Option<u64> {
        let cached = self.policies.get(id).flatten()?;
        Some(cached.policy.housekeeping.revision)
    }

    /// The live channel's hub: subscribers and pending calls (`live.rs`).
    pub fn live(&self) -> &crate::live::Live {
        &self.live
    }

    /// Things and policies in the caches now, for metrics.
    pub fn cached(&self) -> (usize, usize) {
        (self.things.len(), self.policies.len())
    }

    pub fn config(&self) -> &TwinsConfig {
        &self.config
    }

    /// The lock every write to the entity `kind:id` holds from reading the
    /// current revision to storing the next.
    async fn write_lock(&self, kind: &str, id: &str) -> MutexGuard<'_, ()> {
        let stripe = self.hasher.hash_one((kind, id)) as usize % STRIPES;
        self.stripes[stripe].lock().await
    }
}

/// A store failure as the API answers it: Ditto's "unavailable" error of
/// the entity, made by `unavailable`, with the cause in the log (it may
/// name the database, which the caller has no business seeing).
pub(crate) fn store_failure(error: StoreError, unavailable: DittoError) -> DittoError {
    tracing::error!(%error, "twin store failure");
    unavailable
}
