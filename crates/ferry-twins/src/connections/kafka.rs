//! A running `kafka` connection: its sources read Ditto protocol commands
//! from Kafka topics and apply them to the twins, producing their answers
//! to a reply target's topic (`source.rs`), its targets produce twin
//! events to Kafka topics (`target.rs`); what is read and refused of the
//! connection's JSON is in `spec.rs`. Targets and reply targets share one
//! producer.
//!
//! Each source runs `consumerCount` consumers in one consumer group
//! (`ferry-connection-<id>`, or `specificConfig.groupId`), which Kafka
//! shares the topics' partitions among.

mod source;
mod spec;
mod target;

pub use spec::KafkaSpec;

use super::model::ConnectionSpec;
use super::stats::ConnectionStats;
use crate::service::Twins;
use ferry_routes::endpoints::kafka::{KafkaContext, LastReason};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::producer::FutureProducer;
use std::sync::Arc;
use tokio::task::AbortHandle;

/// The connection's producer, whose errors its context explains.
type Producer = FutureProducer<KafkaContext>;

/// Starts the connection's consumers and its targets' producer; `member`
/// names this Ferry among the consumer group's members.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    kafka: Arc<KafkaSpec>,
    stats: Arc<ConnectionStats>,
    member: Arc<str>,
    events: Option<super::feed::Feed>,
) -> Vec<AbortHandle> {
    let replies = kafka.sources.iter().any(|source| source.reply_target.is_some());
    // Shared by the connection's clients, as its status is: the reason
    // librdkafka gave last, whichever client it came from, explains the
    // next failure. Handed to the producer's users beside it, because a
    // `FutureProducer` does not lend out the context it wraps.
    let reasons = LastReason::default();
    let producer = if spec.targets.is_empty() && !replies {
        None
    } else {
        let mut config =
            spec::producer_config(&kafka.bootstrap_servers, &kafka.client_id).client_config("");
        kafka.security.apply(&mut config);
        config.set_log_level(RDKafkaLogLevel::Warning);
        let context = KafkaContext::new(kafka.client_id.clone(), reasons.clone());
        match config.create_with_context::<_, Producer>(context) {
            Ok(producer) => Some(producer),
            Err(error) => {
                stats.set_failure(format!("cannot make the Kafka producer: {error}"));
                return Vec::new();
            }
        }
    };
    let mut tasks = match (&producer, events) {
        (Some(producer), Some(events)) => target::start(
            twins.clone(),
            spec,
            kafka.clone(),
            stats.clone(),
            producer.clone(),
            reasons.clone(),
            events,
        ),
        _ => Vec::new(),
    };
    for (index, source) in kafka.sources.iter().enumerate() {
        let replies = source.reply_target.as_ref().and(producer.clone());
        for consumer in 0..source.consumer_count {
            let name = format!("{}-{member}-source{index}-{consumer}", kafka.client_id);
            let run = source::run(
                twins.clone(),
                kafka.clone(),
                index,
                name,
                stats.clone(),
                replies.clone(),
                reasons.clone(),
            );
            tasks.push(tokio::spawn(run).abort_handle());
        }
    }
    tasks
}
