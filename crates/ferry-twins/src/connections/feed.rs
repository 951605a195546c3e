//! A connection's share of the change feed, kept whole with the event
//! journal (`service/journal.rs`): after a restart it first sends, from
//! the journal, what committed after its stored place (`places.rs`); when
//! it falls so far behind that the live feed drops events for it (a slow
//! receiver, a broker away), it reads on from the journal rather than
//! missing them. Each event comes with the [`Ticket`] that settles it.
//!
//! With the journal off (`event_retention = "0s"`) there is nothing to
//! resume from: events are live only, and those a connection falls
//! behind on are counted as missed.

use super::progress::{Progress, Ticket};
use super::stats::ConnectionStats;
use crate::service::{next_event, ThingEvent, Twins};
use crate::store::{StoreError, GROUPS_PER_COMMIT};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};

/// Journal entries read per store round trip; a page is held in memory
/// until it is handed out.
const REPLAY_PAGE: usize = 256;

/// Places handed out lately. After falling behind, the feed reads the
/// journal again from a little before the newest place it handed out
/// (events of one commit can arrive out of order), and skips these.
const RECENT: usize = 4 * GROUPS_PER_COMMIT;

/// Pauses before reading the journal again after the store failed.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LAST_PAUSE: Duration = Duration::from_secs(5);

pub struct Feed {
    twins: Arc<Twins>,
    live: broadcast::Receiver<ThingEvent>,
    /// `None` with the journal off.
    progress: Option<Arc<Progress>>,
    started: bool,
    /// Journal entries read and not yet handed out.
    replay: VecDeque<ThingEvent>,
    /// Where the next journal read starts; `None` while live.
    resume_after: Option<u64>,
    /// The newest place read from the journal: a live event at or below
    /// it was handed out by the replay already (the live feed is
    /// subscribed to before the journal is read, so a commit in between
    /// is in both).
    replayed: Option<u64>,
    recent: BTreeSet<u64>,
    pause: Duration,
}

impl Feed {
    /// Subscribes to the live feed at once; `progress` is the
    /// connection's, where it resumes from.
    pub fn open(twins: &Arc<Twins>, progress: Arc<Progress>) -> Feed {
        Feed {
            live: twins.subscribe(),
            progress: twins.journaled().then_some(progress),
            twins: twins.clone(),
            started: false,
            replay: VecDeque::new(),
            resume_after: None,
            replayed: None,
            recent: BTreeSet::new(),
            pause: FIRST_PAUSE,
        }
    }

    /// The next event for the connection named `reader`, `None` once the
    /// feed is closed. Cancel safe: its state changes only between awaits,
    /// so it can be one branch of a `select!`.
    pub async fn next(
        &mut self,
        stats: &ConnectionStats,
        reader: &str,
    ) -> Option<(ThingEvent, Option<Ticket>)> {
        let Some(progress) = self.progress.clone() else {
            let event = next_event(&mut self.live, &stats.missed, reader).await?;
            return Some((event, None));
        };
        loop {
            if !self.started {
                match progress.start() {
                    Some(place) => self.resume_after = Some(place),
                    None => match self.twins.journal_head().await {
                        Ok(head) => progress.start_at(head.unwrap_or(0)),
                        Err(error) => {
                            self.wait_after(&error, reader).await;
                            continue;
                        }
                    },
                }
                self.started = true;
            }
            if let Some(event) = self.replay.pop_front() {
                match self.hand_out(event, &progress) {
                    Some(taken) => return Some(taken),
                    None => continue,
                }
            }
            if let Some(after) = self.resume_after {
                match self.twins.journal_after(after, REPLAY_PAGE).await {
                    Ok(page) => {
                        self.pause = FIRST_PAUSE;
                        let last = page.last().and_then(|event| event.journal);
                        self.replayed = self.replayed.max(last);
                        self.resume_after = last.filter(|_| page.len() == REPLAY_PAGE);
                        self.replay.extend(page);
                    }
                    Err(error) => self.wait_after(&error, reader).await,
                }
                continue;
            }
            match self.live.recv().await {
                Ok(event) => {
                    let replayed = |place| self.replayed.is_some_and(|last| place <= last);
                    if event.journal.is_some_and(replayed) {
                        continue;
                    }
                    if let Some(taken) = self.hand_out(event, &progress) {
                        return Some(taken);
                    }
                }
                Err(RecvError::Lagged(behind)) => {
                    tracing::debug!(
                        behind,
                        reader,
                        "a connection fell behind the change feed; it reads on from the journal"
                    );
                    self.resume_after = Some(self.reread_from(&progress));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    /// The event with its ticket, `None` when it was handed out already.
    fn hand_out(
        &mut self,
        event: ThingEvent,
        progress: &Arc<Progress>,
    ) -> Option<(ThingEvent, Option<Ticket>)> {
        let Some(place) = event.journal else { return Some((event, None)) };
        if !self.recent.insert(place) {
            return None;
        }
        if self.recent.len() > RECENT {
            self.recent.pop_first();
        }
        Some((event, Some(progress.take(place))))
    }

    /// Where to read the journal from after falling behind: a commit's
    /// width before the newest place handed out, but not before what
    /// `recent` can tell apart, nor before the connection's place.
    fn reread_from(&self, progress: &Progress) -> u64 {
        let Some(&newest) = self.recent.last() else {
            return progress.place().unwrap_or(0);
        };
        let oldest_known = self.recent.first().map_or(0, |oldest| oldest.saturating_sub(1));
        let place = progress.place().unwrap_or(0);
        newest.saturating_sub(GROUPS_PER_COMMIT as u64).max(oldest_known).max(place)
    }

    async fn wait_after(&mut self, error: &StoreError, reader: &str) {
        tracing::warn!(reader, %error, "a connection cannot read the event journal; trying again in {:?}", self.pause);
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(LAST_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ThingId;
    use crate::service::{Caller, Conditions, ThingWrite, TwinsConfig, EVENT_BUFFER};
    use crate::store::sqlite::SqliteStore;
    use crate::store::Store;
    use crate::thing::ThingResource;
    use serde_json::Value;

    fn twins(dir: &tempfile::TempDir) -> Arc<Twins> {
        let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
        Arc::new(Twins::new(Store::Sqlite(store), TwinsConfig::default()))
    }

    async fn put(twins: &Twins, n: usize) {
        let caller = Caller::new(vec!["nginx:ditto".into()]);
        let id = ThingId::parse("ns:x").unwrap();
        let (resource, value) = match n {
            0 => (ThingResource::parse("").unwrap().unwrap(), serde_json::json!({})),
            n => (ThingResource::parse("attributes/n").unwrap().unwrap(), Value::from(n)),
        };
        let write = ThingWrite::Put(&value);
        twins.write_thing(&caller, &id, &resource, write, &Conditions::default()).await.unwrap();
    }

    fn stats() -> ConnectionStats {
        ConnectionStats::new(1, 0)
    }

    async fn next(feed: &mut Feed) -> (u64, Option<Ticket>) {
        let stats = stats();
        let next = tokio::time::timeout(Duration::from_secs(30), feed.next(&stats, "test"));
        let (event, ticket) = next.await.expect("an event within 30 s").expect("an open feed");
        (event.journal.expect("a journaled event"), ticket)
    }

    /// A store holding one thing (place 1) and the feed of a new
    /// connection opened after it.
    async fn a_new_connection() -> (tempfile::TempDir, Arc<Twins>, Arc<Progress>, Feed) {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir);
        put(&twins, 0).await;
        let progress = Arc::new(Progress::starting_at(None, Arc::default()));
        let feed = Feed::open(&twins, progress.clone());
        (dir, twins, progress, feed)
    }

    #[tokio::test]
    async fn a_new_connection_starts_at_the_head_and_a_restarted_one_resumes_from_its_place() {
        let (_dir, twins, progress, mut feed) = a_new_connection().await;
        put(&twins, 1).await;
        put(&twins, 2).await;
        // Place 1 committed before the connection existed.
        let (two, ticket) = next(&mut feed).await;
        assert_eq!(two, 2);
        drop(ticket);
        let (three, _on_its_way) = next(&mut feed).await;
        assert_eq!(three, 3);
        assert_eq!(progress.place(), Some(2));

        // A restart (the old run's ticket never settles) resumes after 2.
        progress.stop();
        put(&twins, 3).await;
        let restarted = Arc::new(Progress::starting_at(progress.place(), Arc::default()));
        let mut feed = Feed::open(&twins, restarted.clone());
        put(&twins, 4).await;
        let places: Vec<u64> =
            [next(&mut feed).await, next(&mut feed).await, next(&mut feed).await]
                .into_iter()
                .map(|(place, _)| place)
                .collect();
        assert_eq!(places, [3, 4, 5], "from the journal, then live, each once");
        assert_eq!(restarted.place(), Some(5));
    }

    #[tokio::test]
    async fn a_connection_that_falls_behind_reads_on_from_the_journal() {
        let (_dir, twins, progress, mut feed) = a_new_connection().await;
        put(&twins, 1).await;
        assert_eq!(next(&mut feed).await.0, 2);
        for n in 2..EVENT_BUFFER + 100 {
            put(&twins, n).await;
        }
        let stats = stats();
        for expected in 3..=(EVENT_BUFFER as u64 + 100) {
            let (event, _) = feed.next(&stats, "test").await.unwrap();
            assert_eq!(event.journal, Some(expected));
        }
        assert_eq!(stats.missed.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(progress.place(), Some(EVENT_BUFFER as u64 + 100));
    }
}
