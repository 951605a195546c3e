//! A running `kafka` connection: its sources read Ditto protocol commands
//! from Kafka topics and apply them to the twins (`source.rs`), its
//! targets produce twin events to Kafka topics (`target.rs`); what is
//! read and refused of the connection's JSON is in `spec.rs`.
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
use std::sync::Arc;
use tokio::task::AbortHandle;

/// Starts the connection's consumers and its targets' producer; `member`
/// names this Ferry among the consumer group's members.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    kafka: Arc<KafkaSpec>,
    stats: Arc<ConnectionStats>,
    member: Arc<str>,
) -> Vec<AbortHandle> {
    let mut tasks = target::start(twins.clone(), spec, kafka.clone(), stats.clone());
    for (index, source) in kafka.sources.iter().enumerate() {
        for consumer in 0..source.consumer_count {
            let name = format!("{}-{member}-source{index}-{consumer}", kafka.client_id);
            let run = source::run(twins.clone(), kafka.clone(), index, name, stats.clone());
            tasks.push(tokio::spawn(run).abort_handle());
        }
    }
    tasks
}
