//! The parking lot: where idle connections wait without a task.
//!
//! Why: a connection's task is a kilobyte (its future and tokio's header
//! around it) for as long as the connection lives, and most of a fleet's
//! connections are idle nearly all of the time. A parked connection is its
//! state alone (`connection::Parked`, about 150 bytes), kept in a place of
//! the lot (`places.rs`), and its ticket, a number its session keeps in
//! place of a waker.
//!
//! Its socket leaves the core's reactor, whose registration of it is 256
//! bytes more, and is watched by the lot's own epoll instead: one
//! `EPOLLONESHOT` entry, which the kernel keeps outside the process's
//! memory and which wakes the ticket once when input arrives. Its
//! session's wake-up (`wakeup.rs`) wakes it for everything else. Woken, it
//! is taken out of the lot and resumed with a task of its own again, on
//! the same core, its socket back in the reactor. A park and a resume cost
//! three `epoll_ctl` calls (out of the reactor, arm the lot's entry, back
//! in), which only a connection that stays quiet for a second pays.
//!
//! An entry stays in the lot's epoll, disarmed, after its connection is
//! resumed, so the next park only re-arms it (the kernel drops it when the
//! socket closes). One armed for a connection that its session resumed
//! fires once more, later, for a ticket whose place has moved on to a new
//! generation: a wasted look, never a wrong resume.
//!
//! A ticket names its lot by number (`LOTS`), and its place, so waking
//! it, from any thread, takes no pointer and no allocation of its own: a
//! waker per parked connection was 32 bytes, a pointer to the lot in the
//! session 8 more than the ticket, and a map from ticket to a boxed
//! connection ~41 more.
//!
//! One lot per core, made by `cores.rs` and found by the core's
//! connections through a thread-local of theirs. The lot knows nothing of
//! connections: it holds anything that can [`Resume`].

mod places;

use futures_util::task::AtomicWaker;
use parking_lot::{Mutex, RwLock};
use places::{Places, Spot};
use rustix::event::{epoll, Timespec};
use std::future::poll_fn;
use std::io;
use std::mem::MaybeUninit;
use std::num::NonZeroU64;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Poll, RawWaker, RawWakerVTable, Waker};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Socket events taken from the lot's epoll per system call. More wait
/// for the next call in the same turn; the number only sizes a buffer on
/// the stack.
const EVENTS_PER_WAIT: usize = 256;

/// A ticket's bits, from the high end: its lot's number (16; so at most
/// 65,535 lots live at once, one per core per broker), its place's
/// generation (16) and its place's index (32).
const LOT_SHIFT: u32 = 48;
const GENERATION_SHIFT: u32 = 32;

/// Every lot alive, by its number less one: how a woken ticket reaches its
/// lot. A slot whose lot was dropped is given to the next lot made; a
/// ticket of the old one then names a place there whose generation it
/// does not match.
static LOTS: RwLock<Vec<Weak<Signal>>> = RwLock::new(Vec::new());

/// Lots made so far: each one's places start at a generation of its own.
static LOTS_MADE: AtomicU16 = AtomicU16::new(0);

/// What waits in the lot: resumed once, on the lot's core, when its
/// ticket is woken.
pub(crate) trait Resume: Send {
    fn resume(self);
}

/// The part of a lot that any thread may reach: its woken tickets.
struct Signal {
    /// Tickets that were woken. Bounded: a ticket is woken at most twice
    /// by the reactor (before its socket left it and by the lot's epoll)
    /// and once by its session, per parking.
    woken: Mutex<Vec<u64>>,
    /// The lot's own task.
    task: AtomicWaker,
}

pub(crate) struct Lot<T> {
    /// Its number, shifted into a ticket's high bits.
    number: u64,
    signal: Arc<Signal>,
    /// Filled and emptied by the lot's own thread only; locked because
    /// the lot is shared with its task.
    places: Mutex<Places<T>>,
    /// Watches the parked connections' sockets: each entry's data is the
    /// ticket it was armed for. Itself registered with the core's reactor,
    /// which says when it has events.
    epoll: AsyncFd<OwnedFd>,
}

/// A parking place, reserved: it names its lot and its place, and resumes
/// whatever is parked there when woken. Never zero, so that zero can mean
/// "none".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket(NonZeroU64);

// A ticket travels in a waker's data pointer.
const _: () = assert!(usize::BITS == u64::BITS);

/// The waker of a ticket: its data pointer is the ticket's bits, never
/// dereferenced.
static TICKET_WAKER: RawWakerVTable =
    RawWakerVTable::new(clone_ticket_waker, wake_ticket, wake_ticket, forget_ticket_waker);

fn clone_ticket_waker(data: *const ()) -> RawWaker {
    RawWaker::new(data, &TICKET_WAKER)
}

fn wake_ticket(data: *const ()) {
    if let Some(ticket) = Ticket::from_bits(data.addr() as u64) {
        ticket.wake();
    }
}

fn forget_ticket_waker(_: *const ()) {}

impl Ticket {
    pub(crate) fn from_bits(bits: u64) -> Option<Ticket> {
        NonZeroU64::new(bits).map(Ticket)
    }

    pub(crate) fn bits(self) -> u64 {
        self.0.get()
    }

    fn spot(self) -> Spot {
        Spot { index: self.bits() as u32, generation: (self.bits() >> GENERATION_SHIFT) as u16 }
    }

    /// Resumes whatever is parked under this ticket, or will be; nothing
    /// if its lot is gone.
    pub(crate) fn wake(self) {
        let Some(index) = ((self.bits() >> LOT_SHIFT) as usize).checked_sub(1) else { return };
        // The registry's lock is let go before the lot is used.
        let signal = LOTS.read().get(index).and_then(Weak::upgrade);
        if let Some(signal) = signal {
            signal.woken.lock().push(self.bits());
            signal.task.wake();
        }
    }

    /// This ticket as a waker, for what wakes with one (the reactor).
    pub(crate) fn waker(self) -> Waker {
        let data = std::ptr::without_provenance(self.bits() as usize);
        // SAFETY: the vtable's functions never dereference the data
        // pointer, which only carries the ticket's bits (no wider than a
        // pointer, asserted above); cloning copies them, dropping does
        // nothing, and waking works from any thread (the registry and the
        // lot's queue are locked), as `Waker` requires.
        unsafe { Waker::from_raw(RawWaker::new(data, &TICKET_WAKER)) }
    }
}

impl<T: Resume> Lot<T> {
    /// A lot for the core whose runtime this thread is in.
    pub(crate) fn new() -> io::Result<Arc<Lot<T>>> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        // SAFETY: the OwnedFd is open and moves into the AsyncFd, which
        // owns it until dropped, so it stays open and its as_raw_fd is the
        // same descriptor for the registration's whole life.
        let epoll = unsafe { AsyncFd::register_with_interest(epoll, Interest::READABLE) }
            .map_err(|refused| refused.into_parts().1)?;
        let signal = Arc::new(Signal { woken: Mutex::default(), task: AtomicWaker::new() });
        let mut lots = LOTS.write();
        let index = lots.iter().position(|lot| lot.strong_count() == 0).unwrap_or(lots.len());
        if index >= (1 << (u64::BITS - LOT_SHIFT)) - 1 {
            return Err(io::Error::other("65,535 parking lots already"));
        }
        match lots.get_mut(index) {
            Some(slot) => *slot = Arc::downgrade(&signal),
            None => lots.push(Arc::downgrade(&signal)),
        }
        Ok(Arc::new(Lot {
            number: (index as u64 + 1) << LOT_SHIFT,
            signal,
            places: Mutex::new(Places::new(LOTS_MADE.fetch_add(1, Ordering::Relaxed))),
            epoll,
        }))
    }

    /// A ticket for the next parking, on this lot's thread. Parking under
    /// it is optional, but nothing else may park in this lot before it
    /// does: the ticket names the place the next parking takes.
    pub(crate) fn ticket(&self) -> Ticket {
        let Spot { index, generation } = self.places.lock().next();
        let bits = self.number | u64::from(generation) << GENERATION_SHIFT | u64::from(index);
        Ticket(NonZeroU64::new(bits).expect("a lot's number is never zero"))
    }

    /// Parks `parked` under `ticket`, the last one this lot gave, until the
    /// ticket is woken. Wakes that came before this are not lost: the
    /// lot's task, on this same thread, looks at them only after this
    /// returns.
    pub(crate) fn park(&self, ticket: Ticket, parked: T) {
        self.places.lock().fill(ticket.spot(), parked);
    }

    /// Wakes `ticket` once when `socket` becomes readable or closes (at
    /// once if it already is). For a socket out of the reactor, whose input
    /// nothing else watches.
    pub(crate) fn watch(&self, socket: BorrowedFd<'_>, ticket: Ticket) -> io::Result<()> {
        let data = epoll::EventData::new_u64(ticket.bits());
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP | epoll::EventFlags::ONESHOT;
        let lot = self.epoll.get_ref();
        match epoll::modify(lot, socket, data, flags) {
            Err(rustix::io::Errno::NOENT) => epoll::add(lot, socket, data, flags),
            done => done,
        }
        .map_err(io::Error::from)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.places.lock().len()
    }

    /// Resumes what was woken, for as long as the core runs.
    pub(crate) async fn run(self: Arc<Self>) {
        let mut tickets = Vec::new();
        loop {
            poll_fn(|cx| {
                self.signal.task.register(cx.waker());
                std::mem::swap(&mut tickets, &mut *self.signal.woken.lock());
                self.take_socket_events(cx, &mut tickets);
                if tickets.is_empty() {
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            })
            .await;
            for ticket in tickets.drain(..).filter_map(Ticket::from_bits) {
                let parked = self.places.lock().take(ticket.spot());
                if let Some(parked) = parked {
                    parked.resume();
                }
            }
        }
    }

    /// Adds the tickets of the sockets that became readable since the last
    /// look, and leaves the lot's task registered for the next.
    fn take_socket_events(&self, cx: &mut std::task::Context<'_>, tickets: &mut Vec<u64>) {
        let no_wait = Timespec { tv_sec: 0, tv_nsec: 0 };
        let mut events = [const { MaybeUninit::<epoll::Event>::uninit() }; EVENTS_PER_WAIT];
        while let Poll::Ready(Ok(mut ready)) = self.epoll.poll_read_ready(cx) {
            let taken = match epoll::wait(self.epoll.get_ref(), &mut events[..], Some(&no_wait)) {
                Ok((taken, _)) => taken,
                Err(rustix::io::Errno::INTR) => continue,
                Err(error) => {
                    tracing::error!(%error, "reading the parked connections' socket events");
                    return;
                }
            };
            tickets.extend(taken.iter().map(|event| event.data.u64()));
            if taken.len() < EVENTS_PER_WAIT {
                // Drained: the reactor says when there are more.
                ready.clear_ready();
            }
        }
    }

    /// Takes out everything parked, to drop it on the core that owns it
    /// (a parked socket's drop belongs with the core's reactor).
    pub(crate) fn clear(&self) -> Vec<T> {
        self.places.lock().drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counted(Arc<AtomicUsize>);

    impl Resume for Counted {
        fn resume(self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_woken_ticket_resumes_once_and_a_stale_one_nothing() {
        let lot = Lot::<Counted>::new().unwrap();
        tokio::spawn(lot.clone().run());
        let resumed = Arc::new(AtomicUsize::new(0));
        let ticket = lot.ticket();
        // Woken before it is parked, through a clone of its waker on
        // another thread, as the reactor may.
        let waker = ticket.waker();
        std::thread::spawn({
            let waker = waker.clone();
            move || waker.wake_by_ref()
        })
        .join()
        .unwrap();
        lot.park(ticket, Counted(resumed.clone()));
        // Woken again, by its session, before the lot ran.
        ticket.wake();
        waker.wake();
        lot.ticket().wake();
        while lot.len() > 0 {
            tokio::task::yield_now().await;
        }
        tokio::task::yield_now().await;
        assert_eq!(resumed.load(Ordering::Relaxed), 1);
        assert!(lot.signal.woken.lock().is_empty());
    }

    #[tokio::test]
    async fn a_ticket_of_a_dropped_lot_resumes_nothing_in_the_lot_after_it() {
        let gone = Lot::<Counted>::new().unwrap();
        let stale = gone.ticket();
        drop(gone);
        stale.wake();
        // Likely at the dropped lot's number, unless another test's lot
        // took it first.
        let lot = Lot::<Counted>::new().unwrap();
        tokio::spawn(lot.clone().run());
        let resumed = Arc::new(AtomicUsize::new(0));
        lot.park(lot.ticket(), Counted(resumed.clone()));
        stale.wake();
        stale.waker().wake_by_ref();
        while !lot.signal.woken.lock().is_empty() {
            tokio::task::yield_now().await;
        }
        assert_eq!(resumed.load(Ordering::Relaxed), 0);
        assert_eq!(lot.len(), 1);
        drop(lot.clear());
    }

    /// Waits, yielding to the lot's task and the reactor, until `lot` has
    /// nothing parked.
    async fn emptied(lot: &Lot<Counted>) {
        let emptied = async {
            while lot.len() > 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), emptied)
            .await
            .expect("the parked entry was resumed");
    }

    #[tokio::test]
    async fn a_watched_socket_resumes_its_ticket_on_input_and_rearms() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let lot = Lot::<Counted>::new().unwrap();
        tokio::spawn(lot.clone().run());
        let (mut peer, socket) = std::os::unix::net::UnixStream::pair().unwrap();
        let resumed = Arc::new(AtomicUsize::new(0));

        let first = lot.ticket();
        lot.watch(socket.as_fd(), first).unwrap();
        lot.park(first, Counted(resumed.clone()));
        peer.write_all(b"x").unwrap();
        emptied(&lot).await;
        assert_eq!(resumed.load(Ordering::Relaxed), 1);

        // The fired entry is re-armed under a new ticket, and input already
        // waiting (the byte, unread) wakes it at once.
        let second = lot.ticket();
        lot.watch(socket.as_fd(), second).unwrap();
        lot.park(second, Counted(resumed.clone()));
        emptied(&lot).await;
        assert_eq!(resumed.load(Ordering::Relaxed), 2);
    }
}
