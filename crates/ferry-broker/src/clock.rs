//! Wall-clock time as the broker records it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Wall-clock milliseconds since the Unix epoch: durable times must mean
/// the same after a restart, which `Instant`s do not.
pub(crate) fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// The wall-clock time of an `Instant` the broker already holds (when a
/// message arrived), without reading the clock: every stored message needs
/// one, and two clock reads for it were 7% of the durable path's extra CPU.
/// The wall clock may be stepped while the broker runs; [`WallClock::refresh`]
/// follows it, so a time stays as close to the wall clock as the last
/// refresh.
#[derive(Debug)]
pub(crate) struct WallClock {
    origin: Instant,
    /// Unix milliseconds at `origin`, as the wall clock said at the last
    /// refresh.
    unix_ms_at_origin: AtomicU64,
}

impl WallClock {
    pub(crate) fn new() -> WallClock {
        let clock = WallClock { origin: Instant::now(), unix_ms_at_origin: AtomicU64::new(0) };
        clock.refresh();
        clock
    }

    /// Reads the wall clock again.
    pub(crate) fn refresh(&self) {
        let since = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.unix_ms_at_origin.store(unix_ms().saturating_sub(since), Ordering::Relaxed);
    }

    /// Unix milliseconds at `at`.
    pub(crate) fn unix_ms_at(&self, at: Instant) -> u64 {
        let origin = self.unix_ms_at_origin.load(Ordering::Relaxed);
        let millis =
            |duration: std::time::Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        match at.checked_duration_since(self.origin) {
            Some(after) => origin.saturating_add(millis(after)),
            None => origin.saturating_sub(millis(self.origin.duration_since(at))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `mapped`, the clock's time of an instant between the wall-clock
    /// readings `before` and `after`, is right: never early, and late only
    /// by the time between `refresh`'s two clock reads (and rounding),
    /// which takes a stalled test to reach a second.
    fn assert_between(mapped: u64, before: u64, after: u64) {
        assert!(mapped + 1 >= before && mapped <= after + 1000, "{before} <= {mapped} <= {after}");
    }

    #[test]
    fn an_instant_maps_to_the_wall_clock_of_its_moment() {
        let before = unix_ms();
        let clock = WallClock::new();
        let now = Instant::now();
        assert_between(clock.unix_ms_at(now), before, unix_ms());
        // Each time is rounded down to its millisecond: a difference may be
        // one less than the instants'.
        let earlier = now - Duration::from_secs(90);
        assert!((clock.unix_ms_at(now) - clock.unix_ms_at(earlier)).abs_diff(90_000) <= 1);
        let later = now + Duration::from_millis(1500);
        assert!((clock.unix_ms_at(later) - clock.unix_ms_at(now)).abs_diff(1500) <= 1);
    }

    #[test]
    fn a_refresh_follows_a_stepped_wall_clock() {
        let clock = WallClock::new();
        clock.unix_ms_at_origin.fetch_sub(60_000, Ordering::Relaxed);
        let before = unix_ms();
        let now = Instant::now();
        assert!(before - clock.unix_ms_at(now) >= 59_000);
        clock.refresh();
        assert_between(clock.unix_ms_at(now), before, unix_ms());
    }
}
