//! One command read by a connection's source, applied as any other Ditto
//! protocol command: the source's `headerMapping` and `enforcement`, then
//! `Twins::apply_envelope` with the source's `authorizationContext`, the
//! path MQTT (`mqtt.rs`) and WebSocket (`ws.rs`) commands take too. A live
//! message or command goes on to its receivers through the live hub, a
//! device's response to one goes to the call waiting for it, and its
//! acknowledgement of an event (under a label the source declared) to the
//! command waiting for that. A search (`_/_/things/twin/search/…`) runs as
//! over a WebSocket (`protocol/search.rs`), its events going to the reply
//! target as they come.

use super::placeholder::Received;
use super::source::SourceSpec;
use crate::live::{Call, Route, Sending};
use crate::protocol::search::{self, Searches};
use crate::protocol::{acks, error_response, Envelope, Topic};
use crate::service::Twins;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

/// The one owner of a connection's search subscriptions: each connection
/// has its own `Searches`, and anyone who can write to its sources may
/// request from or cancel what another subscribed there, as on one
/// WebSocket.
const SEARCH_OWNER: &str = "connection";

/// Pauses between tries of a command that failed for now.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LAST_PAUSE: Duration = Duration::from_secs(5);

/// A command's answer, for a reply target.
pub enum Answer {
    /// Its response (when `response-required`) or error response.
    Now(Box<Envelope>),
    /// A live message or command sent on to its receivers: the response
    /// of the device, or 408 after the call's timeout.
    Later(Call),
    /// A search subscription's events (`created`, `next`, `complete`,
    /// `failed`), each an answer as it comes.
    Stream(mpsc::Receiver<Envelope>),
}

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

/// Applies the Ditto protocol message `payload`; at least once, tries
/// again what failed for now (with a growing pause) until it is applied
/// or refused for good. `what` names the message in the warning of a
/// retry. Returns the outcome and the command's answer, if it has one
/// (a response when `response-required`, an error response).
pub async fn apply_until_done(
    twins: &Twins,
    searches: &Searches,
    source: &SourceSpec,
    received: Received<'_>,
    payload: &[u8],
    what: impl Fn() -> String,
) -> (Outcome, Option<Answer>) {
    let mut pause = FIRST_PAUSE;
    loop {
        match apply(twins, searches, source, received, payload).await {
            (Outcome::Retriable(why), _) if source.at_least_once => {
                tracing::warn!(message = %what(), %why, "a connection's command failed for now; tried again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LAST_PAUSE);
            }
            done => return done,
        }
    }
}

/// Applies the Ditto protocol message `payload` once.
async fn apply(
    twins: &Twins,
    searches: &Searches,
    source: &SourceSpec,
    received: Received<'_>,
    payload: &[u8],
) -> (Outcome, Option<Answer>) {
    let mut envelope = match Envelope::parse(payload) {
        Ok(envelope) => envelope,
        Err(error) => {
            return (Outcome::Refused(format!("{}: {}", error.error, error.message)), None)
        }
    };
    for (name, template) in &source.header_mapping {
        if let Some(value) = template.with_received(received) {
            envelope.headers.insert(name.clone(), Value::String(value));
        }
    }
    let topic = Topic::parse(&envelope.topic).ok();
    if let Some(enforcement) = &source.enforcement {
        let entity_id = topic.as_ref().and_then(Topic::entity_id);
        if let Err(error) = enforcement.check(received, entity_id.as_deref()) {
            let answer = error_response(topic.as_ref(), &envelope.headers, &error);
            return (refused(&answer), Some(Answer::Now(Box::new(answer))));
        }
    }
    if let Some(topic) = topic.as_ref().filter(|topic| acks::is_ack(topic)) {
        // A device's acknowledgement of an event a target carried to it.
        let headers = envelope.headers.clone();
        return match acks::deliver(twins.ack_hub(), topic, envelope, &source.declared_acks) {
            Ok(()) => (Outcome::Applied, None),
            Err(error) => {
                let answer = error_response(Some(topic), &headers, &error);
                (refused(&answer), Some(Answer::Now(Box::new(answer))))
            }
        };
    }
    if let Some(topic) = topic.as_ref().filter(|topic| search::is_search(topic)) {
        let mut events = None;
        let out = || {
            let (out, queued) = mpsc::channel(search::PAGES_QUEUED);
            events = Some(queued);
            out
        };
        return match searches.apply(SEARCH_OWNER, &source.caller, topic, &envelope, out) {
            Some(refused) => {
                (Outcome::Refused(refused.topic.clone()), Some(Answer::Now(Box::new(refused))))
            }
            None => (Outcome::Applied, events.map(Answer::Stream)),
        };
    }
    request_source_acks(&mut envelope, &source.requested_acks);
    if let Some(filter) = &source.acks_filter {
        let current = envelope.headers.get("requested-acks").map(|requested| match requested {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
        if let Some(requested) = filter.requested(current.as_deref(), received) {
            envelope.headers.insert("requested-acks".into(), Value::String(requested));
        }
    }
    match Route::of(&envelope) {
        // A device's answer to a live call.
        Some(Route::Response) => {
            twins.answer_live(envelope);
            (Outcome::Applied, None)
        }
        Some(Route::Signal(topic, kind)) => {
            let headers = envelope.headers.clone();
            match twins
                .send_live(&source.caller, topic.clone(), kind, envelope, Sending::default())
                .await
            {
                Ok(call) => (Outcome::Applied, call.map(Answer::Later)),
                Err(error) => {
                    let answer = error_response(Some(&topic), &headers, &error);
                    (refused(&answer), Some(Answer::Now(Box::new(answer))))
                }
            }
        }
        None => match twins.apply_envelope(&source.caller, &envelope).await {
            Some(answer) if answer.status.is_some_and(|status| status >= 400) => {
                (refused(&answer), Some(Answer::Now(Box::new(answer))))
            }
            // A response, or none because none was asked for: it succeeded.
            answer => (Outcome::Applied, answer.map(|answer| Answer::Now(Box::new(answer)))),
        },
    }
}

/// Adds the source's `acknowledgementRequests` to the command's own
/// `requested-acks`, as Ditto's `InboundDispatchingActor` does, unless
/// the command explicitly requested none (an empty list).
fn request_source_acks(envelope: &mut Envelope, requested: &[String]) {
    if requested.is_empty() {
        return;
    }
    let mut labels = match crate::acks::requested_labels(&envelope.headers) {
        Ok(Some(labels)) if labels.is_empty() => return,
        Ok(Some(labels)) => labels,
        // A malformed header is the command's own error, answered by it.
        Err(_) => return,
        Ok(None) => Vec::new(),
    };
    for label in requested {
        if !labels.contains(label) {
            labels.push(label.clone());
        }
    }
    envelope.headers.insert("requested-acks".into(), labels.into());
}

/// An error response as an outcome: 408, 424, 429 and 5xx are worth
/// another try, the rest would fail the same way again. Aggregated
/// acknowledgements are judged by each failed one, as Ditto's
/// `BaseConsumerActor` decides on redelivery: one that timed out, or
/// failed on the receiver's side, is tried again.
fn refused(answer: &Envelope) -> Outcome {
    let status = answer.status.unwrap_or(500);
    let retried = |status: u64| status >= 500 || status == 408 || status == 424 || status == 429;
    let is_acks = Topic::parse(&answer.topic).is_ok_and(|topic| acks::is_ack(&topic));
    let (code, retry) = match answer.value.as_ref() {
        Some(Value::Object(by_label)) if is_acks => {
            let failed = by_label
                .values()
                .filter_map(|ack| ack.get("status").and_then(Value::as_u64))
                .filter(|status| !(200..300).contains(status));
            ("acknowledgements", failed.clone().any(retried) || failed.count() == 0)
        }
        value => (
            value.and_then(|error| error.get("error")).and_then(Value::as_str).unwrap_or("unknown"),
            retried(u64::from(status)),
        ),
    };
    let why = format!("{} {status} {code}", answer.topic);
    if retry {
        Outcome::Retriable(why)
    } else {
        Outcome::Refused(why)
    }
}
