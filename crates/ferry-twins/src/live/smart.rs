//! Ditto's smart channel selection (2.3): a retrieve with a
//! `live-channel-condition` reads the twin first, and goes to the device
//! as a live retrieve when the twin meets the condition. When the device
//! does not answer in time, `live-channel-timeout-strategy` decides:
//! `fail` (408) or `use-twin`. The HTTP API (`http/live.rs`) and the Ditto
//! protocol (`protocol/commands.rs`) both select this way; the answer's
//! headers `channel` and `live-channel-condition-matched` say which
//! answered.

use super::{Kind, Sending};
use crate::error::DittoError;
use crate::protocol::{Channel, Envelope, Topic};
use crate::service::{Caller, Twins};

/// The header (or HTTP query parameter) of the condition.
pub const CONDITION: &str = "live-channel-condition";
/// The header (or HTTP query parameter) of the strategy.
pub const STRATEGY: &str = "live-channel-timeout-strategy";

/// The answer's header naming the channel that gave it (`live`, `twin`).
pub const CHANNEL: &str = "channel";
/// The answer's header saying whether the twin met the condition.
pub const MATCHED: &str = "live-channel-condition-matched";

/// `live-channel-timeout-strategy`: what a retrieve sent to the device
/// answers when the device does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutStrategy {
    /// Ditto's 408 `command.timeout` (the default).
    Fail,
    /// The twin's answer.
    UseTwin,
}

impl TimeoutStrategy {
    /// The strategy named by `text`, or Ditto's 400 `header.invalid`.
    pub fn parse(text: Option<&str>) -> Result<Option<TimeoutStrategy>, DittoError> {
        match text {
            None => Ok(None),
            Some(text) if text.eq_ignore_ascii_case("fail") => Ok(Some(TimeoutStrategy::Fail)),
            Some(text) if text.eq_ignore_ascii_case("use-twin") => {
                Ok(Some(TimeoutStrategy::UseTwin))
            }
            Some(text) => Err(DittoError::header_invalid(
                STRATEGY,
                text,
                "LiveChannelTimeoutStrategy (fail or use-twin)",
            )),
        }
    }
}

/// Marks a protocol answer with the channel that gave it.
pub fn mark(envelope: &mut Envelope, channel: &'static str, matched: bool) {
    envelope.headers.insert(CHANNEL.into(), channel.into());
    envelope.headers.insert(MATCHED.into(), matched.to_string().into());
}

impl Twins {
    /// A Ditto protocol twin retrieve whose twin met its condition: sent
    /// to the device as a live retrieve, its response the answer; `twin`,
    /// the twin's own answer, when the device is silent and the strategy
    /// is `use-twin`.
    pub async fn retrieve_from_device(
        &self,
        caller: &Caller,
        topic: &Topic,
        command: &Envelope,
        twin: Envelope,
    ) -> Envelope {
        let strategy = match TimeoutStrategy::parse(command.header(STRATEGY).as_deref()) {
            Ok(strategy) => strategy,
            Err(error) => {
                return crate::protocol::error_response(Some(topic), &command.headers, &error)
            }
        };
        let live_topic = Topic { channel: Channel::Live, ..topic.clone() };
        let mut live = command.clone();
        live.topic = live_topic.to_string();
        live.headers.remove(CONDITION);
        let sent = self.send_live(
            caller,
            live_topic.clone(),
            Kind::LiveCommands,
            live,
            Sending::default(),
        );
        let (mut answer, channel) = match sent.await {
            Ok(Some(mut call)) => match call.answer().await {
                Some(answer) => (answer, "live"),
                None if strategy == Some(TimeoutStrategy::UseTwin) => (twin, "twin"),
                None => (call.timed_out(), "live"),
            },
            // No response wanted: the twin's answer is none either.
            Ok(None) => (twin, "twin"),
            Err(error) => (
                crate::protocol::error_response(Some(&live_topic), &command.headers, &error),
                "live",
            ),
        };
        mark(&mut answer, channel, true);
        answer
    }
}
