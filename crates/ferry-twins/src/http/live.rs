//! Live commands over HTTP: a request to `/api/2/things/{thingId}[/path]`
//! with `channel=live` (a query parameter or a header, as Ditto reads
//! it) is not applied to the twin but sent to the devices as a live
//! command (`GET` is `retrieve`, `PUT` `modify`, `PATCH` `merge`,
//! `DELETE` `delete`), checked against the policy as the twin command
//! would be; the answer is the device's response (its status and value,
//! cut to what the caller may read), Ditto's 408 `command.timeout` when
//! none comes within `timeout`, or 202 at once with `timeout=0` or
//! `response-required=false`.

use super::messages::{add_correlation_id, http_response, param};
use super::reply::{self, Reply};
use crate::id::ThingId;
use crate::live::{Kind, Sending};
use crate::pointer::JsonPointer;
use crate::protocol::{Envelope, Topic};
use crate::service::{Caller, Twins};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::IntoResponse;
use axum::Extension;

/// Whether the request asks for the live channel.
pub(super) fn requested(query: &[(String, String)], headers: &HeaderMap) -> bool {
    param(query, headers, "channel").is_some_and(|channel| channel.eq_ignore_ascii_case("live"))
}

/// Sends the request as a live command and answers with its response.
#[allow(clippy::too_many_arguments)] // the parts of the request, as `things::handle` has them
pub(super) async fn command(
    twins: &Twins,
    caller: Option<Extension<Caller>>,
    method: &Method,
    id: &str,
    rest: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
    body: &Bytes,
) -> Reply {
    let caller = super::caller(caller)?;
    let thing_id = ThingId::parse(id)?;
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
    for name in ["correlation-id", "timeout", "response-required"] {
        if let Some(given) = param(query, headers, name) {
            envelope.headers.insert(name.to_owned(), given.into());
        }
    }
    if value.is_some() {
        envelope.headers.insert("content-type".into(), "application/json".into());
    }
    envelope.value = value;
    envelope.fields = param(query, headers, "fields");
    let sending = Sending::default();
    let Some(call) = twins.send_live(&caller, topic, Kind::LiveCommands, envelope, sending).await?
    else {
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let correlation_id = call.correlation_id.clone();
    let mut response = http_response(&call.response().await);
    add_correlation_id(&mut response, &correlation_id);
    Ok(response)
}
