//! What the keep-alive sweeper (`keep_alive.rs`) reads of a connection:
//! when it last read, how long it may be silent, when its credentials end,
//! and since when it has waited for a congested subscriber. Kept in the
//! connection's session, in atomics, so the sweeper reaches every
//! connection without a registry or a lock of its own.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

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
    /// has not. The sweeper (`keep_alive.rs`) wakes it when
    /// `backpressure::MAX_WAIT` is up.
    blocked_since_ms: AtomicU64,
    /// When the client's credentials expire, in whole seconds on the
    /// broker's clock (rounded up); 0 when they do not.
    credentials_end_secs: AtomicU32,
    credentials_expired: AtomicBool,
    /// Set by the sweeper when the connection has been silent long enough
    /// to park (`park.rs`), and by the connection when it parks; cleared by
    /// the connection when it declines, and when it runs again after
    /// parking. While it is set the sweeper does not ask.
    park_asked: AtomicBool,
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

    /// When the connection paused its input for back-pressure; 0 when it
    /// has not.
    pub(crate) fn blocked_since_ms(&self) -> u64 {
        self.blocked_since_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn is_expired(&self) -> bool {
        self.expired.load(Ordering::Acquire)
    }

    pub(crate) fn credentials_expired(&self) -> bool {
        self.credentials_expired.load(Ordering::Acquire)
    }

    /// Marks the credentials expired if their time is up; true if they
    /// just were.
    pub(crate) fn expire_credentials(&self, now_ms: u64) -> bool {
        let end_ms = u64::from(self.credentials_end_secs.load(Ordering::Relaxed)) * 1000;
        if end_ms == 0 || now_ms < end_ms || self.credentials_expired() {
            return false;
        }
        self.credentials_expired.store(true, Ordering::Release);
        true
    }

    /// Asks the connection to park if it has read nothing for `after_ms`
    /// and was not asked already; true if it just was.
    pub(crate) fn ask_to_park(&self, now_ms: u64, after_ms: u64) -> bool {
        let silent_ms = now_ms.saturating_sub(self.last_read_ms.load(Ordering::Relaxed));
        // A load first: a parked connection is found asked at every sweep.
        silent_ms >= after_ms
            && !self.is_park_asked()
            && !self.park_asked.swap(true, Ordering::Relaxed)
    }

    pub(crate) fn is_park_asked(&self) -> bool {
        self.park_asked.load(Ordering::Relaxed)
    }

    /// The connection parked: nothing to ask it.
    pub(crate) fn parked(&self) {
        self.park_asked.store(true, Ordering::Relaxed);
    }

    /// The connection declined to park, or runs again: ask it again once it
    /// has been silent long enough.
    pub(crate) fn forget_park(&self) {
        self.park_asked.store(false, Ordering::Relaxed);
    }

    /// Marks the connection expired if its time is up; true if it just was.
    pub(crate) fn expire_if_silent(&self, now_ms: u64) -> bool {
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
