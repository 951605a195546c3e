//! What every Kafka client of Ferry's (the edge endpoint's producer, a
//! twins connection's consumers and producer) does with librdkafka's log
//! lines and errors, and what it keeps of them.
//!
//! A librdkafka error's code says little: a TLS handshake that failed is
//! `SSL (Local: SSL error)`. The words that say why (`certificate verify
//! failed`, the broker that refused) come only to the client's error
//! callback. The context keeps the last of them, so that a status can show
//! them beside the code rather than only a debug log line having them.

use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;
use std::fmt::Display;
use std::sync::Arc;

/// The longest reason kept: librdkafka's fit on a line, but a status is
/// no place for a page.
const REASON_LIMIT: usize = 512;

pub struct KafkaContext {
    /// Who the client works for (an endpoint, a connection), for the log.
    client: Arc<str>,
    last_reason: LastReason,
}

impl KafkaContext {
    /// A client's context that keeps its reasons in `last_reason`, which
    /// its owner holds: librdkafka keeps a producer's context to itself.
    pub fn new(client: impl Into<Arc<str>>, last_reason: LastReason) -> KafkaContext {
        KafkaContext { client: client.into(), last_reason }
    }

    pub fn last_reason(&self) -> &LastReason {
        &self.last_reason
    }
}

impl ClientContext for KafkaContext {
    /// At debug level: while a broker is down librdkafka reports every
    /// reconnect attempt, and the endpoint or connection already logs one
    /// line per change of its state.
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        tracing::debug!(client = %self.client, ?level, facility, message, "librdkafka");
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(client = %self.client, %error, reason, "librdkafka error");
        self.last_reason.keep(reason);
    }
}

/// A consumer's rebalances as librdkafka does them by default.
impl ConsumerContext for KafkaContext {}

/// The last reason a client's librdkafka gave for an error.
#[derive(Clone, Default)]
pub struct LastReason(Arc<Mutex<Option<String>>>);

impl LastReason {
    /// `error`, followed by librdkafka's own words for the last error it
    /// reported where they say more than `error` does.
    pub fn explain(&self, error: &impl Display) -> String {
        let error = error.to_string();
        match self.0.lock().as_deref() {
            Some(reason) if !error.contains(reason) => format!("{error}: {reason}"),
            _ => error,
        }
    }

    fn keep(&self, reason: &str) {
        let mut end = reason.len().min(REASON_LIMIT);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        *self.0.lock() = Some(reason[..end].to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::error::RDKafkaErrorCode;

    #[test]
    fn an_error_is_explained_by_the_last_reason_librdkafka_gave() {
        let reasons = LastReason::default();
        let context = KafkaContext::new("lake", reasons.clone());
        let error = KafkaError::MessageConsumption(RDKafkaErrorCode::SSL);
        assert_eq!(reasons.explain(&error), error.to_string(), "nothing reported yet");
        let reason =
            "ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: certificate verify failed";
        context.error(error.clone(), reason);
        assert_eq!(reasons.explain(&error), format!("{error}: {reason}"));
        assert_eq!(reasons.explain(&reason), reason, "not said twice");
        context.error(error, &"é".repeat(REASON_LIMIT));
        assert!(reasons.explain(&"x").len() <= "x: ".len() + REASON_LIMIT);
    }
}
