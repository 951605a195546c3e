//! The broker's side of routes (`ferry-routes`): on the publish path it asks
//! the `Router` in force which endpoints a message goes to, and stores the
//! message once, with those endpoints, in the durable log. Each endpoint
//! then reads its messages back through its own queue of offsets
//! (`endpoint.rs`); local subscribers get the message as usual.
//!
//! The broker knows nothing of route syntax, conditions or endpoint types:
//! the router is a trait object the binary installs, replaceable on reload.
//! With no router the publish path pays one relaxed load of a flag.

use crate::message::Message;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Priorities run from 0 (highest) to this (lowest), as in edgeHub.
pub const LOWEST_PRIORITY: u8 = 9;

/// How many priorities there are.
pub const PRIORITIES: usize = LOWEST_PRIORITY as usize + 1;

/// Who published a message, for route conditions (`$clientId`,
/// `$username`). Messages the broker makes itself (wills aside) have
/// neither.
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteSource<'a> {
    pub client_id: Option<&'a str>,
    pub username: Option<&'a str>,
}

/// One endpoint a message is routed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointTarget {
    pub endpoint: Arc<str>,
    /// 0 (highest) ..= `LOWEST_PRIORITY`.
    pub priority: u8,
    /// Unix ms after which the endpoint drops it unsent; 0 for never.
    pub expires_at_ms: u64,
}

/// Decides where messages go beyond local subscribers.
pub trait Router: Send + Sync {
    /// Appends the endpoints `message` goes to, each at most once.
    /// `now_ms` is the broker's wall clock, for the targets' expiry.
    fn route(
        &self,
        message: &Message,
        source: RouteSource<'_>,
        now_ms: u64,
        out: &mut Vec<EndpointTarget>,
    );
}

/// What an endpoint whose queue reached its disk cap (`max_bytes`) does
/// with more messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// The publish is refused: 0x97 (Quota exceeded) to an MQTT 5
    /// publisher, the connection closed for 3.1.1 (which cannot be told).
    Reject,
    /// It is queued, and the endpoint drops its oldest messages (counted
    /// under `cap`) until it is under the cap again.
    DropOldest,
    /// The publisher's acknowledgement is withheld, and its input paused,
    /// until the endpoint has room again; past `block_timeout` it is
    /// refused as with `Reject`. Only a QoS 1 or 2 publish from a client
    /// can wait: anything else (QoS 0, wills, messages from an uplink) is
    /// refused at once.
    Block,
}

/// An endpoint's disk cap and what happens past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointCap {
    /// Log bytes the endpoint's queue may hold; 0 for no cap.
    pub max_bytes: u64,
    pub when_full: WhenFull,
    /// How long a publish may wait for room under `WhenFull::Block`.
    pub block_timeout: Duration,
}

impl EndpointCap {
    /// No cap beyond the disk's own watermarks.
    pub const NONE: EndpointCap =
        EndpointCap { max_bytes: 0, when_full: WhenFull::Reject, block_timeout: Duration::ZERO };

    /// Whether a publish meets the cap itself, rather than the endpoint
    /// trimming its queue afterwards.
    fn stops_publishers(&self) -> bool {
        self.max_bytes != 0 && self.when_full != WhenFull::DropOldest
    }
}

/// The router in force and the wake-ups of the endpoints' readers.
#[derive(Default)]
pub(crate) struct Routing {
    /// Whether `router` holds one: read on every publish, so a flag that
    /// never changes under load rather than the lock's shared counter.
    active: AtomicBool,
    router: RwLock<Option<Arc<dyn Router>>>,
    /// One per endpoint ever read or routed to: woken when a message for
    /// it is stored. A `Notify` keeps a permit, so a reader that was busy
    /// when the message came does not miss it.
    wakers: Mutex<HashMap<Arc<str>, Arc<Notify>>>,
    /// Endpoints whose cap stops publishers (reject or block). Read on
    /// the publish path only while it holds any.
    refusing: RwLock<HashMap<Arc<str>, EndpointCap>>,
    any_refusing: AtomicBool,
}

impl Routing {
    pub(crate) fn set(&self, router: Option<Arc<dyn Router>>) {
        let mut current = self.router.write();
        self.active.store(router.is_some(), Ordering::Release);
        *current = router;
    }

    /// The endpoints `message` goes to; empty with no router.
    pub(crate) fn route(
        &self,
        message: &Message,
        source: RouteSource<'_>,
        now_ms: u64,
    ) -> Vec<EndpointTarget> {
        let mut targets = Vec::new();
        if !self.active.load(Ordering::Relaxed) {
            return targets;
        }
        if let Some(router) = self.router.read().clone() {
            router.route(message, source, now_ms, &mut targets);
        }
        targets
    }

    pub(crate) fn waker(&self, endpoint: &str) -> Arc<Notify> {
        let mut wakers = self.wakers.lock();
        if let Some(waker) = wakers.get(endpoint) {
            return waker.clone();
        }
        let waker = Arc::new(Notify::new());
        wakers.insert(endpoint.into(), waker.clone());
        waker
    }

    pub(crate) fn set_cap(&self, endpoint: &str, cap: EndpointCap) {
        let mut refusing = self.refusing.write();
        if cap.stops_publishers() {
            refusing.insert(endpoint.into(), cap);
        } else {
            refusing.remove(endpoint);
        }
        self.any_refusing.store(!refusing.is_empty(), Ordering::Release);
    }

    /// The first endpoint among `targets` that stops more messages now,
    /// by `queued_bytes`, the log bytes each still holds, with its cap.
    pub(crate) fn full(
        &self,
        targets: &[EndpointTarget],
        queued_bytes: impl Fn(&str) -> u64,
    ) -> Option<(Arc<str>, EndpointCap)> {
        if !self.any_refusing.load(Ordering::Relaxed) {
            return None;
        }
        let refusing = self.refusing.read();
        targets.iter().find_map(|target| {
            let cap = refusing.get(&target.endpoint)?;
            (queued_bytes(&target.endpoint) >= cap.max_bytes)
                .then(|| (target.endpoint.clone(), *cap))
        })
    }

    /// Wakes the readers of the endpoints a stored message went to.
    pub(crate) fn wake(&self, targets: &[EndpointTarget]) {
        for target in targets {
            self.waker(&target.endpoint).notify_one();
        }
    }
}
