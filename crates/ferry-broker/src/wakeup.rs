//! A session's wake-up call to its connection: new messages, a takeover,
//! an expired keep-alive, an administrator's close, shutdown.
//!
//! A running connection waits for it on a `Notify`, like anyone else
//! (`Session::settle` does too). A parked connection (`park.rs`) has no
//! task to wait with, so it leaves a waker here instead; every
//! `notify_one` also wakes that waker, which puts the connection back on
//! its core.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Wakeup {
    notify: Notify,
    parked: AtomicWaker,
    /// Whether `parked` may hold a waker: every delivery calls
    /// `notify_one`, and a load is cheaper than the two read-modify-writes
    /// of `AtomicWaker::wake` on a line that publishers on every core
    /// contend for (measured: 5-20% of the CPU per message at one message
    /// in flight).
    is_parked: AtomicBool,
}

impl Wakeup {
    /// Wakes the connection, running or parked; a connection that is
    /// neither waiting nor parked finds the call when it next waits.
    pub(crate) fn notify_one(&self) {
        self.notify.notify_one();
        // SeqCst, as `park`'s store: of this load and `park`'s poll of the
        // notification, at least one sees the other's write.
        if self.is_parked.load(Ordering::SeqCst) {
            self.parked.wake();
        }
    }

    /// Wakes whoever waits now, and nobody later; not a parked connection
    /// (used to answer `Session::settle`'s waiter).
    pub(crate) fn notify_waiters(&self) {
        self.notify.notify_waiters();
    }

    pub(crate) fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// Leaves `waker` for the next `notify_one`, then polls `waiting` (the
    /// connection's own `notified()`) with it: Ready means a call came
    /// before the waker was in place, and the connection must not park.
    ///
    /// The order makes a lost call impossible: a `notify_one` either stored
    /// its permit before this poll looks (Ready here) or finds the waker.
    pub(crate) fn park(&self, waker: &Waker, waiting: std::pin::Pin<&mut Notified<'_>>) -> bool {
        self.parked.register(waker);
        self.is_parked.store(true, Ordering::SeqCst);
        if let Poll::Ready(()) = waiting.poll(&mut Context::from_waker(waker)) {
            self.unpark();
            return false;
        }
        true
    }

    /// The connection runs again: a later call must not go to the waker
    /// it left when it parked.
    pub(crate) fn unpark(&self) {
        self.is_parked.store(false, Ordering::Relaxed);
        self.parked.take();
    }
}
