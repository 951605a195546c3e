//! Keep-alive (§3.1.2.10): a client silent for 1.5 times its keep-alive is
//! disconnected with 0x8D and its will is published. A client whose
//! credentials expire (a JWT's `exp`) is disconnected with 0xA0, Maximum
//! connect time, by the same sweeper.
//!
//! One sweeper for the whole broker instead of a timer per connection: a
//! tokio timer costs each connection 112 bytes held for its whole life,
//! which at 100k idle connections is 11 MB for a check that needs to run
//! only a few times a second. Connections record when they last read, the
//! sweeper compares, and wakes the connections it has expired. It also
//! wakes publishers that waited too long for a congested subscriber, and
//! asks connections silent for `PARK_AFTER` to park (`park.rs`).

use crate::backpressure;
use crate::broker::Broker;
use crate::liveness::Liveness;
use std::sync::Arc;
use std::time::Duration;

/// How often the sweeper runs: a silent client is cut off between 1.5×
/// and 1.5× + this after its last packet.
pub const SWEEP_PERIOD: Duration = Duration::from_millis(250);

/// How long a connection reads nothing before it is asked to park. Short,
/// because parking and resuming cost about a task's allocation and no
/// system call, so a device that publishes every few seconds gains from
/// it; long enough that a client waiting on an answer, or publishing many
/// times a second, keeps its task.
pub const PARK_AFTER: Duration = Duration::from_secs(1);

/// True if the connection has waited for a congested subscriber longer
/// than back-pressure allows.
fn waited_too_long(liveness: &Liveness, now_ms: u64) -> bool {
    let since_ms = liveness.blocked_since_ms();
    since_ms != 0 && now_ms.saturating_sub(since_ms) >= backpressure::MAX_WAIT.as_millis() as u64
}

/// Runs the sweeper until the broker shuts down.
pub async fn run(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    let mut ticker = tokio::time::interval(SWEEP_PERIOD);
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|&stopping| stopping) => return,
            _ = ticker.tick() => {}
        }
        let now_ms = broker.now_ms();
        broker.for_each_online_session(|session| {
            let liveness = &session.liveness;
            if liveness.expire_if_silent(now_ms)
                || liveness.expire_credentials(now_ms)
                || waited_too_long(liveness, now_ms)
                || liveness.ask_to_park(now_ms, PARK_AFTER.as_millis() as u64)
            {
                session.wake.notify_one();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_expire_once_their_second_is_up() {
        let liveness = Liveness::default();
        liveness.arm(1_000, None, Some(2_500));
        assert!(!liveness.expire_credentials(2_999), "rounded up to the next whole second");
        assert!(!liveness.credentials_expired());
        assert!(liveness.expire_credentials(3_000));
        assert!(liveness.credentials_expired());
        assert!(!liveness.expire_credentials(4_000), "reported once");
        assert!(!liveness.is_expired(), "keep-alive is another matter");
        // A new connection with credentials that do not expire.
        liveness.arm(5_000, Some(Duration::from_secs(90)), None);
        assert!(!liveness.expire_credentials(u64::MAX));
        assert!(!liveness.credentials_expired());
    }

    #[test]
    fn credentials_that_end_at_once_still_expire() {
        let liveness = Liveness::default();
        liveness.arm(0, None, Some(0));
        assert!(liveness.expire_credentials(1_000));
    }
}
