//! Counters the broker reports in `$SYS` and Prometheus.
//!
//! Per core: every counter is an array of slots, one per core thread
//! (`cores.rs` tells each thread its slot), each on its own cache line. A
//! publish bumps several counters on the thread that reads it, and another
//! core's publishes bump the same counters at the same time; one shared
//! atomic would bounce its cache line between the cores on every message.
//! Here each core writes only its own lines, and a reader (`$SYS`, a
//! scrape, once a second) sums the slots.
//!
//! Relaxed atomics still: threads that are not core threads (the control
//! runtime, the log writer, blocking tasks) share slot 0, and a counter is
//! only ever read for reporting, so no ordering between counters is needed.
//! Sums wrap, so a gauge that is raised on one core and lowered on another
//! (`clients_connected`) still sums to the right figure.

use crate::close::DISCONNECT_REASONS;
use ferry_auth::Method;
use ferry_mqtt::QoS;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Slots per counter: slot 0 for threads that are no core's, then one per
/// core. Past 63 cores, cores share slots (still correct, since slots are
/// atomics, just not contention-free). 64 slots of 64 bytes: 4 KiB per
/// counter, about 200 KiB for all of them.
const SLOTS: usize = 64;

thread_local! {
    /// This thread's slot; 0 until `set_core` says otherwise.
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// Called once by each core's thread as it starts: its counters' slot.
pub(crate) fn set_core(index: usize) {
    SLOT.with(|slot| slot.set(1 + index % (SLOTS - 1)));
}

fn slot() -> usize {
    SLOT.with(Cell::get)
}

/// One cache line, so that two cores' slots never share one.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Padded<T>(T);

#[derive(Debug)]
pub struct Counter(Box<[Padded<AtomicU64>; SLOTS]>);

impl Default for Counter {
    fn default() -> Counter {
        Counter(Box::new(std::array::from_fn(|_| Padded::default())))
    }
}

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0[slot()].0.fetch_add(n, Ordering::Relaxed);
    }

    /// For gauges: may take a slot below zero (it wraps), the sum is right.
    pub fn sub(&self, n: u64) {
        self.0[slot()].0.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.iter().fold(0u64, |sum, slot| sum.wrapping_add(slot.0.load(Ordering::Relaxed)))
    }
}

/// One counter per QoS, indexed by it.
#[derive(Debug, Default)]
pub struct ByQos([Counter; 3]);

impl ByQos {
    pub fn at(&self, qos: QoS) -> &Counter {
        &self.0[qos as usize]
    }

    /// Each QoS (0, 1, 2) with its count.
    pub fn get(&self) -> [(u8, u64); 3] {
        [0, 1, 2].map(|qos| (qos, self.0[usize::from(qos)].get()))
    }

    pub fn sum(&self) -> u64 {
        self.0.iter().map(Counter::get).sum()
    }
}

/// Buckets of the latency histogram: bucket `i` counts durations under
/// 2^i µs (1 µs to ~8.4 s), and one more counts the slower ones.
pub const LATENCY_BUCKETS: usize = 24;

/// One core's buckets, their sum in nanoseconds last. 26 words: four
/// cache lines of their own per core.
#[derive(Debug)]
#[repr(align(64))]
struct HistogramSlot([AtomicU64; LATENCY_BUCKETS + 2]);

/// A latency histogram in powers of two of microseconds, per core like
/// [`Counter`].
#[derive(Debug)]
pub struct Histogram(Box<[HistogramSlot; SLOTS]>);

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram(Box::new(std::array::from_fn(|_| {
            HistogramSlot(std::array::from_fn(|_| AtomicU64::new(0)))
        })))
    }
}

/// What a [`Histogram`] holds, summed over the cores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramFigures {
    /// Counts per bucket, not cumulative; the last is over every bound.
    pub buckets: [u64; LATENCY_BUCKETS + 1],
    pub sum: Duration,
}

impl HistogramFigures {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// What was observed after `earlier`, a reading of the same histogram.
    pub fn since(&self, earlier: &HistogramFigures) -> HistogramFigures {
        HistogramFigures {
            buckets: std::array::from_fn(|i| self.buckets[i].saturating_sub(earlier.buckets[i])),
            sum: self.sum.saturating_sub(earlier.sum),
        }
    }

    /// The `q` quantile (0 to 1), or `None` when nothing was observed.
    ///
    /// Bucket `i` holds durations in [2^(i-1), 2^i) µs, so the answer is
    /// placed within its bucket by linear interpolation, as Prometheus's
    /// `histogram_quantile` does: exact to within the bucket's bounds, a
    /// factor of two. The last bucket has no upper bound; a quantile that
    /// falls in it is its lower bound, the slowest figure that is known.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * count as f64;
        let mut below = 0u64;
        for (bucket, &n) in self.buckets.iter().enumerate() {
            if n == 0 || ((below + n) as f64) < rank {
                below += n;
                continue;
            }
            let lower = if bucket == 0 { 0.0 } else { (1u64 << (bucket - 1)) as f64 };
            if bucket == LATENCY_BUCKETS {
                return Some(Duration::from_secs_f64(lower / 1e6));
            }
            let upper = (1u64 << bucket) as f64;
            let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
            return Some(Duration::from_secs_f64((lower + (upper - lower) * within) / 1e6));
        }
        unreachable!("the rank is at most the count")
    }
}

impl Histogram {
    pub fn observe(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let micros = nanos / 1000;
        // Under 2^i µs means i significant bits: 0 µs goes to bucket 0.
        let bucket = ((u64::BITS - micros.leading_zeros()) as usize).min(LATENCY_BUCKETS);
        let slot = &self.0[slot()].0;
        slot[bucket].fetch_add(1, Ordering::Relaxed);
        slot[LATENCY_BUCKETS + 1].fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn get(&self) -> HistogramFigures {
        let mut buckets = [0u64; LATENCY_BUCKETS + 1];
        let mut nanos = 0u64;
        for slot in self.0.iter() {
            for (bucket, count) in buckets.iter_mut().enumerate() {
                *count += slot.0[bucket].load(Ordering::Relaxed);
            }
            nanos = nanos.wrapping_add(slot.0[LATENCY_BUCKETS + 1].load(Ordering::Relaxed));
        }
        HistogramFigures { buckets, sum: Duration::from_nanos(nanos) }
    }
}

/// How a refused CONNECT tried to prove who it was, for
/// `authentication_failures`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    Password,
    Jwt,
    Certificate,
    /// No credentials a method could check, where anonymous clients are
    /// not allowed.
    Anonymous,
    /// An MQTT 5 enhanced authentication method (none is supported).
    Enhanced,
}

impl AuthMethod {
    pub const ALL: [AuthMethod; 5] = [
        AuthMethod::Password,
        AuthMethod::Jwt,
        AuthMethod::Certificate,
        AuthMethod::Anonymous,
        AuthMethod::Enhanced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::Password => "password",
            AuthMethod::Jwt => "jwt",
            AuthMethod::Certificate => "certificate",
            AuthMethod::Anonymous => "anonymous",
            AuthMethod::Enhanced => "enhanced",
        }
    }
}

impl From<Method> for AuthMethod {
    fn from(method: Method) -> AuthMethod {
        match method {
            Method::Password => AuthMethod::Password,
            Method::Jwt => AuthMethod::Jwt,
            Method::Certificate => AuthMethod::Certificate,
            Method::Anonymous => AuthMethod::Anonymous,
        }
    }
}

#[derive(Debug, Default)]
pub struct Stats {
    pub clients_connected: Counter,
    /// Of those, how many are idle and parked without a task (`park.rs`).
    pub clients_parked: Counter,
    pub connections_total: Counter,
    pub messages_received: Counter,
    pub messages_sent: Counter,
    pub bytes_received: Counter,
    pub bytes_sent: Counter,
    /// PUBLISH packets received, by their QoS.
    pub publishes_received: ByQos,
    /// PUBLISH packets sent (resent ones too), by the QoS delivered.
    pub publishes_sent: ByQos,
    /// Payload bytes of the PUBLISH packets received, by QoS.
    pub payload_bytes_received: ByQos,
    /// Payload bytes of the PUBLISH packets sent, by QoS.
    pub payload_bytes_sent: ByQos,
    /// From the receipt of a PUBLISH to the write of each of its
    /// deliveries into a subscriber's write buffer.
    pub delivery_latency: Histogram,
    /// Messages dropped because a session queue was full.
    pub dropped_queue_full: Counter,
    /// Messages not sent because they exceeded the client's maximum packet size.
    pub dropped_too_large: Counter,
    /// Messages whose expiry interval ran out before delivery.
    pub dropped_expired: Counter,
    /// Messages and changes the durable log failed to store (each refused).
    pub store_failures: Counter,
    /// Messages refused (0x97) because the durable log reached a disk limit.
    pub refused_disk_full: Counter,
    /// Messages refused (0x97) because a route endpoint that refuses when
    /// full (`when_full = "reject"`) holds its `max_bytes`, or because one
    /// that blocks (`"block"`) kept it waiting past its `block_timeout`.
    pub refused_endpoint_full: Counter,
    /// Publishes held back, unanswered, because an endpoint that blocks
    /// when full (`when_full = "block"`) held its `max_bytes`; counted once
    /// per hold, however long it lasts.
    pub held_endpoint_full: Counter,
    /// Connected clients' connections ended, by reason (as indexed by
    /// [`DISCONNECT_REASONS`]).
    pub disconnections: [Counter; DISCONNECT_REASONS.len()],
    /// CONNECTs refused for their credentials (or for failing too often).
    pub clients_refused: Counter,
    /// CONNECTs refused by authentication, by [`AuthMethod`] (as indexed
    /// by `AuthMethod::ALL`).
    pub authentication_failures: [Counter; 5],
    /// Sockets closed on accept: connection limits, rate or memory.
    pub connections_refused: Counter,
    pub tls_handshakes_failed: Counter,
    /// PUBLISH packets refused for a client's rate or bandwidth limit (v5
    /// QoS 1/2), or for the topic limits.
    pub publishes_limited: Counter,
    /// SUBSCRIBE filters refused for the topic limits, the wildcard depth
    /// or the subscriptions per client.
    pub subscriptions_refused: Counter,
    /// Times a 3.1.1 publisher was slowed by not reading its socket.
    pub publishers_throttled: Counter,
    /// PUBLISH, SUBSCRIBE and wills refused by the ACL.
    pub acl_denied: Counter,
    /// Slow consumers disconnected.
    pub slow_consumers_disconnected: Counter,
}

impl Stats {
    /// A PUBLISH written to a client (sent or resent), by the QoS
    /// delivered, with its payload.
    pub fn count_sent(&self, qos: QoS, payload_bytes: usize) {
        self.publishes_sent.at(qos).inc();
        self.payload_bytes_sent.at(qos).add(payload_bytes as u64);
    }

    pub fn authentication_failure(&self, method: AuthMethod) -> &Counter {
        &self.authentication_failures[method as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn figures(counts: &[(usize, u64)]) -> HistogramFigures {
        let mut buckets = [0u64; LATENCY_BUCKETS + 1];
        for &(bucket, n) in counts {
            buckets[bucket] = n;
        }
        HistogramFigures { buckets, sum: Duration::ZERO }
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_that_holds_the_rank() {
        assert_eq!(figures(&[]).quantile(0.5), None);
        // 100 in [256, 512) µs and 100 in [512, 1024) µs
        let two = figures(&[(9, 100), (10, 100)]);
        assert_eq!(two.quantile(0.5), Some(Duration::from_micros(512)));
        assert_eq!(two.quantile(0.25), Some(Duration::from_micros(384)));
        let p99 = two.quantile(0.99).unwrap().as_secs_f64() * 1e6;
        assert!((p99 - 1013.76).abs() < 1e-6, "{p99}");
        assert_eq!(two.quantile(1.0), Some(Duration::from_micros(1024)));
        // under 1 µs: bucket 0 spans [0, 1) µs
        assert_eq!(figures(&[(0, 4)]).quantile(0.5), Some(Duration::from_nanos(500)));
        // the open bucket answers its lower bound, 2^23 µs
        let slow = figures(&[(3, 1), (LATENCY_BUCKETS, 99)]);
        assert_eq!(slow.quantile(0.9), Some(Duration::from_micros(1 << 23)));
    }

    #[test]
    fn observations_land_in_the_bucket_whose_bounds_hold_them() {
        let histogram = Histogram::default();
        for micros in [0, 1, 3, 1000, 20_000_000] {
            histogram.observe(Duration::from_micros(micros));
        }
        let read = histogram.get();
        assert_eq!(read.count(), 5);
        assert_eq!(read.buckets[0], 1); // 0 µs
        assert_eq!(read.buckets[1], 1); // [1, 2) µs
        assert_eq!(read.buckets[2], 1); // [2, 4) µs
        assert_eq!(read.buckets[10], 1); // [512, 1024) µs
        assert_eq!(read.buckets[LATENCY_BUCKETS], 1); // over ~8.4 s
        let later = {
            histogram.observe(Duration::from_micros(3));
            histogram.get()
        };
        let window = later.since(&read);
        assert_eq!(window.count(), 1);
        assert_eq!(window.buckets[2], 1);
        assert_eq!(window.sum, Duration::from_micros(3));
    }

    #[test]
    fn a_counter_sums_the_slots_of_every_core_and_of_other_threads() {
        let counter = Arc::new(Counter::default());
        let threads: Vec<_> = (0..4)
            .map(|core| {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    set_core(core);
                    for _ in 0..10_000 {
                        counter.inc();
                    }
                    counter.add(5);
                    slot()
                })
            })
            .collect();
        let slots: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(slots, [1, 2, 3, 4], "each core writes its own slot");
        counter.inc(); // this thread is no core's: slot 0
        assert_eq!(counter.get(), 4 * 10_005 + 1);
        assert_eq!(counter.0[0].0.load(Ordering::Relaxed), 1);
        assert_eq!(counter.0[3].0.load(Ordering::Relaxed), 10_005);
    }

    #[test]
    fn a_gauge_raised_on_one_core_and_lowered_on_another_sums_right() {
        let gauge = Arc::new(Counter::default());
        let on_core = |core: usize, f: fn(&Counter)| {
            let gauge = gauge.clone();
            std::thread::spawn(move || {
                set_core(core);
                f(&gauge)
            })
            .join()
            .unwrap()
        };
        on_core(0, |g| g.add(3));
        on_core(1, |g| g.sub(2));
        assert_eq!(gauge.get(), 1);
        on_core(1, |g| g.sub(1));
        assert_eq!(gauge.get(), 0);
    }

    #[test]
    fn cores_past_the_slots_share_them_without_losing_counts() {
        let counter = Counter::default();
        std::thread::scope(|scope| {
            for core in [0, SLOTS - 1, 2 * (SLOTS - 1)] {
                let counter = &counter;
                scope.spawn(move || {
                    set_core(core);
                    for _ in 0..1_000 {
                        counter.inc();
                    }
                });
            }
        });
        assert_eq!(counter.get(), 3_000);
        assert_eq!(counter.0[1].0.load(Ordering::Relaxed), 3_000, "all three share slot 1");
    }

    #[test]
    fn slots_are_cache_lines_of_their_own() {
        assert_eq!(std::mem::align_of::<Padded<AtomicU64>>(), 64);
        assert_eq!(std::mem::size_of::<Padded<AtomicU64>>(), 64);
        assert_eq!(std::mem::size_of::<HistogramSlot>() % 64, 0);
    }

    #[test]
    fn the_histogram_puts_each_duration_under_its_power_of_two_and_sums_cores() {
        let histogram = Histogram::default();
        std::thread::scope(|scope| {
            for core in 0..2 {
                let histogram = &histogram;
                scope.spawn(move || {
                    set_core(core);
                    histogram.observe(Duration::from_nanos(500)); // 0 µs: bucket 0
                    histogram.observe(Duration::from_micros(1)); // under 2 µs
                    histogram.observe(Duration::from_micros(1000)); // under 1024 µs
                    histogram.observe(Duration::from_secs(60)); // over every bound
                });
            }
        });
        let figures = histogram.get();
        assert_eq!(figures.count(), 8);
        assert_eq!(figures.buckets[0], 2);
        assert_eq!(figures.buckets[1], 2);
        assert_eq!(figures.buckets[10], 2);
        assert_eq!(figures.buckets[LATENCY_BUCKETS], 2);
        assert_eq!(figures.sum, 2 * Duration::from_nanos(500 + 1_000 + 1_000_000 + 60_000_000_000));
    }

    #[test]
    fn qos_counters_are_apart() {
        let by_qos = ByQos::default();
        by_qos.at(QoS::AtLeastOnce).add(2);
        by_qos.at(QoS::ExactlyOnce).inc();
        assert_eq!(by_qos.get(), [(0, 0), (1, 2), (2, 1)]);
        assert_eq!(by_qos.sum(), 3);
    }
}
