//! Live messages over HTTP, as Ditto's `MessagesRoute`:
//! `POST /api/2/things/{thingId}/inbox/messages/{subject}` (to the thing)
//! and `/outbox/messages/{subject}` (from it), the same under
//! `/features/{featureId}`, and `/inbox/claim`, Ditto's claim message,
//! which needs no WRITE on the thing's messages: it asks the device for
//! access, and the device decides. The body is the message's payload, its
//! `Content-Type` the message's; the call waits for the device's response
//! (`timeout`, default 10 s, at most 60 s) and answers with its status
//! and payload, or Ditto's 408 `command.timeout`; with `timeout=0` it
//! answers 202 at once, once the message is allowed and sent.
//!
//! **Ferry's extension: persistent messages.** With `qos=1` (a query
//! parameter or a header) the message is kept for devices that are away:
//! it goes to MQTT at QoS 1 with its TTL (`ttl`, seconds, default 1 h, at
//! most 24 h) as the Message Expiry Interval, so a device's persistent
//! session receives it when it reconnects. The call answers 202 at once
//! with the message's `correlationId`; `GET` on the same path with
//! `?correlation-id=…` then tells its outcome: `pending`, `answered` (with
//! the device's `status`, `headers` and `value`) or `expired` (the TTL
//! passed unanswered), to the caller that sent it.

use super::params::{pairs, Plus};
use super::reply::{json, method_not_allowed, Reply};
use crate::error::DittoError;
use crate::id::ThingId;
use crate::live::{Call, Kind, OutcomeState, Sending, Settled};
use crate::protocol::{Envelope, Topic};
use crate::service::{Caller, Twins};
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use base64::Engine;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The largest payload a message may have: Ditto's `limits.messages.max-size`
/// (250k).
const MAX_PAYLOAD_BYTES: usize = 250 * 1024;

/// How long a persistent message is kept by default.
const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// The longest a persistent message is kept: its outcome is kept as long,
/// in a bounded table (`live/pending.rs`).
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// Where a message goes: the thing's or a feature's inbox or outbox.
struct Mailbox {
    thing_id: String,
    feature_id: Option<String>,
    inbox: bool,
    subject: String,
    /// A claim message (`/inbox/claim`, subject `claim`).
    claim: bool,
}

/// `POST /things/{thingId}/{inbox|outbox}/messages/{subject}`, and `GET`
/// of a persistent message's outcome.
pub(super) async fn thing(
    state: State<Arc<Twins>>,
    caller: Option<Extension<Caller>>,
    Path((thing_id, subject)): Path<(String, String)>,
    route: MatchedPath,
    request: Request,
) -> Reply {
    let inbox = is_inbox(&route);
    let mailbox = Mailbox { thing_id, feature_id: None, inbox, subject, claim: false };
    message(state, caller, mailbox, request).await
}

/// `POST /things/{thingId}/inbox/claim`: Ditto's claim message.
pub(super) async fn claim(
    state: State<Arc<Twins>>,
    caller: Option<Extension<Caller>>,
    Path(thing_id): Path<String>,
    request: Request,
) -> Reply {
    let subject = crate::live::CLAIM_SUBJECT.to_owned();
    let mailbox = Mailbox { thing_id, feature_id: None, inbox: true, subject, claim: true };
    message(state, caller, mailbox, request).await
}

/// The same for a feature: `/things/{thingId}/features/{featureId}/…`.
pub(super) async fn feature(
    state: State<Arc<Twins>>,
    caller: Option<Extension<Caller>>,
    Path((thing_id, feature_id, subject)): Path<(String, String, String)>,
    route: MatchedPath,
    request: Request,
) -> Reply {
    let inbox = is_inbox(&route);
    let mailbox = Mailbox { thing_id, feature_id: Some(feature_id), inbox, subject, claim: false };
    message(state, caller, mailbox, request).await
}

/// Whether the route is an inbox's (else an outbox's).
fn is_inbox(route: &MatchedPath) -> bool {
    route.as_str().contains("/inbox/")
}

/// A request's parameter by name: the query's (the last given), else the
/// header of the same name, as Ditto reads headers from either.
pub(super) fn param(query: &[(String, String)], headers: &HeaderMap, name: &str) -> Option<String> {
    query
        .iter()
        .rev()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.clone())
        .or_else(|| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned))
}

async fn message(
    State(twins): State<Arc<Twins>>,
    caller: Option<Extension<Caller>>,
    mailbox: Mailbox,
    request: Request,
) -> Reply {
    let caller = super::caller(caller)?;
    let (parts, body) = request.into_parts();
    let (method, headers) = (parts.method, parts.headers);
    let query = pairs(parts.uri.query().unwrap_or_default().as_bytes(), Plus::Literal);
    let thing_id = ThingId::parse(&mailbox.thing_id)?;
    let subject = mailbox.subject.trim_start_matches('/');
    if subject.is_empty() {
        return Err(DittoError::subject_invalid(&mailbox.subject));
    }
    let correlation_id = param(&query, &headers, "correlation-id");
    if method == Method::GET && mailbox.inbox {
        let Some(correlation_id) = correlation_id else { return Err(method_not_allowed(&method)) };
        return outcome(&twins, &caller, &thing_id, &correlation_id);
    }
    if method != Method::POST {
        return Err(method_not_allowed(&method));
    }
    let persistent = match param(&query, &headers, "qos").as_deref() {
        None | Some("0") => None,
        Some("1") => Some(ttl(param(&query, &headers, "ttl").as_deref())?),
        Some(other) => return Err(DittoError::header_invalid("qos", other, "qos (0 or 1)")),
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_owned();
    let body = read_body(&headers, body).await?;
    let value = if body.is_empty() { None } else { Some(payload(&content_type, &body)?) };

    let direction = if mailbox.inbox { "inbox" } else { "outbox" };
    let topic = Topic::parse(&format!(
        "{}/{}/things/live/messages/{subject}",
        thing_id.namespace(),
        thing_id.name()
    ))?;
    let path = match &mailbox.feature_id {
        _ if mailbox.claim => crate::live::CLAIM_PATH.to_owned(),
        Some(feature) => format!("/features/{feature}/{direction}/messages/{subject}"),
        None => format!("/{direction}/messages/{subject}"),
    };
    let mut envelope = Envelope::new(topic.to_string(), path);
    let mut set = |name: &str, value: Value| envelope.headers.insert(name.to_owned(), value);
    set("content-type", content_type.into());
    set("direction", if mailbox.inbox { "TO" } else { "FROM" }.into());
    set("thing-id", thing_id.as_str().into());
    set("subject", subject.into());
    set("timestamp", crate::policy::Timestamp::now().to_string().into());
    if let Some(feature) = &mailbox.feature_id {
        set("feature-id", feature.as_str().into());
    }
    if let Some(id) = correlation_id {
        set("correlation-id", id.into());
    }
    for name in ["timeout", "response-required", "requested-acks"] {
        if let Some(given) = param(&query, &headers, name) {
            set(name, given.into());
        }
    }
    envelope.value = value;

    let sending = Sending { persistent };
    let Some(call) = twins.send_live(&caller, topic, Kind::Messages, envelope, sending).await?
    else {
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    if persistent.is_some() {
        let correlation_id = call.correlation_id.clone();
        let settling = twins.clone();
        tokio::spawn(async move { settling.settle_persistent(call).await });
        let mut response = json(StatusCode::ACCEPTED, &json!({ "correlationId": correlation_id }));
        add_correlation_id(&mut response, &correlation_id);
        return Ok(response);
    }
    Ok(settled(call).await)
}

/// The HTTP answer of a call: the receiver's response, or the requested
/// acknowledgements aggregated as a twin command's are.
pub(super) async fn settled(call: Call) -> Response {
    let correlation_id = call.correlation_id.clone();
    let mut response = match call.settle().await {
        Settled::Response(envelope) => http_response(&envelope),
        Settled::Acknowledgements { status, acks } => super::reply::acknowledgements(status, &acks),
        Settled::Quiet(_) => StatusCode::ACCEPTED.into_response(),
    };
    add_correlation_id(&mut response, &correlation_id);
    response
}

/// The payload, at most [`MAX_PAYLOAD_BYTES`] (Ditto's
/// `MessageCommandSizeValidator`), refused by its `Content-Length` before
/// it is read where it has one.
async fn read_body(headers: &HeaderMap, body: Body) -> Result<Bytes, DittoError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok())
        .and_then(|length| length.parse::<usize>().ok());
    if let Some(length) = declared.filter(|&length| length > MAX_PAYLOAD_BYTES) {
        return Err(payload_too_large(length));
    }
    axum::body::to_bytes(body, MAX_PAYLOAD_BYTES)
        .await
        .map_err(|_| payload_too_large(MAX_PAYLOAD_BYTES + 1))
}

/// Ditto's `MessagePayloadSizeTooLargeException`.
fn payload_too_large(bytes: usize) -> DittoError {
    DittoError::new(
        413,
        "messages:payload.toolarge",
        format!(
            "The message payload size of '{}' kB exceeds the maximal allowed size of '{}' kB.",
            bytes / 1024,
            MAX_PAYLOAD_BYTES / 1024
        ),
        "Reduce the message payload in the bounds of the specified limit".to_string(),
    )
}

/// A persistent message's TTL in seconds: default 1 h, at most 24 h.
fn ttl(given: Option<&str>) -> Result<Duration, DittoError> {
    let Some(text) = given else { return Ok(DEFAULT_TTL) };
    let seconds: u64 = text
        .parse()
        .ok()
        .filter(|&seconds| seconds > 0)
        .ok_or_else(|| DittoError::header_invalid("ttl", text, "number of seconds"))?;
    let ttl = Duration::from_secs(seconds);
    if ttl > MAX_TTL {
        return Err(DittoError::timeout_invalid(ttl, MAX_TTL));
    }
    Ok(ttl)
}

/// The request body as the message's value, as Ditto's
/// `initMessageBuilder` reads it: JSON for a JSON type, a string for
/// text, anything else base64 as its protocol adapter writes binary
/// payloads.
fn payload(content_type: &str, body: &[u8]) -> Result<Value, DittoError> {
    Ok(match media(content_type) {
        Media::Json => serde_json::from_slice(body).map_err(DittoError::json_invalid)?,
        Media::Text => Value::String(String::from_utf8_lossy(body).into_owned()),
        Media::Binary => Value::String(base64::engine::general_purpose::STANDARD.encode(body)),
    })
}

enum Media {
    Json,
    Text,
    Binary,
}

fn media(content_type: &str) -> Media {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence == "application/json" || essence.ends_with("+json") {
        Media::Json
    } else if essence.starts_with("text/") {
        Media::Text
    } else {
        Media::Binary
    }
}

/// The device's response as the HTTP answer, as Ditto's
/// `handleMessageResponseMessage`: its status (502, which Ditto keeps for
/// itself, becomes 200), its payload in its content type, nothing for
/// 204; an error response is the error.
pub(super) fn http_response(response: &Envelope) -> Response {
    let status = match response.status {
        Some(502) | None => StatusCode::OK,
        Some(status) => StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
    };
    if status == StatusCode::NO_CONTENT {
        return status.into_response();
    }
    let Some(value) = &response.value else { return status.into_response() };
    let content_type = response.header("content-type");
    let body = match (content_type.as_deref().map(media), value) {
        (Some(Media::Text), Value::String(text)) => text.clone().into_bytes(),
        (Some(Media::Binary), Value::String(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap_or_else(|_| encoded.clone().into_bytes()),
        _ => value.to_string().into_bytes(),
    };
    let content_type = content_type.unwrap_or_else(|| "application/json".to_owned());
    let mut answer = (status, body).into_response();
    if let Ok(content_type) = HeaderValue::from_str(&content_type) {
        answer.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    answer
}

pub(super) fn add_correlation_id(response: &mut Response, correlation_id: &str) {
    if let Ok(value) = HeaderValue::from_str(correlation_id) {
        response.headers_mut().insert("correlation-id", value);
    }
}

/// `GET …/inbox/messages/{subject}?correlation-id=…`: the outcome of a
/// persistent message the caller sent.
fn outcome(twins: &Twins, caller: &Caller, thing_id: &ThingId, correlation_id: &str) -> Reply {
    let outcome = twins
        .live()
        .outcome(caller, correlation_id)
        .filter(|outcome| outcome.thing_id == *thing_id)
        .ok_or_else(|| outcome_not_found(correlation_id))?;
    let mut body = json!({ "correlationId": correlation_id, "thingId": thing_id.as_str() });
    let (state, response) = match &outcome.state {
        OutcomeState::Pending => ("pending", None),
        OutcomeState::Answered(response) => ("answered", Some(response)),
        OutcomeState::Expired => ("expired", None),
        OutcomeState::Acknowledged { status, acks } => {
            body["status"] = (*status).into();
            body["acknowledgements"] = crate::acks::protocol_value(acks);
            ("acknowledged", None)
        }
    };
    body["state"] = state.into();
    if let Some(response) = response {
        body["status"] = response.status.into();
        body["headers"] = Value::Object(response.headers.clone());
        if let Some(value) = &response.value {
            body["value"] = value.clone();
        }
    }
    Ok(json(StatusCode::OK, &body))
}

/// No persistent message of the caller's with that correlation id is
/// known (never sent, someone else's, or forgotten).
fn outcome_not_found(correlation_id: &str) -> DittoError {
    DittoError::new(
        404,
        "messages:outcome.notfound",
        format!("No outcome of a message with correlation-id '{correlation_id}' is known."),
        "Outcomes are kept for messages sent with qos=1, to their sender, for 10 minutes after they are known.".to_string(),
    )
}
