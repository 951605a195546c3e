//! The running routes: the route table installed in the broker, and one
//! flow (`flow.rs`) per configured endpoint. Applying a new configuration
//! (at start, and on reload) builds every endpoint first, so one bad
//! setting changes nothing, then restarts only the endpoints whose settings
//! changed. A removed endpoint's queue stays in the durable log.

use crate::config::{EndpointConfig, EndpointKind, RoutesConfig};
use crate::endpoints::http::HttpSink;
#[cfg(feature = "kafka")]
use crate::endpoints::kafka::KafkaSink;
use crate::endpoints::mqtt::MqttSink;
use crate::endpoints::topic::TopicSink;
use crate::flow;
use crate::stats::{EndpointFigures, EndpointStats};
use crate::table::RouteTable;
use ferry_broker::endpoint::EndpointQueue;
use ferry_broker::routing::{EndpointCap, PRIORITIES};
use ferry_broker::Broker;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Messages of a removed endpoint's queue looked at per sweep.
const ORPHAN_SWEEP: usize = 4096;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct RoutesService {
    broker: Arc<Broker>,
    running: BTreeMap<String, RunningEndpoint>,
    /// Every endpoint's figures since start, kept across reloads (a
    /// counter that restarts at a reload would read as a reset).
    stats: BTreeMap<String, Arc<EndpointStats>>,
    /// Messages no route took, with `count_unrouted`.
    unrouted: Arc<AtomicU64>,
    /// Each endpoint's pause (the admin API's), kept across reloads like
    /// its figures: an operator who paused an endpoint resumes it.
    paused: BTreeMap<String, watch::Sender<bool>>,
}

struct RunningEndpoint {
    config: EndpointConfig,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// An endpoint's state, for logs, `$SYS` and the admin API.
#[derive(Debug, Clone)]
pub struct EndpointStatus {
    pub name: String,
    /// False for a queue left by an endpoint no longer configured.
    pub configured: bool,
    /// Paused by an operator: it sends nothing until resumed.
    pub paused: bool,
    pub figures: EndpointFigures,
    /// Messages queued, by priority.
    pub queued: [usize; PRIORITIES],
    /// The log bytes they hold (what `max_bytes` caps).
    pub queued_bytes: u64,
    /// How long the oldest queued message has waited.
    pub oldest: Option<Duration>,
    /// For its histograms; `None` for a queue no endpoint has had since
    /// start.
    pub(crate) stats: Option<Arc<EndpointStats>>,
}

#[derive(Debug, thiserror::Error)]
pub enum RoutesError {
    #[error("routes need durability: routed messages wait in the durable log ([durability] enabled = true)")]
    NoDurability,
    #[error("endpoint {endpoint:?}: {message}")]
    Endpoint { endpoint: String, message: String },
}

/// A sink built and ready to run.
enum Built {
    Mqtt(Box<MqttSink>),
    Topic(TopicSink),
    /// Boxed: its headers and TLS settings make it many times a
    /// `TopicSink`, and the enum only carries it to `tokio::spawn`.
    Http(Box<HttpSink>),
    #[cfg(feature = "kafka")]
    Kafka(Box<KafkaSink>),
}

impl RoutesService {
    /// Starts the endpoints and installs the routes. Must run inside a
    /// tokio runtime, which the endpoints' flows then run on.
    pub async fn start(
        broker: Arc<Broker>,
        routes: &RoutesConfig,
        endpoints: &BTreeMap<String, EndpointConfig>,
    ) -> Result<RoutesService, RoutesError> {
        let mut service = RoutesService {
            broker,
            running: BTreeMap::new(),
            stats: BTreeMap::new(),
            unrouted: Arc::default(),
            paused: BTreeMap::new(),
        };
        service.apply(routes, endpoints).await?;
        Ok(service)
    }

    /// Makes `routes` and `endpoints` the ones in force.
    pub async fn apply(
        &mut self,
        routes: &RoutesConfig,
        endpoints: &BTreeMap<String, EndpointConfig>,
    ) -> Result<(), RoutesError> {
        if endpoints.is_empty() && routes.routes.is_empty() && self.running.is_empty() {
            return Ok(());
        }
        let mut built = BTreeMap::new();
        for (name, config) in endpoints {
            if self.running.get(name).is_some_and(|running| running.config == *config) {
                continue;
            }
            if self.broker.endpoint_queue(name).is_none() {
                return Err(RoutesError::NoDurability);
            }
            built.insert(name.clone(), self.build(name, config)?);
        }
        let gone: Vec<String> = self
            .running
            .keys()
            .filter(|name| !endpoints.contains_key(*name) || built.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            if let Some(running) = self.running.remove(&name) {
                // Before its successor starts: two flows of one endpoint
                // would send the same messages twice.
                let _ = running.stop.send(true);
                let _ = running.task.await;
                if !endpoints.contains_key(&name) {
                    self.broker.set_endpoint_cap(&name, EndpointCap::NONE);
                    tracing::info!(endpoint = %name, "endpoint removed; its queue is kept");
                }
            }
        }
        for (name, sink) in built {
            let config = endpoints[&name].clone();
            let queue = self.broker.endpoint_queue(&name).ok_or(RoutesError::NoDurability)?;
            let stats = self.stats.entry(name.clone()).or_default().clone();
            let (stop, stopped) = watch::channel(false);
            let paused = self
                .paused
                .entry(name.clone())
                .or_insert_with(|| watch::channel(false).0)
                .subscribe();
            let flow = config.flow.clone();
            self.broker.set_endpoint_cap(
                &name,
                EndpointCap {
                    max_bytes: flow.max_bytes.0,
                    when_full: flow.when_full,
                    block_timeout: flow.block_timeout.0,
                },
            );
            let task = match sink {
                Built::Mqtt(sink) => {
                    tokio::spawn(flow::run(queue, *sink, flow, stats.clone(), stopped, paused))
                }
                Built::Topic(sink) => {
                    tokio::spawn(flow::run(queue, sink, flow, stats.clone(), stopped, paused))
                }
                Built::Http(sink) => {
                    tokio::spawn(flow::run(queue, *sink, flow, stats.clone(), stopped, paused))
                }
                #[cfg(feature = "kafka")]
                Built::Kafka(sink) => {
                    tokio::spawn(flow::run(queue, *sink, flow, stats.clone(), stopped, paused))
                }
            };
            self.running.insert(name, RunningEndpoint { config, stop, task });
        }
        let table = RouteTable::new(routes, &self.stats, &self.unrouted);
        self.broker.set_router(if table.is_empty() { None } else { Some(Arc::new(table)) });
        Ok(())
    }

    fn build(&self, name: &str, config: &EndpointConfig) -> Result<Built, RoutesError> {
        let failed = |message: String| RoutesError::Endpoint { endpoint: name.to_owned(), message };
        Ok(match &config.kind {
            EndpointKind::Mqtt(mqtt) => Built::Mqtt(Box::new(
                MqttSink::new(name, mqtt, self.broker.clone())
                    .map_err(|error| failed(error.to_string()))?,
            )),
            EndpointKind::Topic(topic) => {
                Built::Topic(TopicSink::new(self.broker.clone(), topic).map_err(failed)?)
            }
            EndpointKind::Http(http) => Built::Http(Box::new(
                HttpSink::new(name, http).map_err(|error| failed(error.to_string()))?,
            )),
            #[cfg(feature = "kafka")]
            EndpointKind::Kafka(kafka) => Built::Kafka(Box::new(
                KafkaSink::new(name, kafka).map_err(|error| failed(error.to_string()))?,
            )),
        })
    }

    /// Every endpoint that is configured, was since start, or still has a
    /// queue.
    pub fn status(&self) -> Vec<EndpointStatus> {
        let mut names: Vec<String> = self.stats.keys().cloned().collect();
        for name in self.broker.queued_endpoints() {
            if !self.stats.contains_key(&name) {
                names.push(name);
            }
        }
        names
            .into_iter()
            .map(|name| {
                let running = self.running.get(&name);
                let queue = self.broker.endpoint_queue(&name);
                let queued = queue.as_ref().map_or([0; PRIORITIES], EndpointQueue::backlog);
                let queued_bytes = queue.as_ref().map_or(0, EndpointQueue::bytes);
                let oldest = queue.as_ref().and_then(|queue| {
                    let offset = *queue.oldest(1).first()?;
                    Some(queue.read(offset).ok()?.message.received_at.elapsed())
                });
                let stats = self.stats.get(&name).cloned();
                EndpointStatus {
                    configured: running.is_some(),
                    paused: self.paused.get(&name).is_some_and(|paused| *paused.borrow()),
                    queued_bytes,
                    oldest,
                    figures: stats.as_ref().map(|stats| stats.figures()).unwrap_or_default(),
                    stats,
                    queued,
                    name,
                }
            })
            .collect()
    }

    /// Pauses (`true`) or resumes a configured endpoint's sending; false
    /// when no endpoint of that name is configured.
    pub fn set_paused(&self, name: &str, paused: bool) -> bool {
        if !self.running.contains_key(name) {
            return false;
        }
        self.paused.get(name).is_some_and(|pause| {
            pause.send_replace(paused);
            true
        })
    }

    /// Messages no route took, counted with `count_unrouted`.
    pub fn unrouted(&self) -> u64 {
        self.unrouted.load(Ordering::Relaxed)
    }

    /// Publishes `$SYS/broker/routes/{endpoint}/...` from `status`, and
    /// `$SYS/broker/routes/dropped/no_route`: what an operator without
    /// Prometheus sees of the edge.
    pub fn publish_sys(&self) {
        let unrouted = self.unrouted().to_string();
        ferry_broker::sys::publish_figure(&self.broker, "routes/dropped/no_route", unrouted);
        for status in self.status() {
            let figures = &status.figures;
            let mut values = vec![
                ("connected".to_string(), u8::from(figures.connected).to_string()),
                ("configured".to_string(), u8::from(status.configured).to_string()),
                ("queued/messages".to_string(), status.queued.iter().sum::<usize>().to_string()),
                ("queued/bytes".to_string(), status.queued_bytes.to_string()),
                ("sent".to_string(), figures.sent.to_string()),
                ("backoff ms".to_string(), figures.backoff.as_millis().to_string()),
            ];
            for (reason, count) in &figures.dropped {
                values.push((format!("dropped/{reason}"), count.to_string()));
            }
            for (name, value) in values {
                let name = format!("routes/{}/{name}", status.name);
                ferry_broker::sys::publish_figure(&self.broker, &name, value);
            }
        }
    }

    /// Drops the expired messages of queues no configured endpoint reads
    /// (left by removed endpoints): their log space comes back as their
    /// TTLs run out, without a purge. Looks at the oldest `ORPHAN_SWEEP`
    /// of each per call, so a call stays short.
    pub async fn sweep_orphans(&self) {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |now| u64::try_from(now.as_millis()).unwrap_or(u64::MAX));
        for name in self.broker.queued_endpoints() {
            if self.running.contains_key(&name) {
                continue;
            }
            let Some(queue) = self.broker.endpoint_queue(&name) else { continue };
            let (mut expired, mut bytes) = (Vec::new(), 0);
            for offset in queue.oldest(ORPHAN_SWEEP) {
                if let Ok(routed) = queue.read(offset) {
                    if routed.is_expired(now_ms) {
                        expired.push(offset);
                        bytes += routed.stored_bytes;
                    }
                }
            }
            if expired.is_empty() {
                continue;
            }
            let stats = self.stats.get(&name);
            if let Some(stats) = stats {
                stats.record_dropped("ttl", expired.len() as u64);
            }
            tracing::debug!(endpoint = %name, messages = expired.len(), "expired messages of a removed endpoint dropped");
            queue.done(expired, bytes);
            queue.settled().await;
        }
    }

    /// Stops every endpoint; what is in flight stays queued.
    pub async fn stop(self) {
        self.broker.set_router(None);
        for (_, running) in self.running {
            let _ = running.stop.send(true);
            let _ = running.task.await;
        }
    }
}
