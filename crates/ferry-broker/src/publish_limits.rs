//! A client's publish limits: messages and bytes per second, as token
//! buckets, and the pause that slows a client down when it is over them or
//! when the broker is short of memory.
//!
//! MQTT 5 can tell a client its QoS 1/2 message is over a limit (0x97
//! Quota exceeded in PUBACK/PUBREC), so such a message is refused and the
//! client knows it. A 3.1.1 client has no such code, and a QoS 0 message
//! no acknowledgement: the message is taken, and the connection stops
//! reading until the client is back within its limit, which TCP turns into
//! the client being slowed.

use crate::config::BrokerConfig;
use crate::token_bucket::TokenBucket;
use std::time::{Duration, Instant};

/// How long a publisher is paused while resident memory is over the
/// watermark: long enough for subscribers to drain, short enough that a
/// publisher resumes soon after memory is back.
pub(crate) const MEMORY_PAUSE: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(crate) struct PublishLimits {
    messages: TokenBucket,
    bytes: TokenBucket,
    paused_until: Option<Instant>,
}

/// Which limit a message is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Over {
    Rate,
    Bandwidth,
}

impl PublishLimits {
    /// The limits the configuration sets; `None` when it sets none, so
    /// that clients of an unlimited broker carry nothing.
    pub(crate) fn from_config(config: &BrokerConfig, now: Instant) -> Option<PublishLimits> {
        let limits = PublishLimits::new(config, now);
        (!limits.messages.is_unlimited() || !limits.bytes.is_unlimited()).then_some(limits)
    }

    pub(crate) fn new(config: &BrokerConfig, now: Instant) -> PublishLimits {
        let rate = f64::from(config.max_publish_rate);
        let bandwidth = config.max_publish_bytes_rate as f64;
        PublishLimits {
            // One second's worth may come at once.
            messages: TokenBucket::new(rate, rate, now),
            bytes: TokenBucket::new(bandwidth, bandwidth, now),
            paused_until: None,
        }
    }

    /// For a v5 client's QoS 1/2 message: takes the message's share of both limits, or
    /// says which it is over and takes nothing.
    pub(crate) fn admit(&mut self, bytes: usize, now: Instant) -> Option<Over> {
        if !self.messages.try_take(1.0, now) {
            return Some(Over::Rate);
        }
        if !self.bytes.try_take(bytes as f64, now) {
            // Give the message token back: the message was not taken.
            self.messages.take(-1.0, now);
            return Some(Over::Bandwidth);
        }
        None
    }

    /// For a 3.1.1 client, or a QoS 0 message: takes the message's share even beyond the
    /// limits, and pauses the client until it is back within them.
    /// Returns whether it is now paused.
    pub(crate) fn charge(&mut self, bytes: usize, now: Instant) -> bool {
        let wait = self.messages.take(1.0, now).max(self.bytes.take(bytes as f64, now));
        if wait.is_zero() {
            return false;
        }
        self.pause_until(now + wait);
        true
    }

    pub(crate) fn pause_until(&mut self, until: Instant) {
        self.paused_until = Some(self.paused_until.map_or(until, |paused| paused.max(until)));
    }

    /// When input may resume, if the client is paused now.
    pub(crate) fn paused_until(&mut self, now: Instant) -> Option<Instant> {
        if self.paused_until.is_some_and(|until| until <= now) {
            self.paused_until = None;
        }
        self.paused_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(rate: u32, bandwidth: u64) -> BrokerConfig {
        BrokerConfig {
            max_publish_rate: rate,
            max_publish_bytes_rate: bandwidth,
            ..BrokerConfig::default()
        }
    }

    #[test]
    fn no_limits_configured_means_nothing_carried() {
        assert!(PublishLimits::from_config(&config(0, 0), Instant::now()).is_none());
        assert!(PublishLimits::from_config(&config(10, 0), Instant::now()).is_some());
    }

    #[test]
    fn a_v5_client_is_refused_past_either_limit() {
        let now = Instant::now();
        let mut limits = PublishLimits::new(&config(2, 1000), now);
        assert_eq!(limits.admit(100, now), None);
        assert_eq!(limits.admit(950, now), Some(Over::Bandwidth));
        assert_eq!(limits.admit(100, now), None);
        assert_eq!(limits.admit(1, now), Some(Over::Rate));
        assert_eq!(limits.admit(1, now + Duration::from_millis(500)), None);
    }

    #[test]
    fn a_v311_client_is_paused_until_back_within_its_limit() {
        let now = Instant::now();
        let mut limits = PublishLimits::new(&config(10, 0), now);
        assert!((0..10).all(|_| !limits.charge(10, now)));
        assert!(limits.charge(10, now));
        assert_eq!(limits.paused_until(now), Some(now + Duration::from_millis(100)));
        assert_eq!(limits.paused_until(now + Duration::from_millis(100)), None);
    }
}
