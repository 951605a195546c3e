//! A session's wake-up call to its connection: new messages, a takeover,
//! an expired keep-alive, an administrator's close, shutdown.
//!
//! A running connection waits for it on a `Notify`, like anyone else
//! (`Session::settle` does too). A parked connection (`park.rs`) has no
//! task to wait with, so it leaves its lot's ticket here instead; every
//! `notify_one` also wakes that ticket, which puts the connection back on
//! its core.

use crate::park::Ticket;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Wakeup {
    notify: Notify,
    /// The parked connection's ticket; 0 while it runs. Every delivery
    /// calls `notify_one`, which loads this before it swaps: a load is
    /// cheaper than a read-modify-write on a line that publishers on every
    /// core contend for (measured: 5-20% of the CPU per message at one
    /// message in flight). A number, not a waker: 8 bytes in every
    /// session where a waker and a flag took 32, and 32 more allocated.
    parked: AtomicU64,
}

impl Wakeup {
    /// Wakes the connection, running or parked; a connection that is
    /// neither waiting nor parked finds the call when it next waits.
    pub(crate) fn notify_one(&self) {
        self.notify.notify_one();
        // SeqCst, as `park`'s store: of this load and `park`'s poll of the
        // notification, at least one sees the other's write.
        if self.parked.load(Ordering::SeqCst) != 0 {
            if let Some(ticket) = Ticket::from_bits(self.parked.swap(0, Ordering::SeqCst)) {
                ticket.wake();
            }
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

    /// Leaves `ticket` for the next `notify_one`, then polls `waiting` (the
    /// connection's own `notified()`) with its waker: Ready means a call
    /// came before the ticket was in place, and the connection must not
    /// park.
    ///
    /// The order makes a lost call impossible: a `notify_one` either stored
    /// its permit before this poll looks (Ready here) or finds the ticket.
    pub(crate) fn park(&self, ticket: Ticket, waiting: std::pin::Pin<&mut Notified<'_>>) -> bool {
        self.parked.store(ticket.bits(), Ordering::SeqCst);
        if let Poll::Ready(()) = waiting.poll(&mut Context::from_waker(&ticket.waker())) {
            self.unpark();
            return false;
        }
        true
    }

    /// The connection runs again: a later call must not go to the ticket
    /// it left when it parked.
    pub(crate) fn unpark(&self) {
        self.parked.store(0, Ordering::Relaxed);
    }
}
