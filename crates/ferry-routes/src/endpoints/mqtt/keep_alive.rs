//! Keep-alive as the client side of a connection keeps it: when to send
//! PINGREQ, and when the remote counts as gone.
//!
//! MQTT asks a client to send something at least every keep-alive. We
//! also ping when we have not *heard* from the remote for that long: a
//! sink streaming QoS 0 writes all the time and reads nothing, and
//! without a ping it could not tell a live remote from a dead one. The
//! reader gives up after twice the keep-alive without a byte.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When the reader last read from the socket, shared with the writer: one
/// relaxed store per read system call, not per packet.
#[derive(Debug, Clone)]
pub(crate) struct LastHeard {
    started: Instant,
    /// Milliseconds after `started`.
    at_ms: Arc<AtomicU64>,
}

impl LastHeard {
    /// Starts as heard now: the connection was just acknowledged.
    pub(crate) fn new() -> LastHeard {
        LastHeard { started: Instant::now(), at_ms: Arc::new(AtomicU64::new(0)) }
    }

    pub(crate) fn heard(&self) {
        let elapsed_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.at_ms.store(elapsed_ms, Ordering::Relaxed);
    }

    pub(crate) fn at(&self) -> Instant {
        self.started + Duration::from_millis(self.at_ms.load(Ordering::Relaxed))
    }
}

/// When the next PINGREQ is due: `every` after the line went quiet in
/// either direction, but never sooner than `every` after the last ping,
/// so a remote that does not answer is not flooded with pings while the
/// reader waits out its silence limit.
pub(crate) fn ping_due(
    every: Duration,
    last_write: Instant,
    last_heard: Instant,
    last_ping: Option<Instant>,
) -> Instant {
    let quiet_since = last_write.min(last_heard);
    let due = quiet_since + every;
    match last_ping {
        Some(pinged) => due.max(pinged + every),
        None => due,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_when_either_direction_is_quiet_but_not_in_a_storm() {
        let every = Duration::from_secs(30);
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        assert_eq!(ping_due(every, at(10), at(20), None), at(40), "quiet writes");
        assert_eq!(ping_due(every, at(20), at(10), None), at(40), "quiet reads");
        // Pinged at 40, nothing heard since 10: the next ping waits.
        assert_eq!(ping_due(every, at(40), at(10), Some(at(40))), at(70));
        // Heard the answer at 41: next due 30 s after the ping (the write).
        assert_eq!(ping_due(every, at(40), at(41), Some(at(40))), at(70));
    }
}
