//! What a connection's targets send of one twin event, the same for
//! every transport: each target's envelope (as its topics, filters and
//! subjects let the event through) with the acknowledgement it owes, the
//! targets that leave the event out counted as filtered.
//!
//! Labels the connection's sources declared (`declaredAcks`) are
//! answered by the device, through a source: every envelope sent asks
//! for them. When no target sends the event, the device never sees it,
//! and each is weakly acknowledged at once, as Ditto's outbound
//! dispatcher does for a signal no target takes.

use super::model::{ConnectionSpec, Owed};
use super::stats::{ConnectionStats, TargetStats};
use super::template::Unresolved;
use crate::protocol::Envelope;
use crate::service::{ThingEvent, Twins};

/// One target's share of an event.
pub struct Outgoing {
    /// The target's index among the connection's.
    pub target: usize,
    pub envelope: Envelope,
    /// The acknowledgement the target owes for it, once delivered.
    pub owed: Option<Owed>,
}

/// What `spec`'s targets of twin events send of `event`.
pub async fn of_event(
    twins: &Twins,
    spec: &ConnectionSpec,
    stats: &ConnectionStats,
    event: &ThingEvent,
) -> Vec<Outgoing> {
    let device_acks: Vec<String> = event
        .acks
        .iter()
        .flat_map(|acks| &acks.labels)
        .filter(|label| spec.source_acks.contains(label))
        .cloned()
        .collect();
    let mut outgoing = Vec::new();
    for (index, target) in spec.targets.iter().enumerate() {
        if target.topics.is_empty() {
            continue; // live signals only
        }
        match target.outgoing(twins, event, &device_acks).await {
            Some((envelope, owed)) => outgoing.push(Outgoing { target: index, envelope, owed }),
            None => stats.targets[index].filtered.inc(),
        }
    }
    if let Some(acks) = event.acks.as_ref().filter(|_| outgoing.is_empty()) {
        for label in &device_acks {
            let weak = crate::acks::weak_ack(label, &acks.correlation_id);
            twins.ack_hub().deliver(&acks.correlation_id, weak);
        }
    }
    outgoing
}

/// The text a target's address (or key) `rendered` for a signal, or,
/// when it gave nothing (Ditto drops the signal there), `None`: the
/// signal counted as dropped and what the target owes for it answered
/// weakly, as for a signal its topics leave out.
pub fn unless_withheld(
    twins: &Twins,
    figures: &TargetStats,
    owed: &mut Option<Owed>,
    rendered: Result<String, Unresolved>,
) -> Option<String> {
    let unresolved = match rendered {
        Ok(text) => return Some(text),
        Err(unresolved) => unresolved,
    };
    tracing::debug!(why = %unresolved.why, "a target's address withheld a signal");
    figures.dropped.inc();
    if let Some(owed) = owed.take() {
        owed.weakly(twins);
    }
    None
}
