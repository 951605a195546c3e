//! A `kafka` connection's targets: each twin event its topics select, and
//! its `authorizationContext` may read, produced as one Ditto protocol
//! JSON record to the target's topic (keyed by its address's key, e.g.
//! `events/{{ thing:id }}`, so one thing's events stay in order on one
//! partition).
//!
//! The producer is the edge Kafka endpoint's (`ferry_routes`): acks=all,
//! idempotent, lz4, its queue bounded. A feed task filters and enqueues;
//! a report task awaits each delivery report in order and counts it
//! published or failed. Between them at most `REPORTS` records wait, and
//! the producer's queue is bounded: a cluster that stalls holds the feed
//! back, and a feed that falls behind reads on from the event journal
//! (`feed.rs`) rather than buffering. An event is settled
//! (`progress.rs`) with its delivery reports; a restart sends again what
//! was not.
//!
//! A target with an `issuedAcknowledgementLabel` acknowledges each event
//! whose command requested that label once Kafka acknowledged the record
//! (204), or with 503 and the error when it could not be produced.

use super::super::feed::Feed;
use super::super::live::LiveSignal;
use super::super::model::{ConnectionSpec, Owed};
use super::super::outgoing::{self, Outgoing};
use super::super::progress::Ticket;
use super::super::stats::ConnectionStats;
use super::KafkaSpec;
use super::Producer;
use crate::protocol::Envelope;
use crate::service::Twins;
use ferry_routes::endpoints::kafka::LastReason;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureRecord};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Delivery reports awaited at once: about a second of events at the
/// rates Ferry applies modifies, within the producer's own queue bound
/// (20,000 records).
const REPORTS: usize = 10_000;

/// How long the feed waits before offering a record again to a producer
/// whose queue is full.
const QUEUE_FULL_PAUSE: Duration = Duration::from_millis(10);

/// Starts the feed and report tasks of the connection's targets, and
/// the one producing their live signals.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    kafka: Arc<KafkaSpec>,
    stats: Arc<ConnectionStats>,
    producer: Producer,
    reasons: LastReason,
    events: Feed,
) -> Vec<AbortHandle> {
    let (reports, waiting) = mpsc::channel(REPORTS);
    let (mut tasks, signals) = super::super::live::signals(&twins, &spec);
    let out = Arc::new(Out {
        twins: twins.clone(),
        kafka,
        stats: stats.clone(),
        producer,
        reasons: reasons.clone(),
        reports,
    });
    tasks.push(tokio::spawn(feed_live(out.clone(), signals)).abort_handle());
    tasks.push(tokio::spawn(feed(spec, out, events)).abort_handle());
    tasks.push(tokio::spawn(count(twins, stats, waiting, reasons)).abort_handle());
    tasks
}

/// Where the targets' records go, and what follows them there.
struct Out {
    twins: Arc<Twins>,
    kafka: Arc<KafkaSpec>,
    stats: Arc<ConnectionStats>,
    producer: Producer,
    reasons: LastReason,
    reports: mpsc::Sender<Report>,
}

async fn feed(spec: Arc<ConnectionSpec>, out: Arc<Out>, mut events: Feed) {
    while let Some((event, ticket)) = events.next(&out.stats, &spec.id).await {
        for Outgoing { target, envelope, owed } in
            outgoing::of_event(&out.twins, &spec, &out.stats, &event).await
        {
            if !out.produce(target, &envelope, owed, ticket.clone()).await {
                return;
            }
        }
    }
}

/// Produces each live signal to its target's topic; the device answers
/// through a source.
async fn feed_live(out: Arc<Out>, mut signals: mpsc::Receiver<LiveSignal>) {
    while let Some(LiveSignal { target, envelope, owed }) = signals.recv().await {
        if !out.produce(target, &envelope, owed, None).await {
            return;
        }
    }
}

impl Out {
    /// Produces `envelope` as target `index`'s record, counted as
    /// dispatched, its delivery report handed to `count`; `false` once
    /// that has stopped.
    async fn produce(
        &self,
        index: usize,
        envelope: &Envelope,
        owed: Option<Owed>,
        ticket: Option<Ticket>,
    ) -> bool {
        let figures = &self.stats.targets[index];
        let destination = &self.kafka.destinations[index];
        figures.dispatched.inc();
        let mut owed = owed;
        let key = match destination.key.as_ref() {
            None => None,
            Some(key) => {
                let rendered = key.render(envelope);
                match outgoing::unless_withheld(&self.twins, figures, &mut owed, rendered) {
                    Some(key) => Some(key),
                    None => return true,
                }
            }
        };
        let payload = envelope.to_bytes();
        let mut headers = ditto_headers(envelope.correlation_id().as_deref());
        for (key, value) in destination.headers.for_signal(envelope) {
            headers = headers.insert(Header { key: &key, value: Some(&value) });
        }
        let mut record = FutureRecord::to(&destination.topic).payload(&payload).headers(headers);
        if let Some(key) = key.as_deref() {
            record = record.key(key);
        }
        let sent = loop {
            match self.producer.send_result(record) {
                // The cluster is down or slow: the feed waits for room.
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    tokio::time::sleep(QUEUE_FULL_PAUSE).await;
                }
                sent => break sent,
            }
        };
        match sent {
            Ok(delivery) => {
                let report = Report { target: index, delivery, owed, _ticket: ticket };
                self.reports.send(report).await.is_ok()
            }
            // The record is refused for good (too large, say): dropped
            // and counted.
            Err((error, _)) => {
                figures.dropped.inc();
                let failure =
                    format!("kafka {}: {}", destination.topic, self.reasons.explain(&error));
                if let Some(owed) = owed {
                    owed.settle(&self.twins, 503, Some(failure.clone().into()));
                }
                self.stats.set_failure(failure);
                true
            }
        }
    }
}

/// A Ditto protocol record's headers: its content type, and the
/// correlation id of an answer.
pub(super) fn ditto_headers(correlation_id: Option<&str>) -> OwnedHeaders {
    let headers = OwnedHeaders::new()
        .insert(Header { key: "content-type", value: Some(crate::protocol::DITTO_CONTENT_TYPE) });
    match correlation_id {
        Some(id) => headers.insert(Header { key: "correlation-id", value: Some(id) }),
        None => headers,
    }
}

/// A record on its way, and what its delivery report settles.
struct Report {
    target: usize,
    delivery: DeliveryFuture,
    owed: Option<Owed>,
    /// Settles the event once its last record's report is in.
    _ticket: Option<Ticket>,
}

async fn count(
    twins: Arc<Twins>,
    stats: Arc<ConnectionStats>,
    mut waiting: mpsc::Receiver<Report>,
    reasons: LastReason,
) {
    while let Some(Report { target, delivery, owed, _ticket }) = waiting.recv().await {
        let figures = &stats.targets[target];
        let (status, failure) = match delivery.await {
            Ok(Ok(_)) => {
                figures.published.inc();
                stats.set_success();
                (204, None)
            }
            Ok(Err((error, _))) => {
                figures.failed.inc();
                let failure = format!("kafka: {}", reasons.explain(&error));
                stats.set_failure(failure.clone());
                (503, Some(failure))
            }
            // The producer went before its report (the connection stops).
            Err(_canceled) => {
                figures.failed.inc();
                (503, Some("the connection stopped before Kafka answered".to_owned()))
            }
        };
        if let Some(owed) = owed {
            owed.settle(&twins, status, failure.map(Into::into));
        }
    }
}
