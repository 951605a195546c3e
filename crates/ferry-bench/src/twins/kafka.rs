//! `ferry bench twins modify-kafka`: the seed's MODIFY_THINGS as Ditto ran
//! it. The run stores two connections on the server: a Kafka source
//! reading Ditto protocol `modify` commands from `--topic` (qos 1, the
//! seed's `{{ header:device_id }}` enforcement) and an HTTP push
//! connection sending every `modified` event to a receiver this command
//! runs (the seed's MMock, answering 204). One producer writes the
//! commands at `--rate` (as fast as librdkafka takes them without), each
//! with the thing's id as its `device_id` header.
//!
//! Two latencies: command produced → acknowledged by Kafka, and command
//! produced → its event at the receiver (end to end). The command's value
//! is the time it was produced, so the event carries its own start.

use super::mqtt::{EventFigures, DRAIN};
use super::{Done, Pace, Random, Server, TwinsArgs};
use crate::histogram::Latency;
use crate::BenchError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Delivery reports awaited at once: the producer's records in flight.
const REPORTS: usize = 100_000;

pub(super) async fn run(
    args: &TwinsArgs,
    target: &Server,
    deadline: Instant,
    interval: Option<Duration>,
) -> Result<(Done, EventFigures), BenchError> {
    let clock = Instant::now();
    // This run's commands' correlation ids begin with it: a backlog an
    // earlier run left in the topic may still be applied while this one
    // runs, and its events must not count here.
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let run_id = format!("bench-{:x}", started.unwrap_or_default().as_nanos());
    let receiver = Arc::new(Receiver { run_id: run_id.clone(), ..Receiver::default() });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|source| BenchError::Connect { broker: "127.0.0.1:0".into(), source })?;
    let port = listener.local_addr().map_err(io("receiver"))?.port();
    let serving = tokio::spawn(serve(listener, receiver.clone(), clock));
    configure(args, target, port).await?;

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &args.kafka)
        .set("linger.ms", "5")
        .set("enable.idempotence", "true")
        .create()
        .map_err(|error| BenchError::Options(format!("--kafka {}: {error}", args.kafka)))?;
    let (reports, waiting) = mpsc::channel::<(Instant, DeliveryFuture)>(REPORTS);
    let counting = tokio::spawn(count(waiting));
    // One producer paced at the whole rate: librdkafka batches the records.
    let mut pace = Pace::new(interval.map(|i| i / args.connections as u32), 0, 1);
    let mut random = Random::new(1);
    while Instant::now() < deadline {
        let due = pace.next().await;
        let n = random.below(args.things);
        let name = format!("{}{n}", args.prefix);
        let command = serde_json::json!({
            "topic": format!("{}/{name}/things/twin/commands/modify", args.namespace),
            "headers": { "response-required": false, "correlation-id": format!("{run_id}-{n}") },
            "path": "features/coffee-brewer/properties/brewed-coffees",
            "value": clock.elapsed().as_nanos() as u64,
        })
        .to_string();
        let device_id = format!("{}:{name}", args.namespace);
        let headers =
            OwnedHeaders::new().insert(Header { key: "device_id", value: Some(&device_id) });
        let record = FutureRecord::<(), _>::to(&args.topic).payload(&command).headers(headers);
        match producer.send_result(record) {
            Ok(delivery) => {
                if reports.send((due, delivery)).await.is_err() {
                    break;
                }
            }
            // The producer's queue is full: the cluster is behind.
            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
    drop(reports);
    let done = counting.await.map_err(|error| BenchError::Task(error.to_string()))?;
    let expected = done.statuses.get(&204).copied().unwrap_or(0);
    let until = Instant::now() + DRAIN;
    while receiver.received.load(Ordering::Relaxed) < expected && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    serving.abort();
    let received = receiver.received.load(Ordering::Relaxed);
    let latency =
        receiver.latency.lock().map_err(|_| BenchError::Task("poisoned".into()))?.summary();
    Ok((done, EventFigures { received, expected, latency }))
}

/// Kafka's acknowledgements: 204 for a record it took, 0 for one it did
/// not, each with its latency from when it was due.
async fn count(mut waiting: mpsc::Receiver<(Instant, DeliveryFuture)>) -> Done {
    let mut done = Done { latency: Latency::new(), statuses: BTreeMap::new() };
    while let Some((due, delivery)) = waiting.recv().await {
        let status = match delivery.await {
            Ok(Ok(_)) => 204,
            _ => 0,
        };
        done.latency.record_ns(due.elapsed().as_nanos() as u64);
        *done.statuses.entry(status).or_default() += 1;
    }
    done
}

/// Stores the two connections (replacing those of an earlier run).
async fn configure(args: &TwinsArgs, target: &Server, port: u16) -> Result<(), BenchError> {
    let push = serde_json::json!({
        "connectionType": "http-push", "connectionStatus": "open",
        "uri": format!("http://127.0.0.1:{port}"), "sources": [],
        "targets": [{"address": "POST:/{{ thing:id }}",
                     "topics": ["_/_/things/twin/events?filter=eq(topic:action,'modified')"],
                     "authorizationContext": ["nginx:ditto"], "headerMapping": {}}],
        "specificConfig": {"parallelism": "8"}
    });
    let source = serde_json::json!({
        "connectionType": "kafka", "connectionStatus": "open",
        "uri": format!("tcp://{}", args.kafka),
        "sources": [{"addresses": [args.topic], "consumerCount": 1, "qos": 1,
                     "authorizationContext": ["nginx:ditto"],
                     "enforcement": {"input": "{{ header:device_id }}", "filters": ["{{ entity:id }}"]},
                     "headerMapping": {}, "payloadMapping": ["ditto"], "replyTarget": {"enabled": false}}],
        "targets": [],
        "specificConfig": {"bootstrapServers": args.kafka}
    });
    for (id, connection) in [("bench-push", push), ("bench-kafka", source)] {
        let mut sender = super::connect(&target.authority).await?;
        let mut request = Request::builder()
            .method(Method::PUT)
            .uri(format!("/api/2/connections/{id}"))
            .header(hyper::header::HOST, &target.authority)
            .header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(authorization) = &target.authorization {
            request = request.header(hyper::header::AUTHORIZATION, authorization);
        }
        let request = request
            .body(Full::new(Bytes::from(connection.to_string())))
            .map_err(|error| BenchError::Options(error.to_string()))?;
        let status = super::send(&mut sender, request).await.map_err(|error| BenchError::Io {
            client: target.authority.clone(),
            source: std::io::Error::other(error),
        })?;
        if !status.is_success() {
            return Err(BenchError::Options(format!("PUT /api/2/connections/{id}: {status}")));
        }
    }
    Ok(())
}

/// What the receiver saw.
#[derive(Default)]
struct Receiver {
    /// What this run's correlation ids begin with.
    run_id: String,
    received: AtomicU64,
    latency: std::sync::Mutex<Latency>,
}

/// The HTTP push receiver: every request is an event, answered 204.
async fn serve(listener: tokio::net::TcpListener, receiver: Arc<Receiver>, clock: Instant) {
    while let Ok((stream, _)) = listener.accept().await {
        stream.set_nodelay(true).ok();
        let receiver = receiver.clone();
        let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            let receiver = receiver.clone();
            async move {
                let body = request.into_body().collect().await?.to_bytes();
                let sent_at = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .filter(|event| {
                        event["headers"]["correlation-id"]
                            .as_str()
                            .is_some_and(|id| id.starts_with(&receiver.run_id))
                    })
                    .and_then(|event| event.get("value")?.as_u64());
                if let Some(sent_at) = sent_at {
                    receiver.received.fetch_add(1, Ordering::Relaxed);
                    let latency = (clock.elapsed().as_nanos() as u64).saturating_sub(sent_at);
                    if let Ok(mut histogram) = receiver.latency.lock() {
                        histogram.record_ns(latency);
                    }
                }
                let mut response = Response::new(Full::new(Bytes::new()));
                *response.status_mut() = StatusCode::NO_CONTENT;
                Ok::<_, hyper::Error>(response)
            }
        });
        tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service),
        );
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> BenchError {
    move |source| BenchError::Io { client: what.to_owned(), source }
}
