//! `ferry bench twins`: Eclipse Ditto's benchmark shapes against Ditto's
//! HTTP API v2, on Ferry or on Ditto itself (../shared/seeds/ditto-benchmark.txt):
//!
//! - `create`: N things from the seed's coffee-brewer template, each with
//!   its inline `_policy` (so, as in Ditto's run, one policy per thing),
//!   as fast as the connections go; the creation rate is a figure too.
//! - `read`: `GET /api/2/things/{id}` of random things among the N.
//! - `search`: `GET /api/2/search/things?filter=eq(thingId,"{id}")`.
//! - `modify`: `PUT …/features/coffee-brewer/properties/brewed-coffees`
//!   of random things, which Ferry answers once the change is durable.
//! - `modify-mqtt`: the same change as a Ditto protocol command over MQTT,
//!   with an event sink (`twins/mqtt.rs`).
//! - `modify-kafka`: the same command produced to Kafka for the server's
//!   Kafka connection, events pushed over HTTP to a receiver
//!   (`twins/kafka.rs`): the seed's MODIFY_THINGS as Ditto ran it.
//! - `live`: `POST …/inbox/messages/bench` answered by simulated MQTT
//!   devices (`twins/live.rs`).
//! - `events`: `modify` with Server-Sent Events listeners
//!   (`twins/events.rs`), each of which should see every change.
//!
//! Each connection is one kept-alive HTTP/1.1 connection (hyper's client)
//! running requests one after the other: closed loop by default, or at a
//! fixed total `--rate`, where a request's latency counts from when it was
//! due, so a stalled server cannot hide the delay it caused.

use crate::histogram::{Latency, LatencySummary};
use crate::procstat::{Sample, Target};
use crate::BenchError;
use bytes::Bytes;
use clap::{Args, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// What each request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TwinsOp {
    Create,
    Read,
    Search,
    Modify,
    ModifyMqtt,
    ModifyKafka,
    Live,
    Events,
}

mod events;
mod kafka;
mod live;
mod mqtt;

pub use mqtt::EventFigures;

/// `ferry bench twins <op>`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct TwinsArgs {
    #[arg(value_enum)]
    pub op: TwinsOp,
    /// The HTTP listener serving `/api/2`.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Things the run works on: `create` makes them, the others pick among them.
    #[arg(long, default_value_t = 100_000)]
    pub things: u64,
    /// Thing ids are `<namespace>:<prefix><n>`.
    #[arg(long, default_value = "org.eclipse.ditto")]
    pub namespace: String,
    #[arg(long, default_value = "bench-thing-")]
    pub prefix: String,
    /// The MQTT listener, for `modify-mqtt`.
    #[arg(long, default_value = "127.0.0.1:1883")]
    pub mqtt: String,
    /// Kafka's bootstrap servers, for `modify-kafka`.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub kafka: String,
    /// The topic `modify-kafka` produces to and the server's Kafka
    /// connection reads.
    #[arg(long, default_value = "create-update")]
    pub topic: String,
    /// Server-Sent Events listeners of `events`.
    #[arg(long, default_value_t = 100)]
    pub listeners: usize,
    /// Simulated devices answering `live` messages over MQTT.
    #[arg(long, default_value_t = 8)]
    pub devices: usize,
    /// Kept-alive connections (MQTT devices for `modify-mqtt`), each with
    /// one request at a time.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Seconds to run read, search and modify for.
    #[arg(long, default_value_t = 30)]
    pub duration: u64,
    /// Requests per second in total (open loop); 0 for as fast as answered.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// HTTP Basic credentials; without them the request carries none
    /// (Ferry's loopback default answers as `nginx:ditto`).
    #[arg(long)]
    pub user: Option<String>,
    #[arg(long)]
    pub password: Option<String>,
    /// The server's pid, for its CPU time and memory before and after.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct TwinsReport {
    pub args: TwinsArgs,
    pub requests: u64,
    /// Answers by status code, failures to answer under 0.
    pub statuses: BTreeMap<u16, u64>,
    pub seconds: f64,
    pub per_second: f64,
    pub latency: LatencySummary,
    /// `modify-mqtt`, `modify-kafka`: the events the sink received.
    pub events: Option<EventFigures>,
    pub broker_before: Option<Sample>,
    pub broker_after: Option<Sample>,
}

/// `--mqtt` as an address.
fn mqtt_address(args: &TwinsArgs) -> Result<std::net::SocketAddr, BenchError> {
    args.mqtt
        .parse()
        .map_err(|_| BenchError::Options(format!("--mqtt {:?}: not an address", args.mqtt)))
}

/// A thing as the seed's implicit thing creation makes it.
fn template(thing_id: &str) -> serde_json::Value {
    let all = serde_json::json!({ "grant": ["READ", "WRITE"], "revoke": [] });
    serde_json::json!({
        "_policy": { "entries": { "DEVICE": {
            "subjects": { "nginx:ditto": { "type": "does-not-matter" } },
            "resources": { "policy:/": all, "thing:/": all, "message:/": all },
        } } },
        "definition": "org.eclipse.ditto:coffeebrewer:0.1.0",
        "attributes": { "location": "test location", "model": "Speaking coffee machine" },
        "features": { "coffee-brewer": { "properties": { "brewed-coffees": 0 } } },
        "thingId": thing_id,
    })
}

struct Server {
    authority: String,
    authorization: Option<String>,
}

pub async fn run(args: TwinsArgs) -> Result<TwinsReport, BenchError> {
    let authority = args
        .url
        .strip_prefix("http://")
        .ok_or_else(|| {
            BenchError::Options(format!("--url {:?}: only http:// is supported", args.url))
        })?
        .trim_end_matches('/')
        .to_owned();
    let authorization = args.user.as_ref().map(|user| {
        use base64::Engine;
        let pair = format!("{user}:{}", args.password.as_deref().unwrap_or(""));
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
    });
    let target = Arc::new(Server { authority, authorization });
    let broker = args.broker_pid.map(Target::Pid);
    let broker_before = broker.and_then(|pid| pid.sample().ok());
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.duration);
    let interval = (args.rate > 0)
        .then(|| Duration::from_secs_f64(args.connections as f64 / args.rate as f64));
    let (done, events) = if args.op == TwinsOp::ModifyMqtt {
        let (done, events) = mqtt::run(&args, deadline, interval).await?;
        (done, Some(events))
    } else if args.op == TwinsOp::ModifyKafka {
        let (done, events) = kafka::run(&args, &target, deadline, interval).await?;
        (done, Some(events))
    } else {
        let devices = match args.op {
            TwinsOp::Live => live::start(mqtt_address(&args)?, args.devices).await?,
            _ => Vec::new(),
        };
        let (stop_listeners, stopped) = tokio::sync::watch::channel(None);
        let listeners = match args.op {
            TwinsOp::Events => events::start(&target, args.listeners, started, stopped).await?,
            _ => Vec::new(),
        };
        let mut workers = Vec::with_capacity(args.connections);
        for worker in 0..args.connections {
            let (target, next, args) = (target.clone(), next.clone(), args.clone());
            let pace = Pace::new(interval, worker, args.connections);
            workers.push(tokio::spawn(async move {
                work(&target, &args, &next, deadline, pace, worker as u64, started).await
            }));
        }
        let mut done = Done { latency: Latency::new(), statuses: BTreeMap::new() };
        for worker in workers {
            done.merge(worker.await.map_err(|error| BenchError::Task(error.to_string()))??);
        }
        for device in devices {
            device.abort();
        }
        let events = if args.op == TwinsOp::Events {
            let expected = done.statuses.get(&204).copied().unwrap_or(0);
            let _ = stop_listeners.send(Some((expected, Instant::now() + mqtt::DRAIN)));
            Some(events::collect(listeners, expected).await?)
        } else {
            None
        };
        (done, events)
    };
    let Done { latency, statuses } = done;
    let seconds = started.elapsed().as_secs_f64();
    let requests = latency.len();
    let broker_after = broker.and_then(|pid| pid.sample().ok());
    Ok(TwinsReport {
        args,
        requests,
        statuses,
        seconds,
        per_second: requests as f64 / seconds,
        latency: latency.summary(),
        events,
        broker_before,
        broker_after,
    })
}

struct Done {
    latency: Latency,
    statuses: BTreeMap<u16, u64>,
}

impl Done {
    fn merge(&mut self, other: Done) {
        self.latency.merge(&other.latency);
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
    }
}

/// When each request of one connection is due: closed loop (now, when
/// the previous one is answered), or every `interval` from an offset
/// spreading the connections over it, so that a request's latency counts
/// from when it was due.
struct Pace {
    interval: Option<Duration>,
    due: Instant,
}

impl Pace {
    fn new(interval: Option<Duration>, worker: usize, workers: usize) -> Pace {
        let offset = interval.map(|i| i.mul_f64(worker as f64 / workers as f64));
        Pace { interval, due: Instant::now() + offset.unwrap_or_default() }
    }

    /// Waits until the next request is due; returns when that was.
    async fn next(&mut self) -> Instant {
        let Some(interval) = self.interval else { return Instant::now() };
        tokio::time::sleep_until(self.due.into()).await;
        let due = self.due;
        self.due += interval;
        due
    }
}

async fn work(
    target: &Server,
    args: &TwinsArgs,
    next: &AtomicU64,
    deadline: Instant,
    mut pace: Pace,
    worker: u64,
    clock: Instant,
) -> Result<Done, BenchError> {
    let mut sender = connect(&target.authority).await?;
    let mut done = Done { latency: Latency::new(), statuses: BTreeMap::new() };
    let mut random = Random::new(worker);
    loop {
        let n = match args.op {
            TwinsOp::Create => {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= args.things {
                    break;
                }
                n
            }
            _ => {
                if Instant::now() >= deadline {
                    break;
                }
                random.below(args.things)
            }
        };
        let due = pace.next().await;
        let id = format!("{}:{}{n}", args.namespace, args.prefix);
        // `events` sends the time as the value, for its listeners' latency.
        let value = if args.op == TwinsOp::Events { clock.elapsed().as_nanos() as u64 } else { n };
        let request = build(target, args.op, &id, value)?;
        let status = match send(&mut sender, request).await {
            Ok(status) => status.as_u16(),
            Err(_) => {
                sender = connect(&target.authority).await?;
                0
            }
        };
        done.latency.record_ns(due.elapsed().as_nanos() as u64);
        *done.statuses.entry(status).or_default() += 1;
    }
    Ok(done)
}

/// The request of `op` on thing `id`; `value` is what a write writes.
fn build(
    target: &Server,
    op: TwinsOp,
    id: &str,
    value: u64,
) -> Result<Request<Full<Bytes>>, BenchError> {
    let (method, path, body) = match op {
        TwinsOp::Create => {
            (Method::PUT, format!("/api/2/things/{id}"), Some(template(id).to_string()))
        }
        TwinsOp::Read => (Method::GET, format!("/api/2/things/{id}"), None),
        TwinsOp::Search => {
            (Method::GET, format!("/api/2/search/things?filter=eq(thingId,%22{id}%22)"), None)
        }
        TwinsOp::Live => (
            Method::POST,
            format!("/api/2/things/{id}/inbox/messages/{}?timeout=10s", live::SUBJECT),
            Some(format!("{{\"n\":{value}}}")),
        ),
        TwinsOp::Modify | TwinsOp::ModifyMqtt | TwinsOp::ModifyKafka | TwinsOp::Events => (
            Method::PUT,
            format!("/api/2/things/{id}/features/coffee-brewer/properties/brewed-coffees"),
            Some(value.to_string()),
        ),
    };
    let mut request =
        Request::builder().method(method).uri(path).header(hyper::header::HOST, &target.authority);
    if let Some(authorization) = &target.authorization {
        request = request.header(hyper::header::AUTHORIZATION, authorization);
    }
    if body.is_some() {
        request = request.header(hyper::header::CONTENT_TYPE, "application/json");
    }
    request
        .body(Full::new(body.map(Bytes::from).unwrap_or_default()))
        .map_err(|error| BenchError::Options(error.to_string()))
}

async fn connect(authority: &str) -> Result<SendRequest<Full<Bytes>>, BenchError> {
    let stream = TcpStream::connect(authority)
        .await
        .map_err(|source| BenchError::Connect { broker: authority.to_owned(), source })?;
    stream.set_nodelay(true).ok();
    let (sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| {
            BenchError::Io { client: authority.to_owned(), source: std::io::Error::other(error) }
        })?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<StatusCode, hyper::Error> {
    let response = sender.send_request(request).await?;
    let status = response.status();
    // Read the body whole: the connection is reused for the next request.
    response.into_body().collect().await?;
    Ok(status)
}

/// xorshift64*: which thing each request picks, cheap and the same for a
/// given worker from run to run.
struct Random(u64);

impl Random {
    fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound.max(1)
    }
}

impl fmt::Display for TwinsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.latency;
        writeln!(
            f,
            "twins {:?}: {} requests in {:.1} s: {:.0}/s over {} connections",
            self.args.op, self.requests, self.seconds, self.per_second, self.args.connections
        )?;
        let statuses: Vec<String> =
            self.statuses.iter().map(|(status, count)| format!("{status}: {count}")).collect();
        writeln!(f, "  statuses          {} (0: no answer)", statuses.join(", "))?;
        writeln!(
            f,
            "  latency (µs)      p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}",
            l.p50_us, l.p90_us, l.p99_us, l.p99_9_us, l.max_us
        )?;
        if let Some(events) = &self.events {
            let e = &events.latency;
            writeln!(f, "  events            {} of {} received", events.received, events.expected)?;
            writeln!(
                f,
                "  command → event   p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0} (µs)",
                e.p50_us, e.p90_us, e.p99_us, e.p99_9_us, e.max_us
            )?;
        }
        if let (Some(before), Some(after)) = (self.broker_before, self.broker_after) {
            let cpu = after.cpu_seconds - before.cpu_seconds;
            writeln!(
                f,
                "  server            {:.2} s CPU ({:.1} µs/request), RSS {:.1} → {:.1} MiB",
                cpu,
                cpu * 1e6 / self.requests.max(1) as f64,
                before.rss_bytes as f64 / 1048576.0,
                after.rss_bytes as f64 / 1048576.0
            )?;
        }
        Ok(())
    }
}
