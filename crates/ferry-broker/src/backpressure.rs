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
//! A subscriber that does not drain at all must not stall publishers for
//! ever: after `MAX_WAIT` the publisher gives up, the subscriber is marked
//! stalled (nobody waits for it again until it drains), and its queue bound
//! and overflow policy apply as usual.

use crate::session::Session;
use std::sync::Arc;
use std::time::Duration;

/// Longest a publisher waits for one congested subscriber.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

/// Queue length at which publishers start waiting: half the bound, so the
/// messages already decoded from the publisher's last read still fit.
pub(crate) fn high_watermark(max_queued: usize) -> usize {
    (max_queued / 2).max(1)
}

/// Queue length at which waiting publishers resume.
pub(crate) fn low_watermark(max_queued: usize) -> usize {
    high_watermark(max_queued) / 2
}

/// A publisher paused until `target` drains.
pub(crate) struct Blocked {
    pub target: Arc<Session>,
    pub since_ms: u64,
}
