//! A `kafka` connection's targets: each twin event its topics select, and
//! its `authorizationContext` may read, produced as one Ditto protocol
//! JSON record to the target's topic (keyed by its address's key, e.g.
//! `events/{{ thing:id }}`, so one thing's events stay in order on one
//! partition).
//!
//! The producer is the edge Kafka endpoint's (`ferry_routes`): acks=all,
//! idempotent, lz4, its queue bounded. A feed task filters and enqueues;
//! a report task awaits each delivery report in order and counts it
//! published or failed. Between them at most `REPORTS` records wait: a
//! cluster that stalls holds the feed back, and a feed that falls behind
//! the change feed counts what it missed, rather than buffering.

use super::super::model::ConnectionSpec;
use super::super::stats::ConnectionStats;
use super::super::template::Event;
use super::spec::producer_config;
use super::KafkaSpec;
use crate::service::{next_event, Twins};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Delivery reports awaited at once: about a second of events at the
/// rates Ferry applies modifies, within the producer's own queue bound
/// (20,000 records).
const REPORTS: usize = 10_000;

const DITTO_JSON: &str = "application/vnd.eclipse.ditto+json";

/// Starts the feed and report tasks, if the connection has targets.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    kafka: Arc<KafkaSpec>,
    stats: Arc<ConnectionStats>,
) -> Vec<AbortHandle> {
    if spec.targets.is_empty() {
        return Vec::new();
    }
    let mut config = producer_config(&kafka.bootstrap_servers, &kafka.client_id).client_config("");
    config.set_log_level(RDKafkaLogLevel::Warning);
    let producer: FutureProducer = match config.create() {
        Ok(producer) => producer,
        Err(error) => {
            stats.set_failure(format!("cannot make the Kafka producer: {error}"));
            return Vec::new();
        }
    };
    let (reports, waiting) = mpsc::channel(REPORTS);
    vec![
        tokio::spawn(feed(twins, spec, kafka, stats.clone(), producer, reports)).abort_handle(),
        tokio::spawn(count(stats, waiting)).abort_handle(),
    ]
}

async fn feed(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    kafka: Arc<KafkaSpec>,
    stats: Arc<ConnectionStats>,
    producer: FutureProducer,
    reports: mpsc::Sender<(usize, DeliveryFuture)>,
) {
    let mut events = twins.subscribe();
    while let Some(event) = next_event(&mut events, &stats.missed, &spec.id).await {
        let targets = spec.targets.iter().zip(&kafka.destinations);
        for (index, (target, destination)) in targets.enumerate() {
            let figures = &stats.targets[index];
            let Some(envelope) = target.envelope_for(&twins, &event).await else {
                figures.filtered.inc();
                continue;
            };
            figures.dispatched.inc();
            let key =
                destination.key.as_ref().map(|key| key.render(&Event { topic: &envelope.topic }));
            let payload = envelope.to_bytes();
            let headers = rdkafka::message::OwnedHeaders::new()
                .insert(rdkafka::message::Header { key: "content-type", value: Some(DITTO_JSON) });
            let mut record =
                FutureRecord::to(&destination.topic).payload(&payload).headers(headers);
            if let Some(key) = key.as_deref() {
                record = record.key(key);
            }
            match producer.send_result(record) {
                Ok(delivery) => {
                    if reports.send((index, delivery)).await.is_err() {
                        return;
                    }
                }
                // The producer's queue is full (the cluster is down or
                // slow) or the record too large: dropped and counted.
                Err((error, _)) => {
                    figures.dropped.inc();
                    stats.set_failure(format!("kafka {}: {error}", destination.topic));
                }
            }
        }
    }
}

async fn count(stats: Arc<ConnectionStats>, mut waiting: mpsc::Receiver<(usize, DeliveryFuture)>) {
    while let Some((index, delivery)) = waiting.recv().await {
        let figures = &stats.targets[index];
        match delivery.await {
            Ok(Ok(_)) => {
                figures.published.inc();
                stats.set_success();
            }
            Ok(Err((error, _))) => {
                figures.failed.inc();
                stats.set_failure(format!("kafka: {error}"));
            }
            // The producer went before its report (the connection stops).
            Err(_canceled) => figures.failed.inc(),
        }
    }
}
