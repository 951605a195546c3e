//! The parking lot: where idle connections wait without a task.
//!
//! Why: a connection's task is a kilobyte (its future and tokio's header
//! around it) for as long as the connection lives, and most of a fleet's
//! connections are idle nearly all of the time. A parked connection is its
//! state alone (`connection::Parked`, about 150 bytes) and a waker of 32.
//!
//! Its socket leaves the core's reactor, whose registration of it is 256
//! bytes more, and is watched by the lot's own epoll instead: one
//! `EPOLLONESHOT` entry, which the kernel keeps outside the process's
//! memory and which wakes the ticket's key once when input arrives. Its
//! session's wake-up (`wakeup.rs`) wakes it for everything else. Woken, it
//! is taken out of the lot and resumed with a task of its own again, on
//! the same core, its socket back in the reactor. A park and a resume cost
//! three `epoll_ctl` calls (out of the reactor, arm the lot's entry, back
//! in), which only a connection that stays quiet for a second pays.
//!
//! An entry stays in the lot's epoll, disarmed, after its connection is
//! resumed, so the next park only re-arms it (the kernel drops it when the
//! socket closes). One armed for a connection that its session resumed
//! fires once more, later, for a key with nothing parked under it: a
//! wasted look, never a wrong resume, as keys are never reused.
//!
//! One lot per core (`cores.rs`), found by the core's connections through
//! a thread-local. The lot knows nothing of connections: it holds
//! anything that can [`Resume`].

use futures_util::task::AtomicWaker;
use parking_lot::Mutex;
use rustix::event::{epoll, Timespec};
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Poll, Wake, Waker};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Socket events taken from the lot's epoll per system call. More wait
/// for the next call in the same turn; the number only sizes a buffer on
/// the stack.
const EVENTS_PER_WAIT: usize = 256;

/// What waits in the lot: resumed once, on the lot's core, when its
/// ticket's waker is woken.
pub(crate) trait Resume: Send {
    fn resume(self: Box<Self>);
}

pub(crate) struct Lot {
    parked: Mutex<HashMap<u64, Box<dyn Resume>>>,
    /// Watches the parked connections' sockets: each entry's data is the
    /// key it was armed for. Itself registered with the core's reactor,
    /// which says when it has events.
    epoll: AsyncFd<OwnedFd>,
    /// Keys whose tickets were woken, from any thread. Bounded: a ticket is
    /// woken at most twice by the reactor (before its socket left it and
    /// by the lot's epoll) and once by its session, per parking.
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
    /// A lot for the core whose runtime this thread is in.
    pub(crate) fn new() -> io::Result<Lot> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        // SAFETY: the OwnedFd is open and moves into the AsyncFd, which
        // owns it until dropped, so it stays open and its as_raw_fd is the
        // same descriptor for the registration's whole life.
        let epoll = unsafe { AsyncFd::register_with_interest(epoll, Interest::READABLE) }
            .map_err(|refused| refused.into_parts().1)?;
        Ok(Lot {
            parked: Mutex::default(),
            epoll,
            woken: Mutex::default(),
            task: AtomicWaker::new(),
            next_key: AtomicU64::new(0),
        })
    }

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

    /// Wakes `key`'s ticket once when `socket` becomes readable or closes
    /// (at once if it already is). For a socket out of the reactor, whose
    /// input nothing else watches.
    pub(crate) fn watch(&self, socket: BorrowedFd<'_>, key: u64) -> io::Result<()> {
        let data = epoll::EventData::new_u64(key);
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
        self.parked.lock().len()
    }

    /// Resumes what was woken, for as long as the core runs.
    pub(crate) async fn run(self: Arc<Self>) {
        let mut keys = Vec::new();
        loop {
            poll_fn(|cx| {
                self.task.register(cx.waker());
                std::mem::swap(&mut keys, &mut *self.woken.lock());
                self.take_socket_events(cx, &mut keys);
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

    /// Adds the keys of the sockets that became readable since the last
    /// look, and leaves the lot's task registered for the next.
    fn take_socket_events(&self, cx: &mut std::task::Context<'_>, keys: &mut Vec<u64>) {
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
            keys.extend(taken.iter().map(|event| event.data.u64()));
            if taken.len() < EVENTS_PER_WAIT {
                // Drained: the reactor says when there are more.
                ready.clear_ready();
            }
        }
    }

    /// Takes out everything parked, to drop it on the core that owns it.
    /// Parked connections hold their sessions, whose wakers hold the lot:
    /// a cycle, which this breaks.
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
        let lot = Arc::new(Lot::new().unwrap());
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

    /// Waits, yielding to the lot's task and the reactor, until `lot` has
    /// nothing parked.
    async fn emptied(lot: &Lot) {
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
    async fn a_watched_socket_resumes_its_key_on_input_and_rearms() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let lot = Arc::new(Lot::new().unwrap());
        tokio::spawn(lot.clone().run());
        let (mut peer, socket) = std::os::unix::net::UnixStream::pair().unwrap();
        let resumed = Arc::new(AtomicUsize::new(0));

        let first = lot.ticket();
        lot.watch(socket.as_fd(), first.key).unwrap();
        lot.park(first.key, Box::new(Counted(resumed.clone())));
        peer.write_all(b"x").unwrap();
        emptied(&lot).await;
        assert_eq!(resumed.load(Ordering::Relaxed), 1);

        // The fired entry is re-armed under a new key, and input already
        // waiting (the byte, unread) wakes it at once.
        let second = lot.ticket();
        lot.watch(socket.as_fd(), second.key).unwrap();
        lot.park(second.key, Box::new(Counted(resumed.clone())));
        emptied(&lot).await;
        assert_eq!(resumed.load(Ordering::Relaxed), 2);
    }
}
