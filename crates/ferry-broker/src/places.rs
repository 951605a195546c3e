//! The broker's connection places (`max_connections`, and each listener's
//! own): how many are taken, and the new connections waiting a moment for
//! one to be given back.
//!
//! A client that closes its connections and at once opens as many new ones
//! expects them admitted, as a single-threaded broker does: it handles the
//! closes it saw first (Mosquitto's `01-connect-max-connections` does this).
//! Here a close is noticed by the core serving that connection while
//! another thread accepts the next one, and the accept can come first. So
//! a connection that finds every place taken waits up to [`GRACE`] for one
//! before it is refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a connection waits for a place before it is refused: far
/// longer than a core takes to notice a close (microseconds, a parked
/// connection's included), short enough that a refused client hears so
/// at once for all it can tell.
pub(crate) const GRACE: Duration = Duration::from_millis(100);

/// Connections waiting for a place at once, at most; the next are refused
/// without waiting. Each holds a socket, so a flood of them at a full
/// broker must not hold more.
pub(crate) const MAX_WAITING: usize = 64;

#[derive(Default)]
pub(crate) struct Places {
    /// Connections admitted and not yet closed, over every listener.
    taken: AtomicUsize,
    waiting: AtomicUsize,
    freed: Notify,
}

/// A connection's turn to wait for a place; counted until it drops.
pub(crate) struct Waiting<'a>(&'a Places);

impl Places {
    /// Takes a place; returns how many were taken before.
    pub(crate) fn take(&self) -> usize {
        self.taken.fetch_add(1, Ordering::Relaxed)
    }

    /// Gives back a place [`Places::take`] took for a connection that was
    /// then refused: nobody waiting can use it, since it was never theirs.
    pub(crate) fn untake(&self) {
        self.taken.fetch_sub(1, Ordering::Relaxed);
    }

    /// Gives back the place of a connection that ended, waking those
    /// waiting for one.
    pub(crate) fn give_back(&self) {
        self.taken.fetch_sub(1, Ordering::Relaxed);
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.freed.notify_waiters();
        }
    }

    /// A turn to wait, unless [`MAX_WAITING`] connections already wait.
    pub(crate) fn wait_turn(&self) -> Option<Waiting<'_>> {
        let before = self.waiting.fetch_add(1, Ordering::Relaxed);
        let turn = Waiting(self);
        (before < MAX_WAITING).then_some(turn)
    }
}

impl Waiting<'_> {
    /// Tries `admit` until it stops refusing for want of a place (`full`
    /// says which refusals are that), or [`GRACE`] passes; returns its
    /// last answer.
    pub(crate) async fn retry<T, E>(
        &self,
        mut admit: impl FnMut() -> Result<T, E>,
        full: impl Fn(&E) -> bool,
    ) -> Result<T, E> {
        let deadline = tokio::time::Instant::now() + GRACE;
        loop {
            // Registered before trying, so that a place given back between
            // the try and the wait still wakes it.
            let freed = self.0.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match admit() {
                Err(refusal) if full(&refusal) => {}
                answer => return answer,
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return admit();
            }
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn admit(places: &Places, limit: usize) -> Result<(), usize> {
        let before = places.take();
        if before >= limit {
            places.untake();
            return Err(before);
        }
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn a_place_given_back_during_the_wait_admits_the_waiter() {
        let places = Arc::new(Places::default());
        admit(&places, 1).unwrap();
        let turn = places.wait_turn().unwrap();
        let giver = places.clone();
        tokio::spawn(async move {
            tokio::time::sleep(GRACE / 2).await;
            giver.give_back();
        });
        let started = tokio::time::Instant::now();
        assert_eq!(turn.retry(|| admit(&places, 1), |_| true).await, Ok(()));
        assert_eq!(started.elapsed(), GRACE / 2, "admitted when the place was given back");
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_place_the_wait_ends_in_a_refusal_after_the_grace() {
        let places = Places::default();
        admit(&places, 1).unwrap();
        let turn = places.wait_turn().unwrap();
        let started = tokio::time::Instant::now();
        assert_eq!(turn.retry(|| admit(&places, 1), |_| true).await, Err(1));
        assert_eq!(started.elapsed(), GRACE);
        // A refusal's place was never taken for good.
        assert_eq!(places.take(), 1);
    }

    #[test]
    fn at_most_max_waiting_wait_at_once() {
        let places = Places::default();
        let turns: Vec<_> = (0..MAX_WAITING).map(|_| places.wait_turn().unwrap()).collect();
        assert!(places.wait_turn().is_none());
        drop(turns);
        assert!(places.wait_turn().is_some());
    }
}
