//! A token bucket: the shape of every rate limit in the broker (new
//! connections, a client's messages and bytes). It allows bursts up to its
//! size and, beyond them, the configured rate on average.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    /// Tokens added per second; 0 means unlimited.
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilled at `rate` per second.
    pub(crate) fn new(rate: f64, burst: f64, now: Instant) -> TokenBucket {
        TokenBucket { rate, burst, tokens: burst, at: now }
    }

    pub(crate) fn is_unlimited(&self) -> bool {
        self.rate == 0.0
    }

    /// Takes `amount` tokens if the bucket has them.
    pub(crate) fn try_take(&mut self, amount: f64, now: Instant) -> bool {
        if self.is_unlimited() {
            return true;
        }
        self.refill(now);
        if self.tokens < amount {
            return false;
        }
        self.tokens -= amount;
        true
    }

    /// Takes `amount` tokens even if that leaves the bucket in debt, and
    /// says how long until it is out of debt: how long a throttled client
    /// should wait before sending more.
    pub(crate) fn take(&mut self, amount: f64, now: Instant) -> Duration {
        if self.is_unlimited() {
            return Duration::ZERO;
        }
        self.refill(now);
        self.tokens -= amount;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_burst_then_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 5.0, start);
        assert!((0..5).all(|_| bucket.try_take(1.0, start)));
        assert!(!bucket.try_take(1.0, start));
        assert!(bucket.try_take(1.0, start + Duration::from_millis(100)));
        assert!(!bucket.try_take(1.0, start + Duration::from_millis(100)));
        // Refilling stops at the burst, however long it waited.
        let later = start + Duration::from_secs(60);
        assert!((0..5).all(|_| bucket.try_take(1.0, later)));
        assert!(!bucket.try_take(1.0, later));
    }

    #[test]
    fn debt_is_paid_back_at_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(100.0, 10.0, start);
        assert_eq!(bucket.take(10.0, start), Duration::ZERO);
        let wait = bucket.take(50.0, start);
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(bucket.take(0.0, start + wait), Duration::ZERO);
    }

    #[test]
    fn zero_rate_is_unlimited() {
        let now = Instant::now();
        let mut bucket = TokenBucket::new(0.0, 0.0, now);
        assert!(bucket.try_take(1e12, now));
        assert_eq!(bucket.take(1e12, now), Duration::ZERO);
    }
}
