//! Listeners: what a connection came in through — the listener's
//! settings (transport, authentication policy, connection limit) and its
//! counts of connections. The place a connection holds in the limits is in
//! `admission.rs`, the accept loops in `accept.rs`.

use crate::tls::Tls;
use ferry_auth::ListenerAuth;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// What a listener speaks on top of TCP (or TLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Mqtt,
    WebSocket,
}

/// Why a connection through a listener was turned away, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The broker's `max_connections`.
    MaxConnections,
    /// The listener's `max_connections`.
    ListenerMaxConnections,
    /// Resident memory over `max_memory_bytes`.
    Memory,
    /// `max_connection_rate`.
    Rate,
    TlsHandshake,
    /// A CONNACK refusal: credentials, client id, or the will's ACL.
    Connack,
}

impl Refusal {
    /// A refusal for want of a place, which a closing connection may give
    /// back in a moment (`places.rs`).
    pub(crate) fn is_full(self) -> bool {
        matches!(self, Refusal::MaxConnections | Refusal::ListenerMaxConnections)
    }

    pub const ALL: [Refusal; 6] = [
        Refusal::MaxConnections,
        Refusal::ListenerMaxConnections,
        Refusal::Memory,
        Refusal::Rate,
        Refusal::TlsHandshake,
        Refusal::Connack,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "max_connections",
            Refusal::ListenerMaxConnections => "listener_max_connections",
            Refusal::Memory => "memory",
            Refusal::Rate => "rate",
            Refusal::TlsHandshake => "tls_handshake",
            Refusal::Connack => "connack",
        }
    }
}

/// One listener's settings and its counts of connections. Its counters
/// move once per connection, not per message: plain shared atomics.
#[derive(Debug)]
pub struct Listener {
    /// For logs and metrics: the configured name, or protocol and address.
    pub name: String,
    pub protocol: Protocol,
    pub tls: Option<Arc<Tls>>,
    pub auth: ListenerAuth,
    /// Connections open at once through this listener; 0 for no limit
    /// beyond the broker's.
    pub max_connections: usize,
    open: AtomicUsize,
    accepted: AtomicU64,
    refused: [AtomicU64; Refusal::ALL.len()],
}

impl Listener {
    pub fn new(
        name: String,
        protocol: Protocol,
        tls: Option<Arc<Tls>>,
        auth: ListenerAuth,
        max_connections: usize,
    ) -> Listener {
        Listener {
            name,
            protocol,
            tls,
            auth,
            max_connections,
            open: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            refused: Default::default(),
        }
    }

    /// Connections open through this listener now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections admitted through this listener since the start.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Connections turned away, by reason.
    pub fn refused(&self) -> [(Refusal, u64); Refusal::ALL.len()] {
        Refusal::ALL.map(|reason| (reason, self.refused[reason as usize].load(Ordering::Relaxed)))
    }

    pub(crate) fn count_refusal(&self, reason: Refusal) {
        self.refused[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one more connection open through this listener; returns how
    /// many were open before.
    pub(crate) fn open_one(&self) -> usize {
        self.open.fetch_add(1, Ordering::Relaxed)
    }

    /// A connection counted by [`Listener::open_one`] ended or was refused.
    pub(crate) fn close_one(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn count_accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }
}
