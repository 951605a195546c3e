//! A route endpoint's queue, as the endpoint (`ferry-routes`) reads it: the
//! messages routed to it, by priority, read back from the one durable log.
//!
//! The queue is the ledger's list of offsets for the endpoint; no message
//! is copied for it. The reader keeps, per priority, how far it has taken
//! (its cursor): what it took and has not yet reported done is in flight,
//! and after a failed send it rewinds, so that what is still queued comes
//! again. Reporting offsets done (sent, expired or dropped) stores a record
//! that takes them off the queue, and the log's segments go once no queue
//! holds them.

use crate::broker::{message_from_stored, Broker};
use crate::durable::record::{Published, Record};
use crate::durable::StoreError;
use crate::message::Message;
use crate::routing::{EndpointTarget, PRIORITIES};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// A message routed to the endpoint.
#[derive(Debug)]
pub struct RoutedMessage {
    /// Where it is in the log: what `EndpointQueue::done` takes.
    pub offset: u64,
    pub priority: u8,
    /// Unix ms after which it must not be sent; 0 for never.
    pub expires_at_ms: u64,
    /// Its record's size in the log: what `done` takes off the endpoint's
    /// disk cap.
    pub stored_bytes: u64,
    pub message: Message,
    /// The client id of its publisher; `None` for a message the broker
    /// made (a will's, a command from an uplink) or one stored before
    /// client ids were kept.
    pub publisher: Option<Arc<str>>,
}

impl RoutedMessage {
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms != 0 && self.expires_at_ms <= now_ms
    }
}

pub struct EndpointQueue {
    broker: Arc<Broker>,
    name: Arc<str>,
    waker: Arc<Notify>,
    /// Per priority: offsets below this were taken already.
    next: [u64; PRIORITIES],
    /// `done` records appended and not yet stored: until they are, the
    /// ledger still lists their offsets, and a reader that rewound would
    /// take (and send) them again.
    unsettled: Arc<Unsettled>,
}

#[derive(Default)]
struct Unsettled {
    records: AtomicUsize,
    stored: Notify,
}

impl Broker {
    /// The queue of the endpoint `name`; `None` when durability is off,
    /// since routed messages live in the durable log.
    pub fn endpoint_queue(self: &Arc<Self>, name: &str) -> Option<EndpointQueue> {
        self.store.as_ref()?;
        Some(EndpointQueue {
            broker: self.clone(),
            name: name.into(),
            waker: self.routing.waker(name),
            next: [0; PRIORITIES],
            unsettled: Arc::default(),
        })
    }

    /// The endpoints with messages queued, configured or not.
    pub fn queued_endpoints(&self) -> Vec<String> {
        self.store.as_ref().map_or_else(Vec::new, |store| store.queued_endpoints())
    }
}

impl EndpointQueue {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until a message for the endpoint may have been stored since
    /// the last wait (at once if one was stored meanwhile).
    pub async fn stored(&self) {
        self.waker.notified().await;
    }

    /// Takes up to `limit` offsets at `priority` that were not taken yet.
    pub fn take(&mut self, priority: u8, limit: usize) -> Vec<u64> {
        let Some(store) = &self.broker.store else { return Vec::new() };
        let next = &mut self.next[usize::from(priority)];
        let taken = store.endpoint_pending(&self.name, priority, *next, limit);
        if let Some(last) = taken.last() {
            *next = last + 1;
        }
        taken
    }

    /// Whether `take` at `priority` would give anything now.
    pub fn has_pending(&self, priority: u8) -> bool {
        let Some(store) = &self.broker.store else { return false };
        let next = self.next[usize::from(priority)];
        !store.endpoint_pending(&self.name, priority, next, 1).is_empty()
    }

    /// Gives back what `take` gave at `priority` from `offset` on (a batch
    /// that was full before it used them): they are taken again next time.
    pub fn give_back(&mut self, priority: u8, offset: u64) {
        let next = &mut self.next[usize::from(priority)];
        *next = (*next).min(offset);
    }

    /// The message stored at `offset`, which `take` gave.
    pub fn read(&self, offset: u64) -> Result<RoutedMessage, StoreError> {
        let store = self.broker.store.as_ref().expect("endpoint queues exist with a store");
        let (published, stored_bytes) = store.read_published_sized(offset)?;
        Ok(self.routed(offset, published, stored_bytes))
    }

    /// `read` of each of `offsets`, in order: what `take` gives lies close
    /// together in the log, and is read a stretch at a time.
    pub fn read_many(&self, offsets: &[u64]) -> Vec<Result<RoutedMessage, StoreError>> {
        let store = self.broker.store.as_ref().expect("endpoint queues exist with a store");
        offsets
            .iter()
            .zip(store.read_published_many(offsets))
            .map(|(&offset, read)| {
                read.map(|(published, stored_bytes)| self.routed(offset, published, stored_bytes))
            })
            .collect()
    }

    fn routed(&self, offset: u64, published: Published, stored_bytes: u64) -> RoutedMessage {
        let target = published
            .endpoints
            .iter()
            .find(|target| *target.endpoint == *self.name)
            .cloned()
            .unwrap_or(EndpointTarget {
                endpoint: self.name.clone(),
                priority: 0,
                expires_at_ms: 0,
            });
        RoutedMessage {
            offset,
            priority: target.priority,
            expires_at_ms: target.expires_at_ms,
            stored_bytes,
            message: message_from_stored(&published.message),
            publisher: published.publisher,
        }
    }

    /// Takes the messages at `offsets` off the queue, `bytes` of log in
    /// all (their `stored_bytes`): sent, expired or dropped. Not waited for
    /// (losing this record in a crash only sends them again), except by
    /// `settled`.
    pub fn done(&self, mut offsets: Vec<u64>, bytes: u64) {
        let Some(store) = &self.broker.store else { return };
        if offsets.is_empty() {
            return;
        }
        offsets.sort_unstable();
        offsets.dedup();
        self.unsettled.records.fetch_add(1, Ordering::AcqRel);
        let unsettled = self.unsettled.clone();
        let record = Record::Forwarded { endpoint: self.name.to_string(), offsets, bytes };
        store.append(record, move |result| {
            if let Err(error) = result {
                tracing::warn!(%error, "durable state: could not record messages an endpoint sent; they will be sent again after a restart");
            }
            if unsettled.records.fetch_sub(1, Ordering::AcqRel) == 1 {
                unsettled.stored.notify_waiters();
            }
        });
    }

    /// Waits until everything reported `done` is off the queue in the
    /// ledger: then no reader, this one rewound or a successor, takes it
    /// again.
    pub async fn settled(&self) {
        loop {
            let stored = self.unsettled.stored.notified();
            tokio::pin!(stored);
            stored.as_mut().enable();
            if self.unsettled.records.load(Ordering::Acquire) == 0 {
                return;
            }
            stored.await;
        }
    }

    /// Forgets what was taken and not reported done: it is taken again,
    /// from the front of each priority, once what was done is settled.
    pub async fn rewind(&mut self) {
        self.settled().await;
        self.next = [0; PRIORITIES];
    }

    /// The `count` oldest messages queued, at any priority, taken or not,
    /// oldest first.
    pub fn oldest(&self, count: usize) -> Vec<u64> {
        let Some(store) = &self.broker.store else { return Vec::new() };
        let mut oldest: Vec<u64> = (0..=crate::routing::LOWEST_PRIORITY)
            .flat_map(|priority| store.endpoint_pending(&self.name, priority, 0, count))
            .collect();
        oldest.sort_unstable();
        oldest.truncate(count);
        oldest
    }

    /// The log bytes the queue holds, counting what was reported done and
    /// is not yet stored as such.
    pub fn bytes(&self) -> u64 {
        self.broker.store.as_ref().map_or(0, |store| store.endpoint_bytes(&self.name))
    }

    /// The messages queued, by priority, counting those taken and not
    /// yet done.
    pub fn backlog(&self) -> [usize; PRIORITIES] {
        self.broker
            .store
            .as_ref()
            .map_or([0; PRIORITIES], |store| store.endpoint_backlog(&self.name))
    }
}
