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
//! whose command requested that label with the receiver's final answer:
//! its status, and its body (JSON, else text) as the payload; a request
//! that got no answer in all its tries with 503.

use super::feed::Feed;
use super::model::{ConnectionSpec, HttpPush, Owed, Receiver};
use super::progress::Ticket;
use super::stats::{ConnectionStats, TargetStats};
use super::template::Event;
use crate::service::Twins;
use axum::http::{header, HeaderValue, Method, Request, StatusCode};
use bytes::Bytes;
use ferry_routes::endpoints::http::{Body, Connection, Connector, Tls};
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
    body: Bytes,
    owed: Option<Owed>,
    /// Settles the event once every request made of it is done.
    _ticket: Option<Ticket>,
}

/// Starts the connection's tasks; aborting the handles stops it.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    http: Arc<HttpPush>,
    stats: Arc<ConnectionStats>,
    events: Option<Feed>,
) -> Vec<AbortHandle> {
    let Some(events) = events else { return Vec::new() };
    let (queue, waiting) = mpsc::channel(QUEUE);
    let waiting = Arc::new(Mutex::new(waiting));
    let feed = feed(twins.clone(), spec, http.clone(), stats.clone(), events, queue);
    let mut tasks = vec![tokio::spawn(feed).abort_handle()];
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
        let targets = spec.targets.iter().zip(&http.requests);
        for (index, (target, request)) in targets.enumerate() {
            let figures = &stats.targets[index];
            let Some((envelope, owed)) = target.outgoing(&twins, &event).await else {
                figures.filtered.inc();
                continue;
            };
            let path = request.path.render(&Event { topic: &envelope.topic });
            let push = Push {
                target: index,
                method: request.method.clone(),
                path: format!("{}{path}", http.receiver.base_path),
                body: Bytes::from(envelope.to_bytes()),
                owed,
                _ticket: ticket.clone(),
            };
            figures.dispatched.inc();
            if queue.send(push).await.is_err() {
                return;
            }
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
        let Some(mut push) = waiting.lock().await.recv().await else { return };
        let figures = &stats.targets[push.target];
        let (status, payload) = deliver(&mut connection, receiver, &push, figures, &stats).await;
        if let Some(owed) = push.owed.take() {
            owed.settle(&twins, status, payload);
        }
    }
}

/// Sends one request until it is answered for good or out of tries;
/// returns the final answer's status and body as an acknowledgement
/// carries them (503 and the failure for no answer).
async fn deliver(
    connection: &mut Connection,
    receiver: &Receiver,
    push: &Push,
    figures: &TargetStats,
    stats: &ConnectionStats,
) -> (u16, Option<Value>) {
    let mut pause = FIRST_PAUSE;
    let mut last = (503, None);
    for attempt in 1..=ATTEMPTS {
        let outcome =
            tokio::time::timeout(REQUEST_TIMEOUT, connection.exchange(request(receiver, push)))
                .await;
        let failure = match outcome {
            Ok(Ok(answer)) if answer.status.is_success() => {
                figures.published.inc();
                stats.set_success();
                return (answer.status.as_u16(), payload(&answer.body_head));
            }
            Ok(Ok(answer)) if !retried(answer.status) => {
                figures.failed.inc();
                stats.set_failure(format!(
                    "{} {} answered {}",
                    push.method, push.path, answer.status
                ));
                return (answer.status.as_u16(), payload(&answer.body_head));
            }
            Ok(Ok(answer)) => {
                last = (answer.status.as_u16(), payload(&answer.body_head));
                format!("{} {} answered {}", push.method, push.path, answer.status)
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {REQUEST_TIMEOUT:?}"),
        };
        if last.1.is_none() {
            last.1 = Some(Value::String(failure.clone()));
        }
        stats.set_failure(failure);
        if attempt < ATTEMPTS {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LAST_PAUSE);
        }
    }
    figures.failed.inc();
    last
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
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(crate::protocol::DITTO_CONTENT_TYPE),
    );
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
    request
}
