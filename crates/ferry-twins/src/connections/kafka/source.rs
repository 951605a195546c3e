//! One consumer of a Kafka source: records in, each one Ditto protocol
//! command applied (`inbound.rs`), offsets committed behind them.
//!
//! Commands are applied side by side in a window (`window.rs`): results
//! in the order the records came, so an offset is stored only once every
//! record before it is done, and one entity's commands one at a time, so
//! a thing's modifies land in the order they were produced.
//!
//! With a `replyTarget` each answer (a response when the command asked
//! for one, an error response) is produced to the topic its address names
//! for the message, `topic` or `topic/key` as a target's; a live
//! message's answer when its device responds or its call times out. The
//! consumer does not wait for Kafka's acknowledgement of an answer: a
//! failed one is the connection's failure.
//!
//! With `qos: 1` (at least once) an offset is stored only after its
//! command was applied (committed to the store, Ditto's `twin-persisted`)
//! or refused for good; a command that failed for now (the store
//! unavailable) is tried again, with a growing pause, until it is one or
//! the other. librdkafka commits the stored offsets every
//! `COMMIT_INTERVAL` and when the consumer closes. A crash re-reads at
//! most what was applied since the last commit: modifies applied twice,
//! nothing lost. With `qos: 0` librdkafka stores each offset as the
//! record is handed over: what is in flight at a crash is lost.

use super::super::inbound::{self, Answer, Outcome};
use super::super::placeholder::Received;
use super::super::source::{AnswerKinds, SourceSpec};
use super::super::stats::{ConnectionStats, SourceStats};
use super::super::window::{entity_of, Window};
use super::target::ditto_headers;
use super::KafkaSpec;
use super::Producer;
use crate::protocol::search::Searches;
use crate::protocol::Envelope;
use crate::service::Twins;
use ferry_routes::endpoints::kafka::{KafkaContext, LastReason};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::producer::FutureRecord;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::MissedTickBehavior;

/// A source's consumer, whose errors its context explains.
type KafkaConsumer = StreamConsumer<KafkaContext>;

/// librdkafka's prefetch queue per consumer, in KiB (its default is
/// 64 MiB per partition): about 8,000 records of a kilobyte, seconds of
/// work at the rates a consumer applies.
const PREFETCH_KIB: &str = "8192";

/// How often stored offsets are committed: what a crash may re-read.
const COMMIT_INTERVAL_MS: &str = "500";

/// Pause after the consumer reports an error (the cluster unreachable),
/// so a dead cluster costs a loop a second, not a busy loop.
const ERROR_PAUSE: Duration = Duration::from_secs(1);

/// How often the consumer's queue is looked at even without a wake-up.
/// rust-rdkafka wakes a waiting `recv` when librdkafka's queue turns
/// from empty to non-empty; a wake-up lost there (rust-rdkafka issues
/// 665 and 848 report such stalls) would leave records unread until the
/// next one arrives. This bounds such a stall to a second, at the cost
/// of one empty poll a second.
const NUDGE: Duration = Duration::from_secs(1);

/// A record taken out of librdkafka's buffer.
struct Record {
    topic: String,
    partition: i32,
    offset: i64,
    entity: Option<String>,
    headers: Map<String, Value>,
    payload: Vec<u8>,
}

/// Why a consumer could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot make the Kafka consumer: {0}")]
pub struct ConsumerError(#[from] KafkaError);

/// Reads `source` (the connection's `index`th) as the consumer `name`
/// (its client id) until aborted, producing answers with `replies` when
/// the source has a reply target. A consumer that librdkafka declares
/// dead (a fatal error) is replaced by a new one, which reads on from the
/// group's last commit.
pub async fn run(
    twins: Arc<Twins>,
    kafka: Arc<KafkaSpec>,
    index: usize,
    name: String,
    stats: Arc<ConnectionStats>,
    replies: Option<Producer>,
    reasons: LastReason,
) {
    let source = &kafka.sources[index];
    let searches = Searches::new(twins.clone());
    loop {
        let consumer = match make(&kafka, source, &name, &reasons).map(Retiring::new) {
            Ok(consumer) => consumer,
            Err(error) => {
                // A configuration librdkafka refuses: no retry mends it.
                stats.set_failure(error.to_string());
                return;
            }
        };
        let replying = replies.clone().map(|producer| Replying {
            producer,
            stats: stats.clone(),
            reasons: reasons.clone(),
        });
        let fatal =
            consume(&twins, &searches, &kafka, index, &consumer, &stats, replying.as_ref()).await;
        tracing::warn!(servers = %kafka.bootstrap_servers, error = %fatal, "a Kafka source's consumer failed for good; a new one takes its place");
        stats.set_failure(format!(
            "kafka {}: {}",
            kafka.bootstrap_servers,
            reasons.explain(&fatal)
        ));
        tokio::time::sleep(ERROR_PAUSE).await;
    }
}

/// Applies what `consumer` reads until it fails for good, and returns
/// that error once the commands in flight are done.
async fn consume(
    twins: &Arc<Twins>,
    searches: &Searches,
    kafka: &Arc<KafkaSpec>,
    index: usize,
    consumer: &KafkaConsumer,
    stats: &Arc<ConnectionStats>,
    replying: Option<&Replying>,
) -> KafkaError {
    let source = &kafka.sources[index];
    let figures = &stats.sources[index];
    let mut window: Window<'_, (Record, Outcome)> = Window::default();
    let mut nudge = tokio::time::interval(NUDGE);
    nudge.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // Finished commands first: they free room and advance offsets.
            biased;
            Some((record, outcome)) = window.next(), if !window.is_empty() => {
                finish(consumer, source, figures, stats, record, outcome);
            }
            received = consumer.recv(), if window.has_room() => {
                let record = match received {
                    Ok(message) => read(&message),
                    Err(fatal @ KafkaError::MessageConsumptionFatal(_)) => {
                        while let Some((record, outcome)) = window.next().await {
                            finish(consumer, source, figures, stats, record, outcome);
                        }
                        return fatal;
                    }
                    Err(error) => {
                        let error = consumer.context().last_reason().explain(&error);
                        stats.set_failure(format!("kafka {}: {error}", kafka.bootstrap_servers));
                        tokio::time::sleep(ERROR_PAUSE).await;
                        continue;
                    }
                };
                figures.consumed.inc();
                // The same entity's earlier commands finish first.
                while window.holds(&record.entity) {
                    let Some((done, outcome)) = window.next().await else { break };
                    finish(consumer, source, figures, stats, done, outcome);
                }
                let entity = record.entity.clone();
                window.push(entity, apply(twins.clone(), searches, kafka.clone(), index, record, replying));
            }
            // Nothing to do but look at librdkafka's queue again (the
            // loop calls `recv` anew).
            _ = nudge.tick() => {}
        }
    }
}

/// Where the answers of a source with a reply target go: the
/// connection's producer.
#[derive(Clone)]
struct Replying {
    producer: Producer,
    stats: Arc<ConnectionStats>,
    reasons: LastReason,
}

impl Replying {
    /// Produces `answer` to `address` (`topic` or `topic/key`), if it is
    /// of a kind the reply target `takes`.
    fn send(&self, takes: AnswerKinds, address: &str, answer: &Envelope) {
        if !takes.answer(answer) {
            return;
        }
        let (topic, key) = match address.split_once('/') {
            Some((topic, key)) => (topic, Some(key)),
            None => (address, None),
        };
        let payload = answer.to_bytes();
        let correlation_id = answer.headers.get("correlation-id").and_then(Value::as_str);
        let mut record =
            FutureRecord::to(topic).payload(&payload).headers(ditto_headers(correlation_id));
        if let Some(key) = key {
            record = record.key(key);
        }
        match self.producer.send_result(record) {
            Ok(delivery) => {
                let (stats, topic) = (self.stats.clone(), topic.to_owned());
                let reasons = self.reasons.clone();
                tokio::spawn(async move {
                    if let Ok(Err((error, _))) = delivery.await {
                        let error = reasons.explain(&error);
                        stats.set_failure(format!("kafka reply to {topic}: {error}"));
                    }
                });
            }
            // The producer's queue is full (the cluster is down or slow).
            Err((error, _)) => {
                let error = self.reasons.explain(&error);
                self.stats.set_failure(format!("kafka reply to {topic}: {error}"));
            }
        }
    }
}

/// Applies one record's command (`inbound::apply_until_done`) and sends
/// its answer to the source's reply target, if it has one; what happened
/// is in the figures.
async fn apply(
    twins: Arc<Twins>,
    searches: &Searches,
    kafka: Arc<KafkaSpec>,
    index: usize,
    record: Record,
    replying: Option<&Replying>,
) -> (Record, Outcome) {
    let source = &kafka.sources[index];
    let received = Received { headers: &record.headers, address: None };
    let what = || format!("{}/{} offset {}", record.topic, record.partition, record.offset);
    let (outcome, answer) =
        inbound::apply_until_done(&twins, searches, source, received, &record.payload, what).await;
    let (Some(answer), Some(replying), Some(target)) = (answer, replying, &source.reply_target)
    else {
        return (record, outcome);
    };
    let Some(address) = target.address_for(received, &record.payload) else {
        return (record, outcome);
    };
    match answer {
        Answer::Now(answer) => replying.send(target.takes, &address, &answer),
        Answer::Later(call) => {
            // Waits beside the consumer, which goes on with the next
            // records; calls waiting at once are bounded by the hub.
            let (replying, takes) = (replying.clone(), target.takes);
            tokio::spawn(async move {
                if let Some(answer) = call.response().await {
                    replying.send(takes, &address, &answer);
                }
            });
        }
        Answer::Stream(mut events) => {
            // As long as the subscription lasts: bounded per connection
            // by `search::SUBSCRIPTIONS_PER_OWNER`.
            let (replying, takes) = (replying.clone(), target.takes);
            tokio::spawn(async move {
                while let Some(event) = events.recv().await {
                    replying.send(takes, &address, &event);
                }
            });
        }
    }
    (record, outcome)
}

/// Counts a record's outcome and, at least once, stores its offset for
/// the next commit: every record before it is done too.
fn finish(
    consumer: &KafkaConsumer,
    source: &SourceSpec,
    figures: &SourceStats,
    stats: &ConnectionStats,
    record: Record,
    outcome: Outcome,
) {
    match outcome {
        Outcome::Applied => {
            figures.applied.inc();
            stats.set_success();
        }
        Outcome::Refused(why) | Outcome::Retriable(why) => {
            figures.failed.inc();
            tracing::debug!(topic = %record.topic, offset = record.offset, %why, "a Kafka source's command was not applied");
            stats.set_failure(format!(
                "{}[{}]@{}: {why}",
                record.topic, record.partition, record.offset
            ));
        }
    }
    if source.at_least_once {
        // librdkafka commits the stored offset plus one: the next record.
        if let Err(error) = consumer.store_offset(&record.topic, record.partition, record.offset) {
            // The partition was revoked meanwhile (a rebalance): its new
            // owner reads from the last commit, the record again.
            tracing::debug!(topic = %record.topic, %error, "offset not stored");
        }
    }
}

/// A record's parts, owned: its headers as Ditto headers (lower-case
/// names, values as text) and the entity of its command, if it has one.
fn read(message: &rdkafka::message::BorrowedMessage<'_>) -> Record {
    let mut headers = Map::new();
    if let Some(kafka_headers) = message.headers() {
        for header in kafka_headers.iter() {
            let value = header.value.map(String::from_utf8_lossy).unwrap_or_default();
            headers.insert(header.key.to_ascii_lowercase(), Value::String(value.into_owned()));
        }
    }
    let payload = message.payload().unwrap_or_default().to_vec();
    Record {
        topic: message.topic().to_owned(),
        partition: message.partition(),
        offset: message.offset(),
        entity: entity_of(&payload),
        headers,
        payload,
    }
}

fn make(
    kafka: &KafkaSpec,
    source: &SourceSpec,
    name: &str,
    reasons: &LastReason,
) -> Result<KafkaConsumer, ConsumerError> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &kafka.bootstrap_servers)
        .set("group.id", &kafka.group_id)
        // The name holds this Ferry's (`connections::member_name`): a
        // group's description tells which Ferry each member is.
        .set("client.id", name)
        // No static membership (`group.instance.id`), although it would
        // let a consumer started again after a crash take its partitions
        // back without waiting out the dead member's session: a static
        // leader that rejoined a stable group after a kill -9 was seen,
        // under load, never to consume again (no rebalance, no error;
        // librdkafka 2.12 with Kafka 4.1), which a user would see as a
        // connection silently stopped. A dynamic member's rejoin is a
        // plain rebalance, done once the dead member's session expires.
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", COMMIT_INTERVAL_MS)
        .set("enable.auto.offset.store", if source.at_least_once { "false" } else { "true" })
        // A new group reads the topic from its start: what was produced
        // before the connection was made is not skipped.
        .set("auto.offset.reset", "earliest")
        .set("queued.max.messages.kbytes", PREFETCH_KIB)
        // Ditto's consumer settings: a dead consumer is noticed in 10 s.
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "3000")
        .set("reconnect.backoff.max.ms", "1000");
    kafka.security.apply(&mut config);
    // Warnings and errors only: librdkafka's debug lines are many per
    // request.
    config.set_log_level(RDKafkaLogLevel::Warning);
    let consumer: KafkaConsumer =
        config.create_with_context(KafkaContext::new(name, reasons.clone()))?;
    let topics: Vec<&str> = source.addresses.iter().map(String::as_str).collect();
    consumer.subscribe(&topics)?;
    Ok(consumer)
}

/// A consumer that is closed off the runtime's threads: closing one
/// leaves its group and commits its stored offsets, which waits for the
/// cluster's answer.
struct Retiring(Option<KafkaConsumer>);

impl Retiring {
    fn new(consumer: KafkaConsumer) -> Retiring {
        Retiring(Some(consumer))
    }
}

impl std::ops::Deref for Retiring {
    type Target = KafkaConsumer;

    fn deref(&self) -> &KafkaConsumer {
        // Taken only in `drop`.
        self.0.as_ref().expect("a consumer until dropped")
    }
}

impl Drop for Retiring {
    fn drop(&mut self) {
        let Some(consumer) = self.0.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(consumer))),
            Err(_) => drop(consumer),
        }
    }
}
