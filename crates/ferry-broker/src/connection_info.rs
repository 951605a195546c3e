//! What the admin API sees of one live connection: where it came from,
//! what it said in its CONNECT, its traffic so far, and an administrator's
//! request to close it.
//!
//! Shared by the connection's task, which alone writes the counters, and
//! the session, through which `inspect.rs` finds it. The counters are
//! relaxed atomics on this connection's own allocation: the publish path
//! adds to them without a lock and without touching a cache line another
//! connection writes.

use crate::listener::Listener;
use ferry_mqtt::ProtocolVersion;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

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
