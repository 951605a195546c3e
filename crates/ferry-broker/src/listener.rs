//! Listeners: what a connection came in through — the listener's
//! settings (transport, authentication policy, connection limit), and the
//! place a connection holds in the limits while it lives. The accept loops
//! that use them are in `accept.rs`.

use crate::broker::Broker;
use crate::seat::Seat;
use crate::tls::{IdentityUse, Tls};
use ferry_auth::{Credentials, Identity, ListenerAuth, Principal};
use ferry_mqtt::Connect;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

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
}

/// Where a connection came from (what authentication looks at) and its
/// place in the limits. Boxed, so that it costs an idle connection's task
/// one pointer.
pub(crate) struct Origin {
    pub peer: SocketAddr,
    pub listener: Arc<Listener>,
    /// The identity in the client's verified certificate (mutual TLS).
    pub certificate: Option<Arc<str>>,
    /// Held, not read: its drop gives the place back.
    pub _admission: Admission,
}

impl Origin {
    /// What authentication looks at: the CONNECT's credentials, and where
    /// they came from.
    pub(crate) fn credentials<'a>(&'a self, connect: &'a Connect) -> Credentials<'a> {
        Credentials {
            peer: self.peer.ip(),
            username: connect.username.as_ref().map(|name| name.as_str()),
            password: connect.password.as_deref(),
            certificate: self.certificate.as_deref(),
        }
    }

    /// Who the client is for ACLs. The client id is left empty when the
    /// broker is to assign one.
    pub(crate) fn principal(
        &self,
        connect: &Connect,
        identity: Identity,
    ) -> Result<Principal, &'static str> {
        let mut client_id: Arc<str> = connect.client_id.as_str().into();
        let binds_client_id = self
            .listener
            .tls
            .as_ref()
            .is_some_and(|tls| tls.identity_use() == IdentityUse::UsernameAndClientId);
        if let (true, Some(certificate)) = (binds_client_id, &self.certificate) {
            if !connect.client_id.is_empty() && connect.client_id.as_str() != &**certificate {
                return Err("the client id is not the certificate's identity");
            }
            client_id = certificate.clone();
        }
        Ok(Principal {
            client_id,
            username: identity.username,
            certificate: self.certificate.clone(),
            groups: identity.groups,
        })
    }
}

/// A place held in the connection limits of the broker and of one
/// listener; given back when the connection ends, however it ends.
pub(crate) struct Admission {
    broker: Arc<Broker>,
    listener: Arc<Listener>,
    /// The connection's place on the core that serves it.
    seat: Option<Seat>,
}

impl Admission {
    pub(crate) fn seated(mut self, seat: Seat) -> Admission {
        self.seat = Some(seat);
        self
    }

    /// The broker that admitted the connection.
    pub(crate) fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.listener.open.fetch_sub(1, Ordering::Relaxed);
        self.broker.places.give_back();
    }
}

/// Takes a place for a new connection, or says why not: the broker's and
/// the listener's connection limits and the broker's rate of new
/// connections.
pub(crate) fn admit(broker: &Arc<Broker>, listener: &Arc<Listener>) -> Result<Admission, Refusal> {
    let broker_open = broker.places.take();
    let listener_open = listener.open.fetch_add(1, Ordering::Relaxed);
    let limit = broker.config.max_connections;
    let refusal = if limit != 0 && broker_open >= limit {
        Some(Refusal::MaxConnections)
    } else if listener.max_connections != 0 && listener_open >= listener.max_connections {
        Some(Refusal::ListenerMaxConnections)
    } else if broker.memory_high.load(Ordering::Relaxed) {
        Some(Refusal::Memory)
    } else if broker.config.max_connection_rate != 0
        && !broker.connection_rate.lock().try_take(1.0, Instant::now())
    {
        Some(Refusal::Rate)
    } else {
        None
    };
    match refusal {
        None => {
            listener.accepted.fetch_add(1, Ordering::Relaxed);
            Ok(Admission { broker: broker.clone(), listener: listener.clone(), seat: None })
        }
        Some(refusal) => {
            listener.open.fetch_sub(1, Ordering::Relaxed);
            broker.places.untake();
            Err(refusal)
        }
    }
}

/// Counts and logs the refusal of a connection from `peer`; its socket is
/// closed at once, before it costs a task or a handshake.
pub(crate) fn refuse(broker: &Broker, listener: &Listener, peer: SocketAddr, refusal: Refusal) {
    let what = match refusal {
        Refusal::MaxConnections => "the broker's max_connections",
        Refusal::ListenerMaxConnections => "the listener's max_connections",
        Refusal::Memory => "the memory watermark (max_memory_bytes)",
        Refusal::Rate => "max_connection_rate",
        Refusal::TlsHandshake | Refusal::Connack => refusal.name(),
    };
    broker.stats.connections_refused.inc();
    listener.count_refusal(refusal);
    broker.shed_log.connection_refused(&listener.name, peer, what);
}
