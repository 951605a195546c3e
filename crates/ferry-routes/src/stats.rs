//! What each endpoint has done, for logs, `$SYS` and metrics: messages
//! sent and dropped (by reason), whether it is connected, and how long it
//! is backing off. Updated once per batch, not per message.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug, Default)]
pub struct EndpointStats {
    connected: AtomicBool,
    sent: AtomicU64,
    batches: AtomicU64,
    backoff_ms: AtomicU64,
    last_batch_us: AtomicU64,
    /// Reasons are a handful of static names (`ttl`, `rejected_by_endpoint`,
    /// …), so the map stays tiny.
    dropped: Mutex<BTreeMap<&'static str, u64>>,
}

/// A copy of the figures at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointFigures {
    pub connected: bool,
    pub sent: u64,
    pub batches: u64,
    pub backoff: Duration,
    pub last_batch: Duration,
    pub dropped: BTreeMap<&'static str, u64>,
}

impl EndpointStats {
    pub(crate) fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Relaxed);
    }

    pub(crate) fn set_backoff(&self, backoff: Duration) {
        let ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX);
        self.backoff_ms.store(ms, Ordering::Relaxed);
    }

    /// A batch the endpoint acknowledged, some of it maybe refused.
    pub(crate) fn record_batch(
        &self,
        messages: usize,
        rejected: &[(u64, &'static str)],
        took: Duration,
    ) {
        let sent = messages - rejected.len();
        self.sent.fetch_add(sent as u64, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.last_batch_us.store(us, Ordering::Relaxed);
        if !rejected.is_empty() {
            let mut dropped = self.dropped.lock();
            for (_, reason) in rejected {
                *dropped.entry(reason).or_default() += 1;
            }
        }
    }

    pub(crate) fn record_dropped(&self, reason: &'static str, count: u64) {
        *self.dropped.lock().entry(reason).or_default() += count;
    }

    pub fn figures(&self) -> EndpointFigures {
        EndpointFigures {
            connected: self.connected.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            backoff: Duration::from_millis(self.backoff_ms.load(Ordering::Relaxed)),
            last_batch: Duration::from_micros(self.last_batch_us.load(Ordering::Relaxed)),
            dropped: self.dropped.lock().clone(),
        }
    }
}
