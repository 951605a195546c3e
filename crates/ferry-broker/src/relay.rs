//! Wake-ups from the log writer's thread to connections, relayed through
//! each connection's core: one wake of a core per batch of answers.
//!
//! Why: a core is a single-threaded tokio runtime, and tokio wakes one for
//! every task scheduled from another thread, with an `eventfd` write. The
//! writer answers a batch's publishers one by one, so each PUBACK cost a
//! system call on the writer and, often, a wake-up of the core: at one
//! message in flight per device, one of each per message (measured: 1.0
//! `write` per message on the writer thread, docs/benchmarks.md, "Answers
//! relayed through each core"). Here the writer leaves the sessions to
//! wake in their core's mailbox and wakes the core's courier once; the
//! courier, on the core, wakes each connection there, which costs no
//! system call.

use crate::session::Session;
use parking_lot::Mutex;
use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::Notify;

/// Sessions whose connections, on one core, are to be woken.
#[derive(Default)]
pub(crate) struct Mailbox {
    waiting: Mutex<Vec<Arc<Session>>>,
    posted: Notify,
}

thread_local! {
    /// The mailbox of the core this thread runs, if it runs one.
    static HERE: Cell<Option<&'static Mailbox>> = const { Cell::new(None) };
}

/// The mailbox of the core this thread runs: where to relay a wake-up for
/// a connection served here. `None` off the cores.
pub(crate) fn here() -> Option<&'static Mailbox> {
    HERE.with(Cell::get)
}

/// Gives the calling core thread its mailbox and returns its courier, the
/// task to run on that core until it stops.
///
/// The mailbox is leaked: answers name it by reference, and the log
/// writer, which holds answers, outlives the cores at shutdown. A core
/// thread starts once per `Cores::start`, so this is a hundred bytes or so
/// per core for the life of the process.
pub(crate) fn open() -> impl Future<Output = ()> + Send + 'static {
    let mailbox: &'static Mailbox = Box::leak(Box::default());
    HERE.with(|here| here.set(Some(mailbox)));
    async move {
        let mut delivering = Vec::new();
        loop {
            mailbox.posted.notified().await;
            std::mem::swap(&mut delivering, &mut *mailbox.waiting.lock());
            for session in delivering.drain(..) {
                session.wake.notify_one();
            }
        }
    }
}

/// Wake-ups gathered on a thread that is no core's, sent by [`Posts::send`].
#[derive(Default)]
pub(crate) struct Posts {
    posts: Vec<(Option<&'static Mailbox>, Arc<Session>)>,
}

impl Posts {
    /// Wakes `session`'s connection, served on the core of `mailbox`, at
    /// the next [`Posts::send`].
    pub(crate) fn push(&mut self, mailbox: Option<&'static Mailbox>, session: Arc<Session>) {
        self.posts.push((mailbox, session));
    }

    /// Puts every wake-up in its core's mailbox and wakes each core's
    /// courier once; a connection whose core is not known is woken here.
    pub(crate) fn send(&mut self) {
        self.posts.sort_unstable_by_key(|(mailbox, _)| mailbox.map(std::ptr::from_ref));
        let mut posts = self.posts.drain(..).peekable();
        while let Some((mailbox, session)) = posts.next() {
            let Some(mailbox) = mailbox else {
                session.wake.notify_one();
                continue;
            };
            let mut waiting = mailbox.waiting.lock();
            waiting.push(session);
            while let Some((_, session)) =
                posts.next_if(|(next, _)| next.is_some_and(|next| std::ptr::eq(next, mailbox)))
            {
                waiting.push(session);
            }
            drop(waiting);
            mailbox.posted.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_ups_reach_each_connection_through_its_core() {
        let sessions: Vec<Arc<Session>> =
            (1..=3).map(|id| Arc::new(Session::new(id, format!("c{id}").into(), 0))).collect();
        let (opened, mailbox) = std::sync::mpsc::channel();
        let on_core = sessions.clone();
        let core = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.spawn(open());
            opened.send(here().expect("a core thread has a mailbox")).unwrap();
            runtime.block_on(async {
                for session in &on_core {
                    session.wake.notified().await;
                }
            });
        });
        let mailbox = mailbox.recv().unwrap();
        assert!(here().is_none(), "this thread is no core's");
        let mut posts = Posts::default();
        posts.push(Some(mailbox), sessions[0].clone());
        posts.push(None, sessions[1].clone());
        posts.push(Some(mailbox), sessions[2].clone());
        posts.send();
        core.join().unwrap();
        assert!(mailbox.waiting.lock().is_empty(), "the courier took every post");
    }
}
