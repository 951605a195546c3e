//! Latency as an HDR histogram, and the percentiles reported: end to end
//! at the subscribers, and from send to acknowledgement at the publishers.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::{Arc, Mutex, PoisonError};

/// Latencies in nanoseconds with 3 significant digits: 0.1% resolution at
/// every scale, from microseconds on loopback to the seconds a saturated
/// broker reaches, in a few tens of kilobytes.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

/// One point of a latency distribution: `percentile` percent of the
/// messages took at most `latency_us`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CdfPoint {
    pub percentile: f64,
    pub latency_us: f64,
}

/// Steps per decade of the tail in [`Latency::cdf`]: p90, p99, p99.9 … are
/// decades, and the tail is where latency distributions differ.
const CDF_STEPS_PER_DECADE: u32 = 10;

/// Decades of tail [`Latency::cdf`] goes down to: p99.9999.
const CDF_DECADES: u32 = 6;

/// The reported percentiles, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Number of latencies recorded.
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p75_us: f64,
    pub p90_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    /// An empty histogram.
    pub fn new() -> Latency {
        // Auto-resizing from a small range: 3 significant digits is always valid.
        let mut histogram = Histogram::new(3).unwrap_or_else(|_| unreachable!("sigfig 3 is valid"));
        histogram.auto(true);
        Latency(histogram)
    }

    /// Records one latency. Zero is recorded as 1 ns: the clock cannot
    /// resolve less, and HDR histograms start at 1.
    pub fn record_ns(&mut self, ns: u64) {
        // With auto-resize on, recording only fails past u64::MAX / 2 ns.
        let _ = self.0.record(ns.max(1));
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Latency) {
        // Both auto-resize, so adding cannot go out of range.
        let _ = self.0.add(&other.0);
    }

    /// Number of latencies recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The distribution as points evenly spaced on a log scale of
    /// 1 / (1 − p) — the usual HDR percentile plot, which spreads the tail
    /// out — from the minimum (p0) to the maximum (p100), stopping early
    /// when the samples run out. Empty when nothing was recorded.
    pub fn cdf(&self) -> Vec<CdfPoint> {
        if self.0.is_empty() {
            return Vec::new();
        }
        let us = |ns: u64| ns as f64 / 1_000.0;
        let mut points = vec![CdfPoint { percentile: 0.0, latency_us: us(self.0.min()) }];
        let finest = 1.0 - 1.0 / self.0.len() as f64;
        for step in 1..=CDF_STEPS_PER_DECADE * CDF_DECADES {
            let quantile = 1.0 - 10f64.powf(-f64::from(step) / f64::from(CDF_STEPS_PER_DECADE));
            if quantile > finest {
                break;
            }
            let latency_us = us(self.0.value_at_quantile(quantile));
            points.push(CdfPoint { percentile: quantile * 100.0, latency_us });
        }
        points.push(CdfPoint { percentile: 100.0, latency_us: us(self.0.max()) });
        points
    }

    /// Percentiles in microseconds; all zero when nothing was recorded.
    pub fn summary(&self) -> LatencySummary {
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1_000.0;
        let q = |quantile: f64| us(self.0.value_at_quantile(quantile));
        LatencySummary {
            count: self.0.len(),
            min_us: us(self.0.min()),
            mean_us: self.0.mean() / 1_000.0,
            p50_us: q(0.50),
            p75_us: q(0.75),
            p90_us: q(0.90),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            max_us: us(self.0.max()),
        }
    }
}

/// Latencies recorded per [`LatencyRecorder`] before they are added to the
/// shared histogram under its lock: one lock per this many messages.
const RECORDER_BUFFER: usize = 256;

/// A latency histogram of a run, shared by all its subscribers (or, for
/// acknowledgements, by all its publishers).
///
/// Why shared: an HDR histogram that covers 1 ns to 100 ms is ~140 KB, and
/// one per subscriber meant a thousand subscribers allocating and zeroing
/// 140 MB within the first milliseconds of a run — a stall of the load
/// generator that showed up as 100 ms of latency in every broker's tail.
#[derive(Debug, Default)]
pub struct SharedLatency(Mutex<Latency>);

impl SharedLatency {
    /// An empty histogram to share.
    pub fn new() -> Arc<SharedLatency> {
        Arc::new(SharedLatency::default())
    }

    /// A recorder that adds to this histogram.
    pub fn recorder(self: &Arc<SharedLatency>) -> LatencyRecorder {
        LatencyRecorder { shared: Arc::clone(self), buffer: Vec::with_capacity(RECORDER_BUFFER) }
    }

    /// What has been recorded and flushed so far.
    pub fn snapshot(&self) -> Latency {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Latency> {
        // A recorder that panicked mid-add leaves at worst a few counts
        // missing, never a broken histogram: keep using it.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One subscriber's or publisher's way into a [`SharedLatency`]: buffers
/// latencies and adds them in batches, and whatever is left when it is
/// dropped.
#[derive(Debug)]
pub struct LatencyRecorder {
    shared: Arc<SharedLatency>,
    buffer: Vec<u64>,
}

impl LatencyRecorder {
    /// Records one latency.
    pub fn record_ns(&mut self, ns: u64) {
        self.buffer.push(ns);
        if self.buffer.len() == RECORDER_BUFFER {
            self.flush();
        }
    }

    /// Adds the buffered latencies to the shared histogram.
    pub fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let mut histogram = self.shared.lock();
        for &ns in &self.buffer {
            histogram.record_ns(ns);
        }
        drop(histogram);
        self.buffer.clear();
    }
}

impl Drop for LatencyRecorder {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within the histogram's 3-significant-digit resolution.
    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= expected * 0.001 + 0.001
    }

    #[test]
    fn percentiles_of_a_uniform_distribution() {
        let mut h = Latency::new();
        for us in 1..=10_000u64 {
            h.record_ns(us * 1_000);
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        for (got, want) in [
            (s.min_us, 1.0),
            (s.p50_us, 5_000.0),
            (s.p75_us, 7_500.0),
            (s.p90_us, 9_000.0),
            (s.p95_us, 9_500.0),
            (s.p99_us, 9_900.0),
            (s.p99_9_us, 9_990.0),
            (s.max_us, 10_000.0),
            (s.mean_us, 5_000.5),
        ] {
            assert!(close(got, want), "got {got}, want {want}");
        }
    }

    #[test]
    fn one_slow_message_in_a_thousand_shows_at_p99_9_only() {
        let mut h = Latency::new();
        for _ in 0..999 {
            h.record_ns(100_000);
        }
        h.record_ns(2_000_000_000);
        let s = h.summary();
        assert!(close(s.p99_us, 100.0));
        assert!(close(s.p99_9_us, 100.0), "999 of 1000 are at 100 µs: {}", s.p99_9_us);
        assert!(close(s.max_us, 2_000_000.0));
    }

    #[test]
    fn cdf_spans_min_to_max_and_stops_where_samples_run_out() {
        assert!(Latency::new().cdf().is_empty());
        let mut h = Latency::new();
        for us in 1..=1_000u64 {
            h.record_ns(us * 1_000);
        }
        let cdf = h.cdf();
        let first = cdf.first().unwrap();
        let last = cdf.last().unwrap();
        assert_eq!((first.percentile, last.percentile), (0.0, 100.0));
        assert!(close(first.latency_us, 1.0) && close(last.latency_us, 1_000.0));
        // 1,000 samples resolve p99.9 and no finer: three decades of tail.
        assert_eq!(cdf.len(), 2 + 3 * CDF_STEPS_PER_DECADE as usize);
        assert!(cdf.windows(2).all(|w| w[0].percentile < w[1].percentile));
        assert!(cdf.windows(2).all(|w| w[0].latency_us <= w[1].latency_us));
        let p90 = cdf.iter().find(|p| (p.percentile - 90.0).abs() < 1e-9).unwrap();
        assert!(close(p90.latency_us, 900.0), "{p90:?}");
    }

    #[test]
    fn recorders_add_everything_to_the_shared_histogram() {
        let shared = SharedLatency::new();
        let mut a = shared.recorder();
        let mut b = shared.recorder();
        for i in 0..(RECORDER_BUFFER as u64 + 10) {
            a.record_ns(1_000 + i);
        }
        b.record_ns(7_000_000);
        assert_eq!(shared.snapshot().len(), RECORDER_BUFFER as u64, "one full batch so far");
        drop(a);
        b.flush();
        let s = shared.snapshot().summary();
        assert_eq!(s.count, RECORDER_BUFFER as u64 + 11);
        assert!(close(s.max_us, 7_000.0), "{s:?}");
    }

    #[test]
    fn merge_adds_counts_and_empty_summary_is_zero() {
        let mut a = Latency::new();
        let mut b = Latency::new();
        assert_eq!(a.summary(), LatencySummary::default());
        a.record_ns(0);
        b.record_ns(5_000);
        b.record_ns(5_000);
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 3);
        assert!(close(s.min_us, 0.001));
        assert!(close(s.max_us, 5.0));
    }
}
