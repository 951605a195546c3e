//! The event journal: every committed [`ThingEvent`] kept in the store for
//! `event_retention`, so that a stream of events that lost its connection,
//! or fell behind the in-memory feed, resumes where it left off
//! (`Last-Event-ID` on SSE) instead of silently missing changes.
//!
//! An entry is written in the same commit group as the change it records
//! (`Write::Event`), so the journal holds exactly what was committed, and
//! its sequence number comes back with the commit into the event the feed
//! sends: a live event and its replay carry the same position. Sequence
//! numbers increase in commit order within one store writer; with several
//! Ferry nodes on one PostgreSQL database, each node's streams see only
//! that node's live events anyway.

use super::events::{ThingAction, ThingEvent};
use super::Twins;
use crate::id::{PolicyId, ThingId};
use crate::pointer::JsonPointer;
use crate::policy::Timestamp;
use crate::store::{EventRecord, StoreError, Write, PRUNE_BATCH};
use std::sync::Arc;
use std::time::Duration;

/// How often old entries are pruned: the journal holds at most the
/// retention plus this much.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

impl Twins {
    /// The journal entry of `event`, none with the journal off.
    pub(super) fn journal_entry(&self, event: &ThingEvent) -> Option<Write> {
        self.config.event_retention?;
        Some(Write::Event(EventRecord {
            thing_id: event.thing_id.as_str().to_owned(),
            policy_id: event.policy_id.as_ref().map(|id| id.as_str().to_owned()),
            revision: event.revision,
            timestamp: event.timestamp.to_string(),
            at: event.timestamp.unix_seconds(),
            action: event.action.as_str().to_owned(),
            path: event.path.to_string(),
            value: event.value.clone().map(Arc::new),
            correlation_id: event.correlation_id.as_deref().map(str::to_owned),
            originator: event.originator.as_deref().map(str::to_owned),
        }))
    }

    /// The journal's events after position `after`, oldest first, at
    /// most `limit`; each carries its position.
    pub async fn journal_after(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<ThingEvent>, StoreError> {
        let records = self.store.events_after(after, limit).await?;
        records.into_iter().map(|(seq, record)| from_record(seq, record)).collect()
    }

    /// The journal's newest place (0 when it is empty), `None` with the
    /// journal off.
    pub async fn journal_head(&self) -> Result<Option<u64>, StoreError> {
        if self.config.event_retention.is_none() {
            return Ok(None);
        }
        self.store.events_head().await.map(Some)
    }

    /// Whether committed events are kept in the journal.
    pub fn journaled(&self) -> bool {
        self.config.event_retention.is_some()
    }

    /// Removes the entries older than the retention, a batch per commit
    /// so that the writer is never held long; answers how many went.
    pub async fn prune_journal(&self) -> Result<u64, StoreError> {
        let Some(retention) = self.config.event_retention else { return Ok(0) };
        let retention = i64::try_from(retention.as_secs()).unwrap_or(i64::MAX);
        let before = Timestamp::now().unix_seconds().saturating_sub(retention);
        let mut pruned = 0;
        loop {
            let committed =
                self.store.commit_journaled(vec![Write::PruneEvents { before }]).await?;
            pruned += committed.pruned;
            if committed.pruned < PRUNE_BATCH {
                return Ok(pruned);
            }
        }
    }

    /// Prunes the journal every [`PRUNE_EVERY`] until the service closes.
    pub async fn run_journal_pruning(self: Arc<Self>) {
        if self.config.event_retention.is_none() {
            return;
        }
        let mut closing = self.closing();
        let mut ticker = tokio::time::interval(PRUNE_EVERY);
        loop {
            tokio::select! {
                _ = closing.wait_for(|&closed| closed) => return,
                _ = ticker.tick() => {}
            }
            match self.prune_journal().await {
                Ok(0) => {}
                Ok(pruned) => tracing::debug!(pruned, "twin event journal pruned"),
                Err(error) => tracing::warn!(%error, "twin event journal not pruned"),
            }
        }
    }
}

fn from_record(seq: u64, record: EventRecord) -> Result<ThingEvent, StoreError> {
    let bad = |what: &str| StoreError::Backend(format!("journal entry {seq}: {what}"));
    Ok(ThingEvent {
        thing_id: ThingId::parse(&record.thing_id).map_err(|_| bad("thing id"))?,
        revision: record.revision,
        timestamp: Timestamp::parse(&record.timestamp).ok_or_else(|| bad("timestamp"))?,
        action: ThingAction::parse(&record.action).ok_or_else(|| bad("action"))?,
        path: JsonPointer::parse(&record.path).map_err(|_| bad("path"))?,
        value: record.value.map(Arc::unwrap_or_clone),
        policy_id: record
            .policy_id
            .map(|id| PolicyId::parse(&id))
            .transpose()
            .map_err(|_| bad("policy id"))?,
        journal: Some(seq),
        acks: None,
        correlation_id: record.correlation_id.map(Arc::from),
        originator: record.originator.map(Arc::from),
    })
}
