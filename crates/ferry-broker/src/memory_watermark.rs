//! The memory watermark: above `max_memory_bytes` of resident memory the
//! broker refuses new connections and slows publishers, so that load is
//! shed before the OOM killer takes the whole process (and every session
//! held in memory with it).

use crate::broker::Broker;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often resident memory is read: a few syscalls, and a second is
/// much shorter than memory takes to fill at the broker's own pace.
const PERIOD: Duration = Duration::from_secs(1);

/// Watches resident memory until shutdown; returns at once when no
/// watermark is configured.
pub async fn run(broker: Arc<Broker>) {
    let limit = broker.config.max_memory_bytes;
    if limit == 0 {
        return;
    }
    let mut shutdown = broker.shutdown_signal();
    let mut tick = tokio::time::interval(PERIOD);
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|&stopping| stopping) => return,
            _ = tick.tick() => {}
        }
        let Some(resident) = resident_bytes() else {
            tracing::warn!("cannot read resident memory; the memory watermark is off");
            return;
        };
        let high = resident > limit;
        if broker.memory_high.swap(high, Ordering::Relaxed) != high {
            if high {
                tracing::warn!(
                    resident,
                    limit,
                    "memory above max_memory_bytes: refusing new connections, slowing publishers"
                );
            } else {
                tracing::info!(resident, limit, "memory back below max_memory_bytes");
            }
        }
    }
}

/// Resident set size of this process, from `/proc/self/status` (in kB
/// there, whatever the page size).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kilobytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kilobytes * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn resident_memory_is_read() {
        let resident = super::resident_bytes().unwrap();
        assert!(resident > 1024 * 1024, "{resident}");
    }
}
