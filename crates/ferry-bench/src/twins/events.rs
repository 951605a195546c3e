//! The listeners of `ferry bench twins events`: Server-Sent Events of
//! every thing's changes (`GET /api/2/things`, `Accept:
//! text/event-stream`), each listener on its own connection, while the
//! senders modify things over HTTP with the time they were sent as the
//! value. Each event's latency is from that time to its arrival at one
//! listener; every listener should see every change.

use super::mqtt::EventFigures;
use super::Server;
use crate::histogram::Latency;
use crate::BenchError;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The modified property, as it appears in an event's partial thing.
const PROPERTY: [&str; 4] = ["features", "coffee-brewer", "properties", "brewed-coffees"];

type Listener = JoinHandle<Result<(u64, Latency), BenchError>>;

/// Opens `count` streams; each counts until `stop` says how many events
/// each should have seen, or the time to give up.
pub(super) async fn start(
    target: &Server,
    count: usize,
    clock: Instant,
    stop: watch::Receiver<Option<(u64, Instant)>>,
) -> Result<Vec<Listener>, BenchError> {
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        let body = open(target).await?;
        listeners.push(tokio::spawn(listen(body, clock, stop.clone())));
    }
    Ok(listeners)
}

/// What the listeners saw, given that each should have seen `expected`.
pub(super) async fn collect(
    listeners: Vec<Listener>,
    expected: u64,
) -> Result<EventFigures, BenchError> {
    let (mut received, mut latency) = (0, Latency::new());
    let streams = listeners.len() as u64;
    for listener in listeners {
        let (count, seen) =
            listener.await.map_err(|error| BenchError::Task(error.to_string()))??;
        received += count;
        latency.merge(&seen);
    }
    Ok(EventFigures { received, expected: expected * streams, latency: latency.summary() })
}

async fn open(target: &Server) -> Result<hyper::body::Incoming, BenchError> {
    let failed = |error: String| BenchError::Io {
        client: target.authority.clone(),
        source: std::io::Error::other(error),
    };
    let stream = TcpStream::connect(&target.authority)
        .await
        .map_err(|source| BenchError::Connect { broker: target.authority.clone(), source })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| failed(error.to_string()))?;
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(Method::GET)
        .uri("/api/2/things")
        .header(hyper::header::HOST, &target.authority)
        .header(hyper::header::ACCEPT, "text/event-stream");
    if let Some(authorization) = &target.authorization {
        request = request.header(hyper::header::AUTHORIZATION, authorization);
    }
    let request = request.body(Empty::<Bytes>::new()).map_err(|error| failed(error.to_string()))?;
    let response = sender.send_request(request).await.map_err(|error| failed(error.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("the event stream was answered {}", response.status())));
    }
    Ok(response.into_body())
}

async fn listen(
    mut body: hyper::body::Incoming,
    clock: Instant,
    mut stop: watch::Receiver<Option<(u64, Instant)>>,
) -> Result<(u64, Latency), BenchError> {
    let mut latency = Latency::new();
    let mut received = 0u64;
    let mut line = Vec::new();
    loop {
        if let Some((expected, until)) = *stop.borrow() {
            if received >= expected || Instant::now() >= until {
                break;
            }
        }
        let frame = tokio::select! {
            frame = body.frame() => frame,
            _ = stop.changed() => continue,
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => continue,
        };
        let Some(Ok(frame)) = frame else { break };
        let Ok(data) = frame.into_data() else { continue };
        for &byte in data.iter() {
            if byte != b'\n' {
                line.push(byte);
                continue;
            }
            if let Some(sent_at) = line.strip_prefix(b"data:").and_then(sent_at) {
                received += 1;
                latency.record_ns((clock.elapsed().as_nanos() as u64).saturating_sub(sent_at));
            }
            line.clear();
        }
    }
    Ok((received, latency))
}

/// The send time a `data:` line's partial thing carries, if it is one of
/// the bench's changes.
fn sent_at(data: &[u8]) -> Option<u64> {
    let thing: serde_json::Value = serde_json::from_slice(data).ok()?;
    PROPERTY.iter().try_fold(&thing, |value, key| value.get(key))?.as_u64()
}
