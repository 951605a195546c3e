//! What the figures were measured on: they mean little without the machine.

use std::time::{SystemTime, UNIX_EPOCH};

/// The machine a suite ran on, each field readable text ("unknown" where
/// the system would not say).
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub cpu: String,
    /// Logical CPUs.
    pub cores: String,
    pub memory: String,
    pub kernel: String,
    /// When the suite started, UTC.
    pub date: String,
}

const UNKNOWN: &str = "unknown";

impl Machine {
    /// Reads /proc and the clock.
    pub fn detect() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cores = match cpu_count(&cpuinfo) {
            0 => std::thread::available_parallelism().map_or(0, usize::from),
            n => n,
        };
        let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Machine {
            cpu: cpu_model(&cpuinfo).unwrap_or(UNKNOWN).to_owned(),
            cores: if cores == 0 { UNKNOWN.to_owned() } else { cores.to_string() },
            memory: total_memory(&read("/proc/meminfo")).unwrap_or_else(|| UNKNOWN.to_owned()),
            kernel: match read("/proc/sys/kernel/osrelease").trim() {
                "" => UNKNOWN.to_owned(),
                release => format!("Linux {release}"),
            },
            date: utc_date(seconds),
        }
    }
}

/// The first `model name` of /proc/cpuinfo.
fn cpu_model(cpuinfo: &str) -> Option<&str> {
    cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim())
}

/// Logical CPUs listed in /proc/cpuinfo.
fn cpu_count(cpuinfo: &str) -> usize {
    cpuinfo
        .lines()
        .filter(|line| line.split(':').next().map(str::trim) == Some("processor"))
        .count()
}

/// `MemTotal` of /proc/meminfo, in GiB.
fn total_memory(meminfo: &str) -> Option<String> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: f64 =
        line.trim_start_matches("MemTotal:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(format!("{:.1} GiB", kib / 1_048_576.0))
}

/// `YYYY-MM-DD HH:MM UTC` for seconds since the Unix epoch.
fn utc_date(seconds: u64) -> String {
    let days = i64::try_from(seconds / 86_400).unwrap_or(0);
    let minutes = seconds % 86_400 / 60;
    // Howard Hinnant's days-to-civil algorithm, to spare a date crate one line.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", minutes / 60, minutes % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_machine_from_proc_text() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(cpuinfo), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_count(cpuinfo), 2);
        assert_eq!(cpu_model(""), None);
        assert_eq!(
            total_memory("MemTotal:       25165824 kB\nMemFree: 1 kB\n").as_deref(),
            Some("24.0 GiB")
        );
        assert_eq!(total_memory("nothing"), None);
    }

    #[test]
    fn compare_utc_dates() {
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(951_782_400 + 3_660), "2000-02-29 01:01 UTC");
        assert_eq!(utc_date(1_798_761_599), "2026-12-31 23:59 UTC");
    }

    #[test]
    fn compare_machine_detects_this_one() {
        let machine = Machine::detect();
        assert!(machine.date.ends_with("UTC"));
        assert_ne!(machine.cores, "0");
    }
}
