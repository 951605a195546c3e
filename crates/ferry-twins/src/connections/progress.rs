//! How far a connection's targets are through the event journal: the
//! place at or below which every event was settled (published, or
//! refused for good and counted), which `places.rs` keeps on disk so that
//! a restarted Ferry sends what was still on its way (`feed.rs`).
//!
//! Each event a connection takes gets a [`Ticket`]; every request,
//! record or message made of it holds a clone, and when the last clone
//! goes the event is settled. An event no target takes settles at once.
//! The place is just below the oldest event not yet settled, else the
//! newest taken, so events settled out of order (parallel senders) never
//! move it past one still on its way.
//!
//! Stopping (a connection changed, closed or shut down) freezes it first:
//! what the stopping tasks drop afterwards is not settled, and is sent
//! again by the next start.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

pub struct Progress {
    state: Mutex<State>,
    /// Told when a connection that never ran starts, so that its place
    /// is written at once (`places.rs`).
    started: Arc<Notify>,
}

struct State {
    /// Taken and not yet settled, with the tickets out for each (a place
    /// taken twice, once live and once from the journal, settles when
    /// both have).
    pending: BTreeMap<u64, usize>,
    /// The newest place taken, or where the connection started.
    newest: Option<u64>,
    /// The place at the last [`Progress::durable`].
    previous: Option<u64>,
    stopped: bool,
}

impl Progress {
    /// Progress that starts at `place` (everything up to it was settled
    /// by an earlier run), or at nothing yet; `started` is told when the
    /// latter starts.
    pub fn starting_at(place: Option<u64>, started: Arc<Notify>) -> Progress {
        Progress {
            state: Mutex::new(State {
                pending: BTreeMap::new(),
                newest: place,
                previous: place,
                stopped: false,
            }),
            started,
        }
    }

    /// Where an earlier run left off; `None` for a connection that never
    /// ran.
    pub fn start(&self) -> Option<u64> {
        self.lock().previous
    }

    /// Sets where a connection that never ran starts: the journal's head
    /// when it first reads the feed, since what committed before it
    /// existed is not its to send.
    pub fn start_at(&self, head: u64) {
        let mut state = self.lock();
        if state.newest.is_none() {
            state.newest = Some(head);
            state.previous = Some(head);
            self.started.notify_one();
        }
    }

    /// Takes the event at `place`; it is settled when the ticket's last
    /// clone is dropped.
    pub fn take(self: &Arc<Self>, place: u64) -> Ticket {
        let mut state = self.lock();
        *state.pending.entry(place).or_default() += 1;
        state.newest = state.newest.max(Some(place));
        Ticket(Arc::new(Held { place, progress: self.clone() }))
    }

    /// Every event at or below this place was settled.
    pub fn place(&self) -> Option<u64> {
        let state = self.lock();
        match state.pending.first_key_value() {
            Some((&oldest, _)) => Some(oldest.saturating_sub(1)),
            None => state.newest,
        }
    }

    /// The place to keep on disk: the lower of now's and the one at the
    /// previous call. The feed may announce the events of one commit out
    /// of journal order (`store::GROUPS_PER_COMMIT`), so an event below
    /// the place can still be on its way to the connection, for the
    /// moment its committer takes to wake. Keeping the place from one
    /// call (half a second) back covers that moment.
    pub fn durable(&self) -> Option<u64> {
        let now = self.place();
        let mut state = self.lock();
        let durable = lower(state.previous, now);
        state.previous = now;
        durable
    }

    /// What [`Progress::durable`] would answer, without moving on: the
    /// place a write between ticks keeps.
    pub fn resume_place(&self) -> Option<u64> {
        let now = self.place();
        lower(self.lock().previous, now)
    }

    /// Freezes the place: from now on nothing settles.
    pub fn stop(&self) {
        self.lock().stopped = true;
    }

    fn settle(&self, place: u64) {
        let mut state = self.lock();
        if state.stopped {
            return;
        }
        if let Some(tickets) = state.pending.get_mut(&place) {
            *tickets -= 1;
            if *tickets == 0 {
                state.pending.remove(&place);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned lock's data is whole.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The lower of two places; a missing one counts as none.
fn lower(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// An event taken by a connection; see the module documentation.
#[derive(Clone)]
pub struct Ticket(#[expect(dead_code, reason = "held for its drop")] Arc<Held>);

struct Held {
    place: u64,
    progress: Arc<Progress>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.progress.settle(self.place);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_place_stays_below_the_oldest_event_on_its_way() {
        let progress = Arc::new(Progress::starting_at(Some(4), Arc::default()));
        assert_eq!(progress.place(), Some(4));
        let five = progress.take(5);
        let six = progress.take(6);
        let six_again = six.clone();
        drop(six);
        drop(six_again);
        assert_eq!(progress.place(), Some(4), "5 is still on its way");
        drop(five);
        assert_eq!(progress.place(), Some(6));
        drop(progress.take(7));
        assert_eq!(progress.place(), Some(7), "an event nobody took settles at once");
        let live = progress.take(8);
        let replayed = progress.take(8);
        drop(live);
        assert_eq!(progress.place(), Some(7), "taken twice, settled once");
        drop(replayed);
        assert_eq!(progress.place(), Some(8));
    }

    #[test]
    fn what_is_dropped_after_a_stop_is_not_settled() {
        let progress = Arc::new(Progress::starting_at(Some(1), Arc::default()));
        let two = progress.take(2);
        progress.stop();
        drop(two);
        assert_eq!(progress.place(), Some(1));
    }

    #[test]
    fn the_durable_place_lags_one_call_behind() {
        let progress = Arc::new(Progress::starting_at(Some(10), Arc::default()));
        drop(progress.take(12));
        // 11, of the same commit, has not reached the connection yet.
        assert_eq!(progress.durable(), Some(10));
        let eleven = progress.take(11);
        assert_eq!(progress.durable(), Some(10));
        drop(eleven);
        assert_eq!(progress.resume_place(), Some(10));
        assert_eq!(progress.durable(), Some(10));
        assert_eq!(progress.durable(), Some(12));
    }

    #[test]
    fn a_connection_that_never_ran_starts_at_the_head() {
        let progress = Progress::starting_at(None, Arc::default());
        assert_eq!((progress.start(), progress.place()), (None, None));
        progress.start_at(30);
        assert_eq!((progress.start(), progress.place()), (Some(30), Some(30)));
        progress.start_at(40);
        assert_eq!(progress.place(), Some(30), "only a connection that never ran");
    }
}
