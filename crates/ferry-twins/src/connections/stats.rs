//! What a connection counts, and how the figures read in Ditto's shapes
//! (`…/status` and `…/metrics`). Counts are totals since the connection
//! started (or its last `resetConnectionMetrics`); Ditto's rolling
//! windows (`PT1M`, `PT1H`, `PT24H`) are not kept.

use super::model::ConnectionSpec;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Default)]
pub struct Count(AtomicU64);

impl Count {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// One target's figures.
#[derive(Debug, Default)]
pub struct TargetStats {
    /// Events that passed the target's topics and READ rights.
    pub dispatched: Count,
    /// Events the target's topics or READ rights let nothing through of.
    pub filtered: Count,
    /// Requests the receiver answered 2xx.
    pub published: Count,
    /// Requests refused for good, or out of tries.
    pub failed: Count,
    /// Requests dropped because the queue was full, or not made because
    /// the target's address gave nothing for the signal (a function of
    /// it withheld it).
    pub dropped: Count,
}

/// One source's figures.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Records read.
    pub consumed: Count,
    /// Commands applied (committed to the store, or answered).
    pub applied: Count,
    /// Records whose command was not executed (enforcement, a malformed
    /// message) or was refused (rights, preconditions, errors).
    pub failed: Count,
}

#[derive(Debug)]
pub struct ConnectionStats {
    pub targets: Vec<TargetStats>,
    pub sources: Vec<SourceStats>,
    /// Events the feed ran ahead of this connection with.
    pub missed: AtomicU64,
    started_ms: AtomicU64,
    /// Set while a connection with a client of its own (MQTT) has not yet
    /// connected: its status is then Ditto's `unknown`, not `open`.
    connecting: AtomicBool,
    last: Mutex<Last>,
}

#[derive(Debug, Default)]
struct Last {
    success_ms: Option<u64>,
    failure: Option<(u64, String)>,
}

impl ConnectionStats {
    pub fn new(targets: usize, sources: usize) -> ConnectionStats {
        ConnectionStats {
            targets: (0..targets).map(|_| TargetStats::default()).collect(),
            sources: (0..sources).map(|_| SourceStats::default()).collect(),
            missed: AtomicU64::new(0),
            started_ms: AtomicU64::new(now_ms()),
            connecting: AtomicBool::new(false),
            last: Mutex::new(Last::default()),
        }
    }

    /// The connection's client is connecting; the next success ends that.
    pub fn set_connecting(&self) {
        self.connecting.store(true, Ordering::Relaxed);
    }

    pub fn set_success(&self) {
        self.connecting.store(false, Ordering::Relaxed);
        self.last.lock().success_ms = Some(now_ms());
    }

    /// Remembers why the last exchange failed. Never holds a credential:
    /// the texts name the method, the path and the status or I/O error.
    pub fn set_failure(&self, why: String) {
        self.last.lock().failure = Some((now_ms(), why));
    }

    pub fn reset(&self) {
        for target in &self.targets {
            for count in [
                &target.dispatched,
                &target.filtered,
                &target.published,
                &target.failed,
                &target.dropped,
            ] {
                count.reset();
            }
        }
        for source in &self.sources {
            for count in [&source.consumed, &source.applied, &source.failed] {
                count.reset();
            }
        }
        self.missed.store(0, Ordering::Relaxed);
        *self.last.lock() = Last::default();
    }

    /// Ditto's `RetrieveConnectionStatusResponse`.
    pub fn status(&self, spec: &ConnectionSpec, running: bool) -> Value {
        let last = self.last.lock();
        let failing = match (&last.failure, last.success_ms) {
            (Some((failed, _)), Some(succeeded)) => *failed > succeeded,
            (Some(_), None) => true,
            _ => false,
        };
        let connecting = self.connecting.load(Ordering::Relaxed);
        let state = if !running {
            "closed"
        } else if failing {
            "failed"
        } else if connecting {
            "unknown"
        } else {
            "open"
        };
        let details = match &last.failure {
            Some((_, why)) if failing => why.clone(),
            _ if running && connecting => "connecting".to_owned(),
            _ if running && spec.source_addresses().is_empty() => "sending twin events".to_owned(),
            _ if running => "consuming Ditto protocol commands".to_owned(),
            _ => "closed".to_owned(),
        };
        let targets: Vec<Value> = spec
            .targets
            .iter()
            .map(|target| {
                json!({"type": "target", "client": "ferry", "address": target.address,
                       "status": state, "statusDetails": details})
            })
            .collect();
        let sources: Vec<Value> = spec
            .source_addresses()
            .into_iter()
            .flatten()
            .map(|address| {
                json!({"type": "source", "client": "ferry", "address": address,
                       "status": state, "statusDetails": details})
            })
            .collect();
        json!({
            "connectionId": spec.id,
            "connectionStatus": if spec.open { "open" } else { "closed" },
            "liveStatus": state,
            "connectedSince": running.then(|| rfc3339(self.started_ms.load(Ordering::Relaxed))),
            "clientStatus": [{"type": "client", "client": "ferry", "status": state, "statusDetails": details}],
            "sourceStatus": sources,
            "targetStatus": targets,
            "sshTunnelStatus": []
        })
    }

    /// Ditto's `RetrieveConnectionMetricsResponse`, with totals.
    pub fn metrics(&self, spec: &ConnectionSpec) -> Value {
        let last = self.last.lock();
        let mut addresses = Map::new();
        let mut sum = [0u64; 5];
        for (target, figures) in spec.targets.iter().zip(&self.targets) {
            let counts = [
                figures.dispatched.get(),
                figures.filtered.get(),
                figures.published.get(),
                figures.failed.get(),
                figures.dropped.get(),
            ];
            for (total, count) in sum.iter_mut().zip(counts) {
                *total += count;
            }
            addresses.insert(target.address.clone(), outbound(counts, &last));
        }
        let mut sources = Map::new();
        let mut inbound_sum = [0u64; 3];
        for (addresses, figures) in spec.source_addresses().into_iter().zip(&self.sources) {
            let counts = [figures.consumed.get(), figures.applied.get(), figures.failed.get()];
            for (total, count) in inbound_sum.iter_mut().zip(counts) {
                *total += count;
            }
            sources.insert(addresses.join(","), inbound(counts, &last));
        }
        let failures = sum[3] + sum[4] + inbound_sum[2] + self.missed.load(Ordering::Relaxed) > 0;
        let inbound_total = if spec.source_addresses().is_empty() {
            json!({})
        } else {
            inbound(inbound_sum, &last)
        };
        json!({
            "connectionId": spec.id,
            "containsFailures": failures,
            "connectionMetrics": {"inbound": inbound_total, "outbound": outbound(sum, &last)},
            "sourceMetrics": {"addressMetrics": sources},
            "targetMetrics": {"addressMetrics": addresses},
            "missedEvents": self.missed.load(Ordering::Relaxed)
        })
    }
}

fn outbound([dispatched, filtered, published, failed, dropped]: [u64; 5], last: &Last) -> Value {
    let success = |total: u64| json!({"total": total});
    json!({
        "dispatched": {"success": success(dispatched)},
        "filtered": {"success": success(filtered)},
        "published": {
            "success": {"total": published, "lastMessageAt": last.success_ms.map(rfc3339)},
            "failure": {"total": failed, "lastMessageAt": last.failure.as_ref().map(|(at, _)| rfc3339(*at))}
        },
        "dropped": {"success": success(dropped)}
    })
}

/// A source's figures in Ditto's inbound shape: `consumed` (read),
/// `mapped` (Ditto protocol messages whose command was executed, or not:
/// the failures), `enforced`-like counts folded into `failure`.
fn inbound([consumed, applied, failed]: [u64; 3], last: &Last) -> Value {
    json!({
        "consumed": {"success": {"total": consumed}},
        "mapped": {
            "success": {"total": applied, "lastMessageAt": last.success_ms.map(rfc3339)},
            "failure": {"total": failed, "lastMessageAt": last.failure.as_ref().map(|(at, _)| rfc3339(*at))}
        }
    })
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}

fn rfc3339(ms: u64) -> String {
    let seconds = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    crate::policy::Timestamp::from_unix(seconds, (ms % 1000) as u32 * 1_000_000).to_string()
}
