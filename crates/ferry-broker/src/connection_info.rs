//! What the admin API sees of one live connection: where it came from,
//! what it said in its CONNECT, its traffic so far, and an administrator's
//! request to close it.
//!
//! Shared by the connection's task, which alone writes the counters, and
//! the broker's registry of connections (`Connections`), through which
//! `inspect.rs` finds it. The counters are relaxed atomics on this
//! connection's own allocation: the publish path adds to them without a
//! lock and without touching a cache line another connection writes.

use crate::listener::Listener;
use crate::session::Session;
use ferry_mqtt::ProtocolVersion;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The connections attached now, by session id, each with its session.
/// A registry of its own rather than a field of the session: every
/// session, offline ones too, would pay for the pointer, and a session's
/// size is held to a budget. Its lock is taken when a client connects and
/// when it leaves, and by the admin API, never on the publish path.
#[derive(Default)]
pub(crate) struct Connections(Mutex<HashMap<u64, Attached>>);

/// A session and the connection attached to it.
type Attached = (Arc<Session>, Arc<ConnectionInfo>);

impl Connections {
    /// `info` is the connection of `session` from now on (a connection
    /// that took the session over replaces the one before).
    pub(crate) fn attach(&self, session: &Arc<Session>, info: &Arc<ConnectionInfo>) {
        self.0.lock().insert(session.id, (session.clone(), info.clone()));
    }

    /// The connection `info` has ended; a newer one of the session stays.
    pub(crate) fn detach(&self, session: &Session, info: &Arc<ConnectionInfo>) {
        let mut connections = self.0.lock();
        if connections.get(&session.id).is_some_and(|(_, current)| Arc::ptr_eq(current, info)) {
            connections.remove(&session.id);
        }
    }

    /// The connection of the session with this id, if one is attached.
    pub(crate) fn of(&self, session_id: u64) -> Option<Arc<ConnectionInfo>> {
        self.0.lock().get(&session_id).map(|(_, info)| info.clone())
    }

    /// Every connection with its session.
    pub(crate) fn all(&self) -> Vec<Attached> {
        self.0.lock().values().cloned().collect()
    }
}

/// One connection's particulars and traffic.
#[derive(Debug)]
pub(crate) struct ConnectionInfo {
    pub address: SocketAddr,
    pub listener: Arc<Listener>,
    /// The proven user name, if any.
    pub username: Option<Arc<str>>,
    pub version: ProtocolVersion,
    /// The keep-alive in force (the server's, when it overrode the
    /// client's), in seconds.
    pub keep_alive_secs: u16,
    pub clean_start: bool,
    /// Unix milliseconds.
    pub connected_at_ms: u64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// PUBLISH packets received from the client.
    pub messages_in: AtomicU64,
    /// PUBLISH packets sent to the client.
    pub messages_out: AtomicU64,
    /// Set once by an administrator's disconnect, with its reason; the
    /// connection reads it when its session wakes it.
    closing: OnceLock<Box<str>>,
}

impl ConnectionInfo {
    pub(crate) fn new(
        address: SocketAddr,
        listener: Arc<Listener>,
        username: Option<Arc<str>>,
        version: ProtocolVersion,
        keep_alive_secs: u16,
        clean_start: bool,
    ) -> ConnectionInfo {
        ConnectionInfo {
            address,
            listener,
            username,
            version,
            keep_alive_secs,
            clean_start,
            connected_at_ms: crate::broker::unix_ms(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            messages_out: AtomicU64::new(0),
            closing: OnceLock::new(),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Asks the connection to close with `reason`; false if it was asked
    /// already.
    pub(crate) fn request_close(&self, reason: &str) -> bool {
        self.closing.set(reason.into()).is_ok()
    }

    /// The reason an administrator gave for closing this connection, once
    /// one did.
    pub(crate) fn close_requested(&self) -> Option<&str> {
        self.closing.get().map(|reason| &**reason)
    }
}
