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
//! wakes publishers that waited too long for a congested subscriber.

use crate::backpressure;
use crate::broker::Broker;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the sweeper runs: a silent client is cut off between 1.5×
/// and 1.5× + this after its last packet.
pub const SWEEP_PERIOD: Duration = Duration::from_millis(250);

/// A connection's keep-alive state, kept in its session so the sweeper can
/// reach it without a registry of its own. Times are milliseconds on the
/// broker's clock (`Broker::now_ms`).
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    last_read_ms: AtomicU64,
    /// 1.5 × keep-alive (at most ~98 million ms); 0 when the connection has
    /// no keep-alive. 32 bits, like `credentials_end_secs`, to keep a
    /// session's size: every idle connection pays for these fields.
    timeout_ms: AtomicU32,
    expired: AtomicBool,
    /// When the connection paused its input for back-pressure; 0 when it
    /// has not. The sweeper wakes it when `backpressure::MAX_WAIT` is up.
    blocked_since_ms: AtomicU64,
    /// When the client's credentials expire, in whole seconds on the
    /// broker's clock (rounded up); 0 when they do not.
    credentials_end_secs: AtomicU32,
    credentials_expired: AtomicBool,
}

impl Liveness {
    /// Starts watching a newly attached connection, whose credentials
    /// expire at `credentials_end_ms` if they do.
    pub(crate) fn arm(
        &self,
        now_ms: u64,
        timeout: Option<Duration>,
        credentials_end_ms: Option<u64>,
    ) {
        self.last_read_ms.store(now_ms, Ordering::Relaxed);
        let timeout_ms =
            timeout.map_or(0, |timeout| u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX));
        self.timeout_ms.store(timeout_ms, Ordering::Relaxed);
        self.expired.store(false, Ordering::Release);
        // At least 1, so that credentials that end at once still count.
        let end_secs = credentials_end_ms
            .map_or(0, |end| u32::try_from(end.div_ceil(1000)).unwrap_or(u32::MAX).max(1));
        self.credentials_end_secs.store(end_secs, Ordering::Relaxed);
        self.credentials_expired.store(false, Ordering::Release);
    }

    pub(crate) fn touch(&self, now_ms: u64) {
        self.last_read_ms.store(now_ms, Ordering::Relaxed);
    }

    pub(crate) fn set_blocked_since(&self, since_ms: u64) {
        self.blocked_since_ms.store(since_ms, Ordering::Relaxed);
    }

    /// True if the connection has waited for a congested subscriber longer
    /// than back-pressure allows.
    fn waited_too_long(&self, now_ms: u64) -> bool {
        let since_ms = self.blocked_since_ms.load(Ordering::Relaxed);
        since_ms != 0
            && now_ms.saturating_sub(since_ms) >= backpressure::MAX_WAIT.as_millis() as u64
    }

    pub(crate) fn is_expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }

    pub(crate) fn credentials_expired(&self) -> bool {
        self.credentials_expired.load(Ordering::Acquire)
    }

    /// Marks the credentials expired if their time is up; true if they
    /// just were.
    fn expire_credentials(&self, now_ms: u64) -> bool {
        let end_ms = u64::from(self.credentials_end_secs.load(Ordering::Relaxed)) * 1000;
        if end_ms == 0 || now_ms < end_ms || self.credentials_expired() {
            return false;
        }
        self.credentials_expired.store(true, Ordering::Release);
        true
    }

    /// Marks the connection expired if its time is up; true if it just was.
    fn expire_if_silent(&self, now_ms: u64) -> bool {
        let timeout_ms = u64::from(self.timeout_ms.load(Ordering::Relaxed));
        if timeout_ms == 0 || self.is_expired() {
            return false;
        }
        let silent_ms = now_ms.saturating_sub(self.last_read_ms.load(Ordering::Relaxed));
        if silent_ms < timeout_ms {
            return false;
        }
        self.expired.store(true, Ordering::Release);
        true
    }
}

/// Runs the sweeper until the broker shuts down.
pub async fn run(broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    let mut ticker = tokio::time::interval(SWEEP_PERIOD);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = ticker.tick() => {}
        }
        let now_ms = broker.now_ms();
        broker.for_each_online_session(|session| {
            let liveness = &session.liveness;
            if liveness.expire_if_silent(now_ms)
                || liveness.expire_credentials(now_ms)
                || liveness.waited_too_long(now_ms)
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
