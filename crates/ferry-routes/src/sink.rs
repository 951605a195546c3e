//! What every endpoint type implements: connect, and send a batch. The
//! flow (`flow.rs`) decides what goes into a batch, when, and what happens
//! after a failure; a sink only speaks its protocol.

use ferry_broker::endpoint::RoutedMessage;
use std::future::Future;

/// Why a connection or a send failed. The flow logs it once per change of
/// state, backs off and tries again; nothing taken is lost, since what was
/// not acknowledged stays queued.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

impl SinkError {
    pub fn new(message: impl Into<String>) -> SinkError {
        SinkError(message.into())
    }
}

/// What became of a batch the endpoint answered.
#[derive(Debug, Default)]
pub struct Sent {
    /// Messages the endpoint refused for good (an HTTP 4xx, say), with the
    /// reason to count them under: dropped, not retried.
    pub rejected: Vec<(u64, &'static str)>,
}

pub trait Sink: Send + 'static {
    /// Opens (or reopens, after a failure) the connection.
    fn connect(&mut self) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Sends `batch` (messages in the order they are to arrive) and returns
    /// once the endpoint has acknowledged all of it. An error means some
    /// may not have arrived: the batch is sent again after a reconnect.
    fn send(
        &mut self,
        batch: &[RoutedMessage],
    ) -> impl Future<Output = Result<Sent, SinkError>> + Send;

    /// Resolves, with why, once the connection has failed, for the flow to
    /// notice while it has nothing to send (a connection that also carries
    /// the other direction, say). Never, for sinks without a standing
    /// connection.
    fn closed(&self) -> impl Future<Output = SinkError> + Send + 'static {
        std::future::pending()
    }
}
