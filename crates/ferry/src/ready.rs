//! `GET /ready`: whether Ferry can do its work now, for systemd and load
//! balancers (`/health` only says the process answers). Ready means every
//! MQTT listener still accepts, the durable log's directory takes a write
//! and the disk limits leave room; the answer names the first check that
//! failed, so whoever reads it knows what to fix.

use ferry_broker::{Broker, Listener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// An MQTT listener and whether its accept loop still runs (it ends at
/// shutdown, or when its socket cannot be set up).
pub struct Accepting {
    pub listener: Arc<Listener>,
    running: AtomicBool,
}

impl Accepting {
    pub fn new(listener: Arc<Listener>) -> Arc<Accepting> {
        Arc::new(Accepting { listener, running: AtomicBool::new(true) })
    }

    /// Called when the accept loop returns.
    pub fn stopped(&self) {
        self.running.store(false, Ordering::Relaxed);
    }
}

/// `Ok` when ready, else what is not. Touches the disk (a small write and
/// an fsync in the log's directory, a `statvfs`): probes come every few
/// seconds, not per message.
pub fn check(broker: &Broker, listeners: &[Arc<Accepting>]) -> Result<(), String> {
    if broker.is_shutting_down() {
        return Err("the server is shutting down".into());
    }
    if let Some(stopped) = listeners.iter().find(|l| !l.running.load(Ordering::Relaxed)) {
        return Err(format!("listener {} is not accepting connections", stopped.listener.name));
    }
    broker.check_store_ready()
}
