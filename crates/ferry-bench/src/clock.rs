//! One monotonic clock for the whole process.
//!
//! Latency is the subscriber's receive time (or, for an acknowledgement,
//! the publisher's) minus the send time written in the payload by the
//! publisher. Both run in this process, so a single
//! `Instant` base makes the two readings comparable without trusting the
//! wall clock, which may step while a run is under way.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

static BASE: OnceLock<Instant> = OnceLock::new();

/// The base every timestamp counts from; fixed by the first call.
pub fn base() -> Instant {
    *BASE.get_or_init(Instant::now)
}

/// Nanoseconds since [`base`].
pub fn now_ns() -> u64 {
    // u64 nanoseconds last 584 years: the truncation never happens.
    base().elapsed().as_nanos() as u64
}

/// The `Instant` of a timestamp returned by [`now_ns`], for timers.
pub fn instant_of(ns: u64) -> Instant {
    base() + Duration::from_nanos(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_instants() {
        let t = now_ns();
        let later = now_ns();
        assert!(later >= t);
        assert_eq!(instant_of(t).duration_since(base()).as_nanos() as u64, t);
    }
}
