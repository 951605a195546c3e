//! What each endpoint has done, for logs, `$SYS` and metrics: messages
//! sent and dropped (by reason), whether it is connected, and how long it
//! is backing off. Updated once per batch, not per message.

use parking_lot::Mutex;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug)]
pub struct EndpointStats {
    /// Messages routes sent its way (stored for it).
    routed: AtomicU64,
    connected: AtomicBool,
    sent: AtomicU64,
    batches: AtomicU64,
    backoff_ms: AtomicU64,
    /// When the backoff in progress ends, in Unix milliseconds; 0 when
    /// there is none.
    backoff_until_ms: AtomicU64,
    last_batch_us: AtomicU64,
    /// Reasons are a handful of static names (`ttl`, `rejected_by_endpoint`,
    /// …), so the map stays tiny.
    dropped: Mutex<BTreeMap<&'static str, u64>>,
    /// Seconds from a batch's send to its acknowledgement.
    pub(crate) send_seconds: Histogram,
    /// Messages per batch.
    pub(crate) batch_messages: Histogram,
}

impl Default for EndpointStats {
    fn default() -> Self {
        EndpointStats {
            routed: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            backoff_ms: AtomicU64::new(0),
            backoff_until_ms: AtomicU64::new(0),
            last_batch_us: AtomicU64::new(0),
            dropped: Mutex::default(),
            // 100 µs .. ~52 s: a batch to a local broker up to one through
            // a slow link's timeout.
            send_seconds: Histogram::new(exponential_buckets(0.0001, 2.0, 20)),
            // 1 .. 16,384: up to past the largest batch allowed.
            batch_messages: Histogram::new(exponential_buckets(1.0, 2.0, 15)),
        }
    }
}

/// A copy of the figures at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointFigures {
    pub routed: u64,
    pub connected: bool,
    pub sent: u64,
    pub batches: u64,
    pub backoff: Duration,
    /// When the backoff in progress ends, in Unix milliseconds; 0 when
    /// there is none.
    pub backoff_until_ms: u64,
    pub last_batch: Duration,
    pub dropped: BTreeMap<&'static str, u64>,
}

impl EndpointStats {
    pub(crate) fn count_routed(&self) {
        self.routed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Relaxed);
    }

    pub(crate) fn set_backoff(&self, backoff: Duration) {
        let ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX);
        self.backoff_ms.store(ms, Ordering::Relaxed);
        let until = if backoff.is_zero() {
            0
        } else {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |now| u64::try_from(now.as_millis()).unwrap_or(u64::MAX))
                .saturating_add(ms)
        };
        self.backoff_until_ms.store(until, Ordering::Relaxed);
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
        self.send_seconds.observe(took.as_secs_f64());
        self.batch_messages.observe(messages as f64);
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
            routed: self.routed.load(Ordering::Relaxed),
            connected: self.connected.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            backoff: Duration::from_millis(self.backoff_ms.load(Ordering::Relaxed)),
            backoff_until_ms: self.backoff_until_ms.load(Ordering::Relaxed),
            last_batch: Duration::from_micros(self.last_batch_us.load(Ordering::Relaxed)),
            dropped: self.dropped.lock().clone(),
        }
    }
}
