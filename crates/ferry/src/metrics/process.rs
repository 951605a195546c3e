//! The process's figures under the names Prometheus's own client libraries
//! use (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_start_time_seconds`), read from `/proc/self` at each scrape,
//! so dashboards made for any exporter read them; and `ferry_build_info`.

use super::encode::{counter, gauge, gauges};
use ferry_broker::memory_watermark::resident_bytes;
use ferry_broker::Broker;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::fmt::Error;
use std::time::{SystemTime, UNIX_EPOCH};

/// Clock ticks per second of `/proc/PID/stat`'s times: `USER_HZ`, which
/// Linux fixes at 100 for user space whatever the kernel's own tick.
const USER_HZ: f64 = 100.0;

#[derive(Debug)]
pub struct ProcessMetrics {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<u64>,
    start_time_seconds: f64,
}

impl ProcessMetrics {
    pub fn read(broker: &Broker) -> ProcessMetrics {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let started = now.saturating_sub(broker.started_at.elapsed());
        ProcessMetrics {
            cpu_seconds: std::fs::read_to_string("/proc/self/stat")
                .ok()
                .and_then(|stat| cpu_seconds(&stat)),
            resident_bytes: resident_bytes(),
            start_time_seconds: started.as_secs_f64(),
        }
    }
}

/// User and system CPU time from the text of `/proc/PID/stat`: fields 14
/// and 15, counted after the command name, which is in parentheses and
/// may itself hold spaces and parentheses.
fn cpu_seconds(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name: state (field 3) … utime is field 14, the 12th here.
    let user: u64 = fields.nth(11)?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) as f64 / USER_HZ)
}

impl Collector for ProcessMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), Error> {
        let e = &mut encoder;
        if let Some(cpu) = self.cpu_seconds {
            counter(
                e,
                "process_cpu_seconds",
                "User and system CPU time of the Ferry process, in seconds.",
                cpu,
            )?;
        }
        if let Some(resident) = self.resident_bytes {
            gauge(
                e,
                "process_resident_memory_bytes",
                "Resident memory of the Ferry process.",
                resident as f64,
            )?;
        }
        gauge(
            e,
            "process_start_time_seconds",
            "When the Ferry process started, in Unix seconds.",
            self.start_time_seconds,
        )?;
        gauges(
            e,
            "ferry_build_info",
            "Always 1; the version of Ferry in a label.",
            &[(&[("version", env!("CARGO_PKG_VERSION"))][..], 1.0)],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (ferry (core) 1) S 1 4242 4242 0 -1 4194560 300 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        assert_eq!(cpu_seconds(stat), Some(3.25));
        assert_eq!(cpu_seconds("garbage"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(cpu_seconds(&stat).is_some_and(|seconds| seconds >= 0.0));
    }
}
