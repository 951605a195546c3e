//! Log lines for shed load, at a bounded rate: a flood of refused
//! connections or throttled publishes must not become a flood of log
//! lines, which would cost more than the load itself. Each kind of event
//! logs at most once per `INTERVAL`, saying how many were not logged since.

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub(crate) struct ShedLog {
    connections: Mutex<Limiter>,
    publishers: Mutex<Limiter>,
    consumers: Mutex<Limiter>,
    refusals: Mutex<Limiter>,
}

#[derive(Debug, Default)]
struct Limiter {
    last: Option<Instant>,
    suppressed: u64,
}

impl Limiter {
    /// Whether to log now, and how many were held back before this one.
    fn admit(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < INTERVAL) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

impl ShedLog {
    pub(crate) fn connection_refused(&self, listener: &str, peer: SocketAddr, limit: &str) {
        if let Some(suppressed) = self.connections.lock().admit() {
            tracing::warn!(%listener, %peer, suppressed, "connection refused: {limit} reached");
        }
    }

    pub(crate) fn publisher_limited(&self, client_id: &str, what: &str) {
        if let Some(suppressed) = self.publishers.lock().admit() {
            tracing::warn!(client_id, suppressed, "publisher limited: {what}");
        }
    }

    /// A PUBLISH, SUBSCRIBE or will refused by the ACL or a limit.
    pub(crate) fn refused(&self, client_id: &str, what: &str, topic: &str) {
        if let Some(suppressed) = self.refusals.lock().admit() {
            tracing::warn!(client_id, topic, suppressed, "refused: {what}");
        }
    }

    pub(crate) fn consumer_cut_off(&self, client_id: &str, what: &str) {
        if let Some(suppressed) = self.consumers.lock().admit() {
            tracing::warn!(client_id, suppressed, "slow consumer: {what}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_once_per_interval_and_counts_the_rest() {
        let mut limiter = Limiter::default();
        assert_eq!(limiter.admit(), Some(0));
        assert_eq!(limiter.admit(), None);
        assert_eq!(limiter.admit(), None);
        limiter.last = Some(Instant::now() - INTERVAL);
        assert_eq!(limiter.admit(), Some(2));
    }
}
