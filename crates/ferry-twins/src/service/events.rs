//! The change feed: one [`ThingEvent`] per committed change of a thing,
//! what the Ditto protocol's twin events (`things/twin/events/…`) and
//! change-dependent features are built from.
//!
//! An event is sent after its write has committed, while the writer still
//! holds the thing's write lock, so the events of one thing leave in
//! revision order; events of different things interleave freely. The feed
//! is a `tokio::sync::broadcast` channel with a bounded buffer
//! ([`EVENT_BUFFER`]): a subscriber that falls that far behind gets
//! `RecvError::Lagged` with the number it missed, and must re-read the
//! things it cares about, rather than slowing every writer down. Nobody
//! listening costs one failed `send`.

use crate::id::{PolicyId, ThingId};
use crate::pointer::JsonPointer;
use crate::policy::Timestamp;
use serde_json::Value;
use std::sync::Arc;

/// Events kept for the slowest subscriber: at ~1 KiB each, a few MiB.
pub const EVENT_BUFFER: usize = 4096;

/// What a change did, as Ditto names its events: `…Created`,
/// `…Modified`, `ThingMerged`, `…Deleted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThingAction {
    Created,
    Modified,
    Merged,
    Deleted,
}

impl ThingAction {
    /// The action of its Ditto protocol event (`…/twin/events/modified`).
    pub fn as_str(self) -> &'static str {
        match self {
            ThingAction::Created => "created",
            ThingAction::Modified => "modified",
            ThingAction::Merged => "merged",
            ThingAction::Deleted => "deleted",
        }
    }

    pub fn parse(text: &str) -> Option<ThingAction> {
        [ThingAction::Created, ThingAction::Modified, ThingAction::Merged, ThingAction::Deleted]
            .into_iter()
            .find(|action| action.as_str() == text)
    }
}

/// One committed change of a thing.
#[derive(Debug, Clone, PartialEq)]
pub struct ThingEvent {
    pub thing_id: ThingId,
    /// The policy guarding the thing when it changed (the one it had
    /// before a deletion), which decides who may see the event.
    pub policy_id: Option<PolicyId>,
    /// The thing's revision after the change (a deletion counts one more).
    pub revision: u64,
    pub timestamp: Timestamp,
    pub action: ThingAction,
    /// The resource written, inside the thing (`/` for the thing itself,
    /// `/features/lamp/properties/on`).
    pub path: JsonPointer,
    /// What was written there: the value of a PUT, the patch of a merge;
    /// `None` for a deletion.
    pub value: Option<Value>,
    /// The event's place in the event journal (`journal.rs`): store-wide,
    /// increasing in commit order; `None` with the journal off.
    pub journal: Option<u64>,
    /// The acknowledgements the change's command asked subscribers for
    /// (`acks.rs`); not kept in the journal.
    pub acks: Option<Arc<crate::acks::EventAcks>>,
    /// The change's command's `correlation-id`, which its event carries
    /// as Ditto's do, so a client can tell its own change among the
    /// events; kept in the journal, so a replayed event carries it too.
    pub correlation_id: Option<Arc<str>>,
    /// Who made the change (the first subject of its command's caller),
    /// which its event carries as Ditto's `ditto-originator`; kept in the
    /// journal like the correlation id.
    pub originator: Option<Arc<str>>,
}

/// The next event of `feed` for `reader`, `None` once the feed is
/// closed. Events a reader fell too far behind to get are counted in
/// `missed` and logged, and the reader goes on with the ones after.
pub async fn next_event(
    feed: &mut tokio::sync::broadcast::Receiver<ThingEvent>,
    missed: &std::sync::atomic::AtomicU64,
    reader: &str,
) -> Option<ThingEvent> {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match feed.recv().await {
            Ok(event) => return Some(event),
            Err(RecvError::Closed) => return None,
            Err(RecvError::Lagged(lost)) => {
                missed.fetch_add(lost, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(missed = lost, reader, "the change feed ran ahead of a reader");
            }
        }
    }
}
