//! Live commands over HTTP: a request to `/api/2/things/{thingId}[/path]`
//! with `channel=live` (a query parameter or a header, as Ditto reads
//! it) is not applied to the twin but sent to the devices as a live
//! command (`GET` is `retrieve`, `PUT` `modify`, `PATCH` `merge`,
//! `DELETE` `delete`), checked against the policy as the twin command
//! would be; the answer is the device's response (its status and value,
//! cut to what the caller may read), Ditto's 408 `command.timeout` when
//! none comes within `timeout`, or 202 at once with `timeout=0` or
//! `response-required=false`.
//!
//! **Smart channel selection** (`live/smart.rs`): a retrieve with a
//! `live-channel-condition` (query parameter or header), or a live one
//! with a `live-channel-timeout-strategy`, reads the twin first; then the
//! device or the twin answers, the headers `channel` and
//! `live-channel-condition-matched` saying which.

use super::messages::{add_correlation_id, http_response, param, settled};
use super::reply::{self, Reply};
use crate::error::DittoError;
use crate::id::ThingId;
use crate::live::smart::{self, TimeoutStrategy};
use crate::live::{Call, Kind, Sending};
use crate::pointer::JsonPointer;
use crate::protocol::{Envelope, Topic};
use crate::service::{Caller, Twins};
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// Whether the request asks for the live channel.
pub(super) fn requested(query: &[(String, String)], headers: &HeaderMap) -> bool {
    param(query, headers, "channel").is_some_and(|channel| channel.eq_ignore_ascii_case("live"))
}

/// A request of the things API, as a live command takes it.
pub(super) struct LiveRequest<'a> {
    pub method: &'a Method,
    pub thing_id: &'a ThingId,
    /// The path below the thing (`features/lamp/properties`).
    pub rest: &'a str,
    pub query: &'a [(String, String)],
    pub headers: &'a HeaderMap,
    pub body: &'a Bytes,
}

/// A request's smart channel selection headers (`live/smart.rs`).
pub(super) struct Selection {
    /// `live-channel-condition`, as written.
    pub condition: Option<String>,
    pub strategy: Option<TimeoutStrategy>,
}

impl Selection {
    pub fn read(query: &[(String, String)], headers: &HeaderMap) -> Result<Selection, DittoError> {
        let condition = param(query, headers, smart::CONDITION);
        let strategy = TimeoutStrategy::parse(param(query, headers, smart::STRATEGY).as_deref())?;
        Ok(Selection { condition, strategy })
    }

    /// Whether `method` with `live` (`channel=live`) reads the twin first:
    /// a retrieve with a condition, or a live one with a strategy. Any
    /// other request with a condition is Ditto's 400.
    pub fn twin_first(&self, method: &Method, live: bool) -> Result<bool, DittoError> {
        if *method != Method::GET {
            return match self.condition {
                Some(_) => Err(DittoError::live_channel_condition_not_allowed()),
                None => Ok(false),
            };
        }
        Ok(self.condition.is_some() || (live && self.strategy.is_some()))
    }
}

/// Sends the request as a live command and answers with its response.
pub(super) async fn command(twins: &Twins, caller: &Caller, request: &LiveRequest<'_>) -> Reply {
    let Some(call) = send(twins, caller, request).await? else {
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    Ok(settled(call).await)
}

/// A retrieve that read the twin first (`Selection::twin_first`): `twin`
/// is the twin's answer, `matched` whether the request goes to the device.
pub(super) async fn select(
    twins: &Twins,
    caller: &Caller,
    request: &LiveRequest<'_>,
    twin: Response,
    matched: bool,
    strategy: Option<TimeoutStrategy>,
) -> Reply {
    if !matched {
        return Ok(from_channel(twin, "twin", false));
    }
    let Some(mut call) = send(twins, caller, request).await? else {
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let mut response = match call.answer().await {
        Some(answer) => from_channel(http_response(&answer), "live", true),
        None if strategy == Some(TimeoutStrategy::UseTwin) => from_channel(twin, "twin", true),
        None => from_channel(http_response(&call.timed_out()), "live", true),
    };
    add_correlation_id(&mut response, &call.correlation_id);
    Ok(response)
}

/// Marks an answer with the channel it came from, as Ditto's headers do.
fn from_channel(mut response: Response, channel: &'static str, matched: bool) -> Response {
    let headers = response.headers_mut();
    headers.insert(smart::CHANNEL, HeaderValue::from_static(channel));
    let matched = if matched { "true" } else { "false" };
    headers.insert(smart::MATCHED, HeaderValue::from_static(matched));
    response
}

/// Sends the request to the devices as a live command: its call, or
/// `None` when no answer is wanted.
async fn send(
    twins: &Twins,
    caller: &Caller,
    request: &LiveRequest<'_>,
) -> Result<Option<Call>, DittoError> {
    let LiveRequest { method, thing_id, rest, query, headers, body } = *request;
    let (action, value) = match *method {
        Method::GET => ("retrieve", None),
        Method::PUT => ("modify", Some(reply::parse_body(body)?)),
        Method::PATCH => ("merge", Some(reply::parse_body(body)?)),
        Method::DELETE => ("delete", None),
        _ => return Err(reply::method_not_allowed(method)),
    };
    let topic = Topic::parse(&format!(
        "{}/{}/things/live/commands/{action}",
        thing_id.namespace(),
        thing_id.name()
    ))?;
    let path = JsonPointer::parse(&format!("/{rest}"))?;
    let mut envelope = Envelope::new(topic.to_string(), path.to_string());
    for name in ["correlation-id", "timeout", "response-required", "requested-acks"] {
        if let Some(given) = param(query, headers, name) {
            envelope.headers.insert(name.to_owned(), given.into());
        }
    }
    if value.is_some() {
        envelope.headers.insert("content-type".into(), "application/json".into());
    }
    envelope.value = value;
    envelope.fields = param(query, headers, "fields");
    twins.send_live(caller, topic, Kind::LiveCommands, envelope, Sending::default()).await
}
