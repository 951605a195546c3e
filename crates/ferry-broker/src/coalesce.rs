//! Wake-up coalescing: a core that runs out of work while it is being
//! woken often naps for a moment before it waits for the next event, so
//! that the events arriving meanwhile are handled in one wake-up, as a
//! network card's interrupt coalescing (`ethtool -C rx-usecs`) does.
//!
//! Why: at one message in flight per device, each message wakes a core on
//! its own, and a sleep and a wake-up cost several microseconds of kernel
//! work (more in a virtual machine, where an idle CPU halts). Measured at
//! 20,000 msg/s through 1,000 publisher/subscriber pairs on 2 CPUs, a
//! 200 µs nap cut the broker's context switches per message from 1.8 to
//! 0.3 and its CPU per message by about a fifth, and added about 0.3 ms
//! to the median latency (docs/benchmarks.md, "Wake-up coalescing"). A
//! client that waits for each answer before it sends again (a closed loop)
//! waits for the naps too, so this is off unless configured (`coalesce_us`).
//!
//! Only a core woken often naps: one whose last wait was longer than two
//! naps goes to sleep at once, so a quiet broker adds no latency.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Longest nap allowed: beyond a millisecond the added latency outweighs
/// what any wake-up saved costs.
pub const MAX_COALESCE: Duration = Duration::from_millis(1);

thread_local! {
    /// When this core last began to wait, if it has.
    static WAIT_BEGAN: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Whether its last wait was short enough to nap before the next.
    static WOKEN_OFTEN: Cell<bool> = const { Cell::new(false) };
}

/// The hooks of one core's runtime (`tokio::runtime::Builder::
/// on_thread_park` and `on_thread_unpark`), for a nap of `nap`.
#[derive(Clone, Copy)]
pub(crate) struct Coalesce {
    nap: Duration,
}

impl Coalesce {
    /// `None` for no nap: the runtime then needs no hooks.
    pub(crate) fn new(nap: Duration) -> Option<Coalesce> {
        (!nap.is_zero()).then(|| Coalesce { nap: nap.min(MAX_COALESCE) })
    }

    /// Before the core waits for events: naps if it is woken often. The
    /// wait that follows then finds what came meanwhile ready and returns
    /// at once.
    pub(crate) fn before_wait(self) {
        WAIT_BEGAN.set(Some(Instant::now()));
        if WOKEN_OFTEN.get() {
            std::thread::sleep(self.nap);
        }
    }

    /// After the wait: how long it took, nap included, decides the next.
    pub(crate) fn after_wait(self) {
        if let Some(began) = WAIT_BEGAN.get() {
            WOKEN_OFTEN.set(self.woken_often(began.elapsed()));
        }
    }

    /// Whether a core whose last wait took `waited` is woken often enough
    /// to nap: a wait that a nap would have covered, with room for the
    /// nap's own overshoot (the timer's slack, 50 µs by default).
    fn woken_often(self, waited: Duration) -> bool {
        waited <= self.nap * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_nap_needs_no_hooks() {
        assert!(Coalesce::new(Duration::ZERO).is_none());
        let longest = Coalesce::new(Duration::from_secs(1)).unwrap();
        assert_eq!(longest.nap, MAX_COALESCE);
    }

    #[test]
    fn only_a_core_woken_often_naps() {
        let coalesce = Coalesce::new(Duration::from_micros(200)).unwrap();
        assert!(coalesce.woken_often(Duration::from_micros(30)));
        assert!(coalesce.woken_often(Duration::from_micros(400)));
        assert!(!coalesce.woken_often(Duration::from_micros(401)));
        assert!(!coalesce.woken_often(Duration::from_secs(1)));
    }

    #[test]
    fn a_core_naps_until_a_wait_is_long() {
        // On a thread of its own: the state is the thread's.
        std::thread::spawn(|| {
            let nap = Duration::from_millis(1);
            let coalesce = Coalesce::new(nap).unwrap();
            WOKEN_OFTEN.set(true);
            let began = Instant::now();
            coalesce.before_wait();
            assert!(began.elapsed() >= nap, "did not nap while woken often");
            assert!(WAIT_BEGAN.get().is_some_and(|at| at >= began));
            // A wait of more than two naps ends the naps.
            WAIT_BEGAN.set(Some(began - nap * 3));
            coalesce.after_wait();
            assert!(!WOKEN_OFTEN.get());
        })
        .join()
        .unwrap();
    }
}
