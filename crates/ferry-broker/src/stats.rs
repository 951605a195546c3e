//! Counters the broker reports in `$SYS` (and later in Prometheus).
//!
//! Relaxed atomics: each counter is independent and only ever read for
//! reporting, so no ordering between them is needed.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn sub(&self, n: u64) {
        self.0.fetch_sub(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Default)]
pub struct Stats {
    pub clients_connected: Counter,
    pub connections_total: Counter,
    pub messages_received: Counter,
    pub messages_sent: Counter,
    pub bytes_received: Counter,
    pub bytes_sent: Counter,
    pub publishes_received: Counter,
    pub publishes_sent: Counter,
    /// Messages dropped because a session queue was full.
    pub dropped_queue_full: Counter,
    /// Messages not sent because they exceeded the client's maximum packet size.
    pub dropped_too_large: Counter,
    /// Messages whose expiry interval ran out before delivery.
    pub dropped_expired: Counter,
    /// Messages and changes the durable log failed to store (each refused).
    pub store_failures: Counter,
    /// Messages refused (0x97) because the durable log reached a disk limit.
    pub refused_disk_full: Counter,
    /// Messages refused (0x97) because a route endpoint that refuses when
    /// full (`when_full = "reject"`) holds its `max_bytes`, or because one
    /// that blocks (`"block"`) kept it waiting past its `block_timeout`.
    pub refused_endpoint_full: Counter,
    /// Publishes held back, unanswered, because an endpoint that blocks
    /// when full (`when_full = "block"`) held its `max_bytes`; counted once
    /// per hold, however long it lasts.
    pub held_endpoint_full: Counter,
    /// Connections closed because of a malformed or illegal packet.
    pub protocol_errors: Counter,
    /// CONNECTs refused for their credentials (or for failing too often).
    pub clients_refused: Counter,
    /// Sockets closed on accept: connection limits, rate or memory.
    pub connections_refused: Counter,
    pub tls_handshakes_failed: Counter,
    /// PUBLISH packets refused for a client's rate or bandwidth limit (v5
    /// QoS 1/2), or for the topic limits.
    pub publishes_limited: Counter,
    /// SUBSCRIBE filters refused for the topic limits, the wildcard depth
    /// or the subscriptions per client.
    pub subscriptions_refused: Counter,
    /// Times a 3.1.1 publisher was slowed by not reading its socket.
    pub publishers_throttled: Counter,
    /// PUBLISH, SUBSCRIBE and wills refused by the ACL.
    pub acl_denied: Counter,
    /// Slow consumers disconnected.
    pub slow_consumers_disconnected: Counter,
}
