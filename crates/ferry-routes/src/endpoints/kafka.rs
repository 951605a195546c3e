//! The `kafka` endpoint: each routed message becomes one Kafka record
//! (`record.rs`), produced by librdkafka (through `rdkafka`) with acks=all
//! and the idempotent producer; settings in `config.rs`.
//!
//! A batch is enqueued whole, then every delivery report is awaited:
//! enqueueing one record and awaiting it before the next would cost a
//! round trip (and a `linger.ms`) per record. What a batch's reports mean:
//! - all delivered: the batch is done;
//! - a record too large for the producer or the broker: dropped, counted
//!   under `too_large` (it would be refused again for ever);
//! - any other failure (broker unreachable, `message_timeout` ran out, not
//!   enough in-sync replicas...): the batch fails and the flow sends it
//!   again after its backoff. The idempotent producer drops the duplicates
//!   of its own retries, but not of a batch sent again: the records of
//!   that batch Kafka had already taken arrive twice. Delivery is at least
//!   once, as across a restart of Ferry (a new producer session).

mod config;
mod context;
mod record;
mod security;

pub use config::{is_valid_kafka_topic, Compression, KafkaConfigError, KafkaEndpointConfig};
pub use context::{KafkaContext, LastReason};
pub use record::{HEADER_CONTENT_TYPE, HEADER_QOS, HEADER_TOPIC};
pub use security::{KafkaSecurity, KafkaTls, Pem, Sasl, SaslMechanism};

use crate::sink::{Sent, Sink, SinkError};
use config::Checked;
use ferry_broker::endpoint::RoutedMessage;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The reason an oversized record is dropped under.
pub const TOO_LARGE: &str = "too_large";
/// The reason a record whose topic template made no legal Kafka topic
/// name is dropped under.
pub const INVALID_TOPIC: &str = "invalid_topic";

/// The longest `connect` waits for the cluster's metadata.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Added to three times `message_timeout`: how long a batch waits for
/// delivery reports before it counts as failed without them.
const REPORT_MARGIN: Duration = Duration::from_secs(30);

type KafkaProducer = FutureProducer<KafkaContext>;

/// Why a `KafkaSink` cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum KafkaSinkError {
    #[error(transparent)]
    Config(#[from] KafkaConfigError),
    /// librdkafka refused the producer's configuration.
    #[error("cannot make the producer: {0}")]
    Producer(KafkaError),
}

pub struct KafkaSink {
    name: Arc<str>,
    brokers: String,
    client_config: ClientConfig,
    checked: Checked,
    /// `None` before the first `connect` and after a fatal error, which
    /// leaves a producer unusable: the next `connect` makes a new one.
    producer: Option<KafkaProducer>,
    /// What librdkafka last said of an error, for the failures' reasons.
    last_reason: LastReason,
}

impl KafkaSink {
    /// Checks `config` and makes the producer, so that a setting librdkafka
    /// refuses (`zstd` where it was built without it, say) fails the
    /// configuration rather than every connect. Connects on the flow's
    /// first `connect`, not here.
    pub fn new(name: &str, config: &KafkaEndpointConfig) -> Result<KafkaSink, KafkaSinkError> {
        let checked = config.validate()?;
        let mut sink = KafkaSink {
            name: name.into(),
            brokers: config.brokers.clone(),
            client_config: config.client_config(name),
            checked,
            producer: None,
            last_reason: LastReason::default(),
        };
        sink.producer = Some(sink.create().map_err(KafkaSinkError::Producer)?);
        Ok(sink)
    }

    fn create(&self) -> Result<KafkaProducer, KafkaError> {
        let mut config = self.client_config.clone();
        // Warnings and errors only: librdkafka's debug lines are many per
        // request.
        config.set_log_level(RDKafkaLogLevel::Warning);
        config.create_with_context(KafkaContext::new(self.name.clone(), self.last_reason.clone()))
    }

    /// The batch's records handed to the producer, each with its delivery
    /// report to await; what cannot be sent at all is in `sent.rejected`.
    /// Stops at the first record the producer will not take now (its
    /// queue is full, or a fatal error), returned with what was enqueued.
    fn enqueue(
        &self,
        batch: &[RoutedMessage],
        sent: &mut Sent,
    ) -> (Vec<(u64, DeliveryFuture)>, Option<KafkaError>) {
        let Some(producer) = &self.producer else {
            return (Vec::new(), Some(KafkaError::Canceled));
        };
        let mut pending = Vec::with_capacity(batch.len());
        let (wall, monotonic) = (SystemTime::now(), Instant::now());
        for routed in batch {
            let message = &routed.message;
            let publisher = routed.publisher.as_deref();
            let expanded;
            let topic = match &self.checked.fixed_topic {
                Some(topic) => topic.as_str(),
                None => {
                    expanded = self.checked.topic.expand(&message.topic, publisher);
                    if !is_valid_kafka_topic(&expanded) {
                        sent.rejected.push((routed.offset, INVALID_TOPIC));
                        continue;
                    }
                    expanded.as_str()
                }
            };
            let key = self.checked.key.as_ref().map(|key| key.expand(&message.topic, publisher));
            let mut record = FutureRecord::to(topic)
                .payload(&message.payload[..])
                .timestamp(record::received_at_ms(message, wall, monotonic))
                .headers(record::headers(message));
            // An empty key is no key: the murmur2 partitioner would put
            // every empty key on one partition, where keyless records are
            // spread over them all.
            if let Some(key) = key.as_deref().filter(|key| !key.is_empty()) {
                record = record.key(key);
            }
            match producer.send_result(record) {
                Ok(delivery) => pending.push((routed.offset, delivery)),
                Err((error, _)) if is_too_large(&error) => {
                    sent.rejected.push((routed.offset, TOO_LARGE));
                }
                Err((error, _)) => return (pending, Some(error)),
            }
        }
        (pending, None)
    }

    /// Drops a producer off the runtime's threads: dropping one purges its
    /// queue, waits for its polling thread and its broker threads, which
    /// can take a good part of a second.
    fn retire(&mut self) {
        if let Some(producer) = self.producer.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || drop(producer))),
                Err(_) => drop(producer),
            }
        }
    }

    /// After a failure: a producer with a fatal error (an idempotence
    /// sequence it cannot recover, say) is given up for a new one.
    fn check_fatal(&mut self) -> Option<String> {
        let (code, reason) = self.producer.as_ref()?.client().fatal_error()?;
        self.retire();
        Some(format!("fatal producer error {code:?}: {reason}; a new producer is made"))
    }
}

impl Drop for KafkaSink {
    fn drop(&mut self) {
        self.retire();
    }
}

fn is_too_large(error: &KafkaError) -> bool {
    error.rdkafka_error_code() == Some(RDKafkaErrorCode::MessageSizeTooLarge)
}

impl Sink for KafkaSink {
    /// Makes a producer if there is none, and asks the cluster for its
    /// metadata, so that "connected" means a broker answered.
    async fn connect(&mut self) -> Result<(), SinkError> {
        if self.producer.is_none() {
            let producer = self.create().map_err(|error| {
                SinkError::new(format!("kafka {}: cannot make the producer: {error}", self.brokers))
            })?;
            self.producer = Some(producer);
        }
        let Some(producer) = self.producer.clone() else {
            return Err(SinkError::new("kafka: no producer"));
        };
        let topic = self.checked.fixed_topic.clone();
        let timeout = CONNECT_TIMEOUT.min(self.checked.message_timeout);
        // librdkafka's metadata call blocks its caller until the answer.
        let metadata = tokio::task::spawn_blocking(move || {
            producer.client().fetch_metadata(topic.as_deref(), timeout).map(|_| ())
        })
        .await;
        match metadata {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(SinkError::new(format!(
                "kafka {}: {}",
                self.brokers,
                self.last_reason.explain(&error)
            ))),
            Err(error) => Err(SinkError::new(format!("kafka {}: {error}", self.brokers))),
        }
    }

    async fn send(&mut self, batch: &[RoutedMessage]) -> Result<Sent, SinkError> {
        if self.producer.is_none() {
            return Err(SinkError::new("kafka: not connected"));
        }
        let mut sent = Sent::default();
        let (pending, mut failure) = self.enqueue(batch, &mut sent);
        // Every report is awaited, even after a failure: the batch is sent
        // again after this returns, and records of this attempt still in
        // the producer's queue would be sent beside it. librdkafka reports
        // every record within about `message_timeout` (measured: 3.1 s for
        // 3 s with the cluster down); the deadline only keeps a report it
        // never gives from holding the flow for ever.
        let deadline =
            tokio::time::Instant::now() + self.checked.message_timeout * 3 + REPORT_MARGIN;
        for (offset, delivery) in pending {
            let report = match tokio::time::timeout_at(deadline, delivery).await {
                Ok(report) => report,
                Err(_elapsed) => {
                    failure.get_or_insert(KafkaError::MessageProduction(
                        RDKafkaErrorCode::MessageTimedOut,
                    ));
                    break;
                }
            };
            match report {
                Ok(Ok(_)) => {}
                Ok(Err((error, _))) if is_too_large(&error) => {
                    sent.rejected.push((offset, TOO_LARGE));
                }
                Ok(Err((error, _))) => {
                    failure.get_or_insert(error);
                }
                // The producer went before its report: it was not
                // delivered as far as anyone can tell.
                Err(_canceled) => {
                    failure.get_or_insert(KafkaError::Canceled);
                }
            }
        }
        let Some(error) = failure else {
            return Ok(sent);
        };
        let error = self.last_reason.explain(&error);
        let fatal = self.check_fatal();
        let mut reason = format!("kafka {}: {error}", self.brokers);
        if let Some(fatal) = fatal {
            reason = format!("{reason} ({fatal})");
        }
        Err(SinkError::new(reason))
    }
}
