//! A publish held back by an endpoint that blocks when full
//! (`when_full = "block"`): the client keeps it, unanswered, with its
//! input paused, and tries it again until the endpoint has room or the
//! endpoint's `block_timeout` runs out.

use crate::message::Message;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a held publish is tried again. An endpoint frees room as its
/// batches are acknowledged, tens of milliseconds apart on a slow link;
/// trying more often than this would only spin while it is down.
pub(crate) const RETRY_PERIOD: Duration = Duration::from_millis(25);

pub(crate) struct HeldPublish {
    pub message: Arc<Message>,
    pub packet_id: u16,
    /// QoS 2: answered with PUBREC rather than PUBACK.
    pub exactly_once: bool,
    /// Broker clock (ms) past which it is refused.
    pub deadline_ms: u64,
    pub next_try: Instant,
}
