//! A running `http-push` connection: twin events in, one HTTP request per
//! event and target out, as Ditto's HTTP push does.
//!
//! One feed task reads the change feed and decides, per target, whether
//! and what of each event it sends: the target's topics (filter,
//! namespaces, extra fields) and the READ rights of its
//! `authorizationContext`, exactly as for a WebSocket session
//! (`ws/events.rs`). What passes waits in a bounded queue for
//! `parallelism` senders, each with one kept-alive HTTP connection
//! (`ferry_routes`' client, the edge HTTP endpoint's).
//!
//! What the receiver answers means:
//! - 2xx: published.
//! - 408, 429, 5xx, no connection or no answer within `REQUEST_TIMEOUT`:
//!   sent again after a growing pause, up to `ATTEMPTS` times, then
//!   counted as failed.
//! - any other status: the receiver refuses it and would again; counted as
//!   failed at once.
//!
//! Nothing is dropped: a full queue holds the feed back, and a feed that
//! falls behind reads on from the event journal (`feed.rs`). Each event
//! is settled (`progress.rs`) once its last request was answered for good
//! or ran out of tries; a restart sends again what was not.
//!
//! A target with an `issuedAcknowledgementLabel` acknowledges each event
//! whose command requested that label, and each live signal that
//! requested it, with the receiver's final answer:
//! its status, and its body (JSON, else text) as the payload; a request
//! that got no answer in all its tries with 503.
//!
//! A target with live topics gets live messages, commands and events too
//! (`live.rs`), each one request, tried once: the receiver's answer to a
//! message or command that wants a response is that response when it is
//! a Ditto protocol message (`Content-Type:
//! application/vnd.eclipse.ditto+json`) for the same correlation id, or,
//! for a target whose `issuedAcknowledgementLabel` is `live-response`,
//! any answer: its status, and its body (JSON, else text) as the value.
//! Otherwise the caller waits out its timeout, as with Ditto.

use super::feed::Feed;
use super::live::LiveSignal;
use super::model::{ConnectionSpec, HttpPush, Owed, Receiver};
use super::outgoing::{self, Outgoing};
use super::progress::Ticket;
use super::stats::{ConnectionStats, TargetStats};
use crate::protocol::{Envelope, DITTO_CONTENT_TYPE};
use crate::service::Twins;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use bytes::Bytes;
use ferry_routes::endpoints::http::{
    Answer, Body, Connection, Connector, Tls, BODY_HEAD_BYTES, BODY_READ_BYTES_MAX,
};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Mutex};
use tokio::task::AbortHandle;

/// Requests waiting for a sender, per connection: at 1,000 modifies/s and
/// a receiver that stalls, ten seconds of events, about 10 MB at 1 KB an
/// event. Past it the feed waits, and the events wait in the journal
/// rather than in memory.
const QUEUE: usize = 10_000;

/// Tries per request, the pauses between them doubling from
/// `FIRST_PAUSE` up to `LAST_PAUSE`: a receiver restarting within a few
/// seconds loses nothing.
const ATTEMPTS: u32 = 6;
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LAST_PAUSE: Duration = Duration::from_secs(5);

/// The longest a receiver may take to answer one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

struct Push {
    target: usize,
    method: Method,
    path: String,
    /// The target's `headerMapping` filled in for the signal.
    headers: Vec<(String, String)>,
    body: Bytes,
    purpose: Purpose,
}

/// What a request is for, which decides how often it is tried and what
/// its answer settles.
enum Purpose {
    /// A twin event: the acknowledgement it owes, and the ticket that
    /// settles the event once every request made of it is done.
    Event { owed: Option<Owed>, _ticket: Option<Ticket> },
    /// A live signal, whether any answer is its response
    /// (`live-response`), and the acknowledgement it owes.
    Live { signal: Box<Envelope>, any_answer: bool, owed: Option<Owed> },
}

/// Starts the connection's tasks; aborting the handles stops it.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    http: Arc<HttpPush>,
    stats: Arc<ConnectionStats>,
    events: Option<Feed>,
) -> Vec<AbortHandle> {
    let (queue, waiting) = mpsc::channel(QUEUE);
    let waiting = Arc::new(Mutex::new(waiting));
    let (mut tasks, signals) = super::live::signals(&twins, &spec);
    let live =
        feed_live(twins.clone(), spec.clone(), http.clone(), stats.clone(), signals, queue.clone());
    tasks.push(tokio::spawn(live).abort_handle());
    if let Some(events) = events {
        let feed = feed(twins.clone(), spec, http.clone(), stats.clone(), events, queue);
        tasks.push(tokio::spawn(feed).abort_handle());
    }
    for _ in 0..http.parallelism {
        let sender = send(twins.clone(), http.clone(), stats.clone(), waiting.clone());
        tasks.push(tokio::spawn(sender).abort_handle());
    }
    tasks
}

async fn feed(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    http: Arc<HttpPush>,
    stats: Arc<ConnectionStats>,
    mut events: Feed,
    queue: mpsc::Sender<Push>,
) {
    while let Some((event, ticket)) = events.next(&stats, &spec.id).await {
        for Outgoing { target, envelope, mut owed } in
            outgoing::of_event(&twins, &spec, &stats, &event).await
        {
            stats.targets[target].dispatched.inc();
            let rendered = http.requests[target].path.render(&envelope);
            let figures = &stats.targets[target];
            let Some(path) = outgoing::unless_withheld(&twins, figures, &mut owed, rendered) else {
                continue;
            };
            let purpose = Purpose::Event { owed, _ticket: ticket.clone() };
            if queue.send(Push::to(&http, target, path, &envelope, purpose)).await.is_err() {
                return;
            }
        }
    }
}

impl Push {
    /// The request that carries `envelope` to target `index` at `path`.
    fn to(
        http: &HttpPush,
        index: usize,
        path: String,
        envelope: &Envelope,
        purpose: Purpose,
    ) -> Push {
        Push {
            target: index,
            method: http.requests[index].method.clone(),
            path: format!("{}{path}", http.receiver.base_path),
            headers: http.requests[index].headers.for_signal(envelope),
            body: Bytes::from(envelope.to_bytes()),
            purpose,
        }
    }
}

/// Queues each live signal as one request to its target.
async fn feed_live(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    http: Arc<HttpPush>,
    stats: Arc<ConnectionStats>,
    mut signals: mpsc::Receiver<LiveSignal>,
    queue: mpsc::Sender<Push>,
) {
    while let Some(LiveSignal { target, envelope, mut owed }) = signals.recv().await {
        let any_answer = spec.targets[target].live_response;
        stats.targets[target].dispatched.inc();
        let rendered = http.requests[target].path.render(&envelope);
        let figures = &stats.targets[target];
        let Some(path) = outgoing::unless_withheld(&twins, figures, &mut owed, rendered) else {
            continue;
        };
        let purpose = Purpose::Live { signal: Box::new(envelope.clone()), any_answer, owed };
        if queue.send(Push::to(&http, target, path, &envelope, purpose)).await.is_err() {
            return;
        }
    }
}

async fn send(
    twins: Arc<Twins>,
    http: Arc<HttpPush>,
    stats: Arc<ConnectionStats>,
    waiting: Arc<Mutex<mpsc::Receiver<Push>>>,
) {
    let receiver = &http.receiver;
    let tls = match receiver.https.then(|| Tls::to_host(&receiver.host, None)).transpose() {
        Ok(tls) => tls,
        Err(error) => {
            stats.set_failure(format!("cannot set up TLS: {error}"));
            return;
        }
    };
    let mut connection = Connection::new(Connector::new(receiver.host.clone(), receiver.port, tls));
    loop {
        let Some(push) = waiting.lock().await.recv().await else { return };
        let figures = &stats.targets[push.target];
        match &push.purpose {
            Purpose::Event { owed, .. } => {
                let (answer, failure) =
                    deliver(&mut connection, receiver, &push, ATTEMPTS, figures, &stats).await;
                if let Some(owed) = owed.clone() {
                    settle(owed, &twins, answer.as_ref(), failure);
                }
            }
            Purpose::Live { signal, any_answer, owed } => {
                let (answer, failure) =
                    deliver(&mut connection, receiver, &push, 1, figures, &stats).await;
                if let Some(owed) = owed.clone() {
                    settle(owed, &twins, answer.as_ref(), failure);
                }
                if let Some(response) =
                    answer.and_then(|answer| response(signal, answer, *any_answer))
                {
                    twins.answer_live(response);
                }
            }
        }
    }
}

/// Answers what a request owes with the receiver's final answer: its
/// status and its body, or 503 and why there was none.
fn settle(owed: Owed, twins: &Twins, answer: Option<&Answer>, failure: Option<String>) {
    let status = answer.map_or(503, |answer| answer.status.as_u16());
    let payload =
        answer.and_then(|answer| payload(&answer.body_head)).or(failure.map(Value::String));
    owed.settle(twins, status, payload);
}

/// Sends one request until it is answered for good or out of `tries`;
/// returns the last answer, if there was one, and the last failure.
async fn deliver(
    connection: &mut Connection,
    receiver: &Receiver,
    push: &Push,
    tries: u32,
    figures: &TargetStats,
    stats: &ConnectionStats,
) -> (Option<Answer>, Option<String>) {
    // A live signal's answer can be its response, kept whole.
    let keep = match push.purpose {
        Purpose::Event { .. } => BODY_HEAD_BYTES,
        Purpose::Live { .. } => BODY_READ_BYTES_MAX,
    };
    let mut pause = FIRST_PAUSE;
    let mut last = None;
    let mut failure = None;
    for attempt in 1..=tries {
        let exchange = connection.exchange_keeping(request(receiver, push), keep);
        let why = match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Ok(Ok(answer)) if answer.status.is_success() => {
                figures.published.inc();
                stats.set_success();
                return (Some(answer), None);
            }
            Ok(Ok(answer)) if !retried(answer.status) => {
                figures.failed.inc();
                let why = format!("{} {} answered {}", push.method, push.path, answer.status);
                stats.set_failure(why.clone());
                return (Some(answer), Some(why));
            }
            Ok(Ok(answer)) => {
                let why = format!("{} {} answered {}", push.method, push.path, answer.status);
                last = Some(answer);
                why
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {REQUEST_TIMEOUT:?}"),
        };
        stats.set_failure(why.clone());
        failure = Some(why);
        if attempt < tries {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LAST_PAUSE);
        }
    }
    figures.failed.inc();
    (last, failure)
}

/// The response a receiver's `answer` makes to the live `signal`, if any:
/// see the module documentation.
fn response(signal: &Envelope, answer: Answer, any_answer: bool) -> Option<Envelope> {
    if !signal.response_required() || signal.topic.ends_with("/live/events") {
        return None;
    }
    let correlation_id = signal.correlation_id()?;
    let is_ditto = answer.content_type.as_deref().is_some_and(|content_type| {
        content_type.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(DITTO_CONTENT_TYPE)
    });
    if is_ditto {
        let response: Envelope = serde_json::from_slice(&answer.body_head).ok()?;
        let answers = response.correlation_id().as_deref() == Some(correlation_id.as_str())
            && response.topic == signal.topic;
        return answers.then_some(response);
    }
    if !any_answer {
        return None;
    }
    let mut headers = serde_json::Map::new();
    headers.insert("correlation-id".into(), correlation_id.into());
    let json = answer.content_type.as_deref().is_some_and(is_json);
    if let Some(content_type) = answer.content_type {
        headers.insert("content-type".into(), content_type.into());
    }
    let value = match answer.body_head.as_slice() {
        [] => None,
        body if json => serde_json::from_slice(body).ok(),
        body => Some(Value::String(String::from_utf8_lossy(body).into_owned())),
    };
    Some(Envelope {
        topic: signal.topic.clone(),
        headers,
        path: signal.path.clone(),
        value,
        fields: None,
        extra: None,
        status: Some(answer.status.as_u16()),
        revision: None,
        timestamp: None,
    })
}

/// Whether a content type is JSON: `application/json` or a `+json` type.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || essence.ends_with("+json")
}

/// An answer's body as an acknowledgement's payload: JSON when it is,
/// else text; nothing for an empty body. Only its first
/// `BODY_HEAD_BYTES` are kept by the client.
fn payload(body: &[u8]) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    serde_json::from_slice(body)
        .ok()
        .or_else(|| Some(Value::String(String::from_utf8_lossy(body).into_owned())))
}

fn retried(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
}

fn request(receiver: &Receiver, push: &Push) -> Request<Body> {
    let mut request = Request::new(Body::new(push.body.clone()));
    *request.method_mut() = push.method.clone();
    *request.uri_mut() = match push.path.parse() {
        Ok(uri) => uri,
        // Rendered from a checked template with encoded values: always a
        // path; `/` keeps a surprise from failing the whole connection.
        Err(_) => axum::http::Uri::from_static("/"),
    };
    let headers = request.headers_mut();
    headers.insert(header::HOST, receiver.authority.clone());
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(DITTO_CONTENT_TYPE));
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static(concat!("ferry/", env!("CARGO_PKG_VERSION"))),
    );
    if let Some(authorization) = &receiver.authorization {
        if let Ok(mut value) = HeaderValue::from_str(authorization) {
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
    }
    // After the defaults, so a mapping may set its own content type, as
    // Ditto's does. A value that cannot be a header (a line break from a
    // thing id, say) is left out rather than failing the request.
    for (name, value) in &push.headers {
        if let (Ok(name), Ok(value)) =
            (header::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value))
        {
            headers.insert(name, value);
        }
    }
    request
}
