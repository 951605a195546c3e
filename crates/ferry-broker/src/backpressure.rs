//! Back-pressure from subscribers to publishers.
//!
//! A publisher's connection can decode thousands of small PUBLISH packets
//! from one read, faster than a subscriber's connection can write them out.
//! Dropping the surplus at the subscriber's queue bound would lose messages
//! that a slower broker delivers; growing the queue would be an unbounded
//! buffer. Instead, when a publish leaves an online subscriber's queue at
//! its high watermark, the publisher stops decoding and reading (TCP then
//! slows the client down) until that queue drains to the low watermark.
//!
//! Waiting publishers take turns. When the queue drains to the low
//! watermark, the publishers that waited longest are released first, only
//! as many as the room to the high watermark allows at [`TURN`] messages
//! each; a released publisher that still finds the queue above the low
//! watermark after its turn waits again, at the back. Releasing all of them
//! at once let the first to run refill the queue on its own, every round:
//! with 100 closed-loop publishers into one subscriber, they finished one
//! after another from 0.06 s to 1.6 s, and p99 latency was 148 ms against
//! 10 ms with 10 publishers.
//!
//! A subscriber that does not drain at all must not stall publishers for
//! ever: after `MAX_WAIT` the publisher gives up, the subscriber is marked
//! stalled (nobody waits for it again until it drains), and its queue bound
//! and overflow policy apply as usual.

use crate::held::HeldPublish;
use crate::session::Session;
use std::sync::Arc;
use std::time::Duration;

/// Longest a publisher waits for one congested subscriber.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

/// Queue length at which publishers start waiting: half of the online
/// queue (`BrokerConfig::online_queue`), so the messages already decoded
/// from the publisher's last read still fit.
pub(crate) fn high_watermark(online_queue: usize) -> usize {
    (online_queue / 2).max(1)
}

/// Queue length at which waiting publishers resume.
pub(crate) fn low_watermark(online_queue: usize) -> usize {
    high_watermark(online_queue) / 2
}

/// Messages a released publisher may add before it yields to the next
/// waiter, if the queue is still above the low watermark: enough to
/// amortise the wake-up over a read's worth of packets, few enough that a
/// hundred publishers each get a turn within a few drains.
pub const TURN: u32 = 32;

/// How many waiters one drain to the low watermark releases: the room up to
/// the high watermark, in turns.
pub(crate) fn turns_per_release(online_queue: usize) -> usize {
    ((high_watermark(online_queue) - low_watermark(online_queue)) / TURN as usize).max(1)
}

/// Where a publisher stands with back-pressure.
#[derive(Default)]
pub(crate) enum Pace {
    /// Not held back.
    #[default]
    Free,
    /// Input paused until `target` releases it, since the time in the
    /// session's `Liveness` (where the keep-alive sweeper reads it too).
    Blocked { target: Arc<Session> },
    /// Released by `target`, with `left` messages to go before it checks
    /// whether to yield to the next waiter.
    Turn { target: Arc<Session>, left: u32 },
    /// Input paused while a publish waits for room at a full endpoint.
    Held(Box<HeldPublish>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: u64) -> Arc<Session> {
        Arc::new(Session::new(id, format!("c{id}").into(), 0))
    }

    #[test]
    fn a_drain_releases_the_longest_waiting_first_and_only_so_many() {
        let subscriber = session(0);
        let publishers: Vec<_> = (1..=5).map(session).collect();
        let mut state = subscriber.lock();
        for p in &publishers {
            state.add_waiter(p);
        }
        state.add_waiter(&publishers[0]);
        assert_eq!(state.waiting().len(), 5, "a publisher waits in line once");

        state.release_turns(2);
        assert_eq!(state.waiting(), [3, 4, 5]);
        assert!(!state.is_waiting(1) && !state.is_waiting(2) && state.is_waiting(3));

        // A released publisher whose turn is over goes to the back.
        state.add_waiter(&publishers[0]);
        state.release_turns(1);
        assert_eq!(state.waiting(), [4, 5, 1]);

        state.release_turns(10);
        assert!(state.waiting().is_empty(), "more turns than waiters releases them all");
    }

    #[test]
    fn turns_fit_between_the_watermarks() {
        // 1,000: high 500, low 250, so 250 messages of room: 7 turns of 32.
        assert_eq!(turns_per_release(1_000), 7);
        assert_eq!(turns_per_release(100), 1, "at least one turn");
        assert_eq!(turns_per_release(1), 1);
    }
}
