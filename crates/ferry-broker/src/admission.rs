//! Admission: the place a new connection takes in the broker's and its
//! listener's connection limits, or why it gets none. The place is held
//! for the connection's life and given back however it ends.

use crate::broker::Broker;
use crate::listener::{Listener, Refusal};
use crate::seat::Seat;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

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
        self.listener.close_one();
        self.broker.places.give_back();
    }
}

/// Takes a place for a new connection, or says why not: the broker's and
/// the listener's connection limits and the broker's rate of new
/// connections.
pub(crate) fn admit(broker: &Arc<Broker>, listener: &Arc<Listener>) -> Result<Admission, Refusal> {
    let broker_open = broker.places.take();
    let listener_open = listener.open_one();
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
            listener.count_accepted();
            Ok(Admission { broker: broker.clone(), listener: listener.clone(), seat: None })
        }
        Some(refusal) => {
            listener.close_one();
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
