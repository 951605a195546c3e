//! One command read by a connection's source, applied as any other Ditto
//! protocol command: the source's `headerMapping` and `enforcement`, then
//! `Twins::apply_envelope` with the source's `authorizationContext`, the
//! path MQTT (`mqtt.rs`) and WebSocket (`ws.rs`) commands take too.

use super::kafka::SourceSpec;
use crate::protocol::{error_response, Envelope, Topic};
use crate::service::Twins;
use serde_json::{Map, Value};

/// What became of one message.
#[derive(Debug)]
pub enum Outcome {
    /// The command ran and succeeded; a change is committed to the store
    /// (Ditto's `twin-persisted`).
    Applied,
    /// Not executed, or refused for good (enforcement, a malformed
    /// message, no rights, a failed precondition): it would be again.
    Refused(String),
    /// Failed for now (the store unavailable, a timeout): worth trying
    /// again, which an at-least-once source does before it moves on.
    Retriable(String),
}

/// Applies the Ditto protocol message `payload`, whose transport headers
/// (names in lower case) are `headers`.
pub async fn apply(
    twins: &Twins,
    source: &SourceSpec,
    headers: &Map<String, Value>,
    payload: &[u8],
) -> Outcome {
    let mut envelope = match Envelope::parse(payload) {
        Ok(envelope) => envelope,
        Err(error) => return Outcome::Refused(format!("{}: {}", error.error, error.message)),
    };
    for (name, template) in &source.header_mapping {
        let value = template.with_headers(|header| headers.get(header).and_then(Value::as_str));
        if let Some(value) = value {
            envelope.headers.insert(name.clone(), Value::String(value));
        }
    }
    let topic = Topic::parse(&envelope.topic).ok();
    if let Some(enforcement) = &source.enforcement {
        let entity_id = topic.as_ref().and_then(Topic::entity_id);
        if let Err(error) = enforcement.check(headers, entity_id.as_deref()) {
            // The error response Ditto would send to a reply target; Ferry
            // sends none (docs/twins.md), so it is only counted.
            let answer = error_response(topic.as_ref(), &envelope.headers, &error);
            return refused(&answer);
        }
    }
    match twins.apply_envelope(&source.caller, &envelope).await {
        Some(answer) if answer.status.is_some_and(|status| status >= 400) => refused(&answer),
        // A response, or none because none was asked for: it succeeded.
        _ => Outcome::Applied,
    }
}

/// An error response as an outcome: 408, 429 and 5xx are worth another
/// try, the rest would fail the same way again.
fn refused(answer: &Envelope) -> Outcome {
    let status = answer.status.unwrap_or(500);
    let code = answer
        .value
        .as_ref()
        .and_then(|error| error.get("error"))
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let why = format!("{} {status} {code}", answer.topic);
    if status >= 500 || status == 408 || status == 429 {
        Outcome::Retriable(why)
    } else {
        Outcome::Refused(why)
    }
}
