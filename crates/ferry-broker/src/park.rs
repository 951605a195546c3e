//! The parking lot: where idle connections wait without a task.
//!
//! Why: a connection's task is a kilobyte (its future and tokio's header
//! around it) for as long as the connection lives, and most of a fleet's
//! connections are idle nearly all of the time. A parked connection is its
//! state alone (`connection::Parked`, about 250 bytes) and a waker of 32.
//! Its socket stays registered with the core's reactor, which wakes the
//! waker when input arrives; its session's wake-up (`wakeup.rs`) wakes it
//! for everything else. Woken, it is taken out of the lot and resumed
//! with a task of its own again, on the same core.
//!
//! One lot per core (`cores.rs`), found by the core's connections through
//! a thread-local. The lot knows nothing of connections: it holds
//! anything that can [`Resume`].

use futures_util::task::AtomicWaker;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Poll, Wake, Waker};

/// What waits in the lot: resumed once, on the lot's core, when its
/// ticket's waker is woken.
pub(crate) trait Resume: Send {
    fn resume(self: Box<Self>);
}

#[derive(Default)]
pub(crate) struct Lot {
    parked: Mutex<HashMap<u64, Box<dyn Resume>>>,
    /// Keys whose tickets were woken, from any thread. Bounded: a ticket is
    /// woken at most once by each of its two wakers (the reactor's and the
    /// session's take theirs when they wake it), so at most twice per
    /// parking.
    woken: Mutex<Vec<u64>>,
    /// The lot's own task.
    task: AtomicWaker,
    next_key: AtomicU64,
}

thread_local! {
    /// The lot of the core this thread runs; none outside the cores.
    static CURRENT: RefCell<Option<Arc<Lot>>> = const { RefCell::new(None) };
}

/// A parking place, reserved: its key and the waker that resumes
/// whatever is parked under it.
pub(crate) struct Ticket {
    pub key: u64,
    pub waker: Waker,
}

struct TicketWaker {
    lot: Arc<Lot>,
    key: u64,
}

impl Wake for TicketWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.lot.woken.lock().push(self.key);
        self.lot.task.wake();
    }
}

impl Lot {
    /// Makes `lot` the one this thread's connections park in.
    pub(crate) fn install(lot: Arc<Lot>) {
        CURRENT.with(|current| *current.borrow_mut() = Some(lot));
    }

    /// The lot of this thread's core, if it runs one.
    pub(crate) fn current() -> Option<Arc<Lot>> {
        CURRENT.with(|current| current.borrow().clone())
    }

    /// A key for the next parking, and its waker. Parking under it is
    /// optional: a waker whose key has nothing parked wakes nothing.
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let waker = Waker::from(Arc::new(TicketWaker { lot: self.clone(), key }));
        Ticket { key, waker }
    }

    /// Parks `parked` under `key` until the key's waker is woken. Wakes
    /// that came before this are not lost: the lot's task, on this same
    /// thread, looks at them only after this returns.
    pub(crate) fn park(&self, key: u64, parked: Box<dyn Resume>) {
        self.parked.lock().insert(key, parked);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.parked.lock().len()
    }

    /// Resumes what was woken, for as long as the core runs.
    pub(crate) async fn run(self: Arc<Self>) {
        let mut keys = Vec::new();
        loop {
            poll_fn(|cx| {
                self.task.register(cx.waker());
                std::mem::swap(&mut keys, &mut *self.woken.lock());
                if keys.is_empty() {
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            })
            .await;
            for key in keys.drain(..) {
                let parked = self.parked.lock().remove(&key);
                if let Some(parked) = parked {
                    parked.resume();
                }
            }
        }
    }

    /// Takes out everything parked, to drop it while the core's runtime is
    /// still there (a socket deregisters from its reactor when dropped).
    pub(crate) fn clear(&self) -> Vec<Box<dyn Resume>> {
        self.parked.lock().drain().map(|(_, parked)| parked).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counted(Arc<AtomicUsize>);

    impl Resume for Counted {
        fn resume(self: Box<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_woken_ticket_resumes_once_and_a_stale_one_nothing() {
        let lot = Arc::new(Lot::default());
        tokio::spawn(lot.clone().run());
        let resumed = Arc::new(AtomicUsize::new(0));
        let ticket = lot.ticket();
        // Woken before it is parked, as a reactor on another thread may.
        ticket.waker.wake_by_ref();
        lot.park(ticket.key, Box::new(Counted(resumed.clone())));
        // Woken again by its second waker before the lot ran.
        ticket.waker.wake_by_ref();
        let unused = lot.ticket();
        unused.waker.wake();
        while lot.len() > 0 {
            tokio::task::yield_now().await;
        }
        tokio::task::yield_now().await;
        assert_eq!(resumed.load(Ordering::Relaxed), 1);
        assert!(lot.woken.lock().is_empty());
    }
}
