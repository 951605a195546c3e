//! CPU time and resident memory of a process, read from `/proc`.
//!
//! Sampled at the start and end of a run for the broker (`--broker-pid`) and
//! for the bench itself: the broker's CPU per delivered message is the figure
//! brokers are compared on, and the bench's own CPU shows whether the load
//! generator, not the broker, was the bottleneck.

use serde::Serialize;
use std::io;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// User plus system CPU time since the process started, in seconds.
    pub cpu_seconds: f64,
    /// Resident set size in bytes (VmRSS).
    pub rss_bytes: u64,
}

/// Which process to read: a pid, or this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `/proc/self`.
    This,
    /// `/proc/PID`.
    Pid(u32),
}

impl Target {
    fn dir(self) -> String {
        match self {
            Target::This => "/proc/self".to_owned(),
            Target::Pid(pid) => format!("/proc/{pid}"),
        }
    }

    /// Reads the process's CPU time and RSS now.
    pub fn sample(self) -> io::Result<Sample> {
        let dir = self.dir();
        let stat = std::fs::read_to_string(format!("{dir}/stat"))?;
        let status = std::fs::read_to_string(format!("{dir}/status"))?;
        let invalid =
            |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{dir}: {what}"));
        let ticks = cpu_ticks(&stat).ok_or_else(|| invalid("no utime/stime in stat"))?;
        let rss_bytes = vm_rss_bytes(&status).ok_or_else(|| invalid("no VmRSS in status"))?;
        Ok(Sample { cpu_seconds: ticks as f64 / clock_ticks_per_second(), rss_bytes })
    }
}

/// utime + stime, fields 14 and 15 of `/proc/PID/stat` (proc(5)). The
/// command name in field 2 may hold spaces and parentheses, so fields are
/// counted from the last `)`.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The `VmRSS:   1234 kB` line of `/proc/PID/status`.
fn vm_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The machine's count of connections dropped because a listen backlog was
/// full (TcpExtListenOverflows, what `nstat -az TcpExtListenOverflows`
/// shows); `None` where `/proc/net/netstat` cannot be read.
pub fn listen_overflows() -> Option<u64> {
    tcp_ext(&std::fs::read_to_string("/proc/net/netstat").ok()?, "ListenOverflows")
}

/// One counter of `/proc/net/netstat`, whose `TcpExt:` lines come in
/// pairs: the names, then the values.
fn tcp_ext(netstat: &str, name: &str) -> Option<u64> {
    let mut lines = netstat.lines().filter(|line| line.starts_with("TcpExt:"));
    let names = lines.next()?.split_ascii_whitespace();
    let values = lines.next()?.split_ascii_whitespace();
    names.zip(values).find(|(n, _)| *n == name)?.1.parse().ok()
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions; it only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        // sysconf cannot fail for _SC_CLK_TCK on Linux; 100 is its value everywhere.
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat =
            "4242 (ferry (a) b) S 1 4242 4242 0 -1 4194560 500 0 0 0 170 30 0 0 20 0 9 0 123 0 0";
        assert_eq!(cpu_ticks(stat), Some(200));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn rss_is_read_in_kilobytes() {
        let status = "Name:\tferry\nVmPeak:\t 999 kB\nVmRSS:\t    2048 kB\nThreads: 3\n";
        assert_eq!(vm_rss_bytes(status), Some(2 * 1024 * 1024));
        assert_eq!(vm_rss_bytes("Name: x\n"), None);
    }

    #[test]
    fn tcp_ext_counters_are_read_by_name() {
        let netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
                       TcpExt: 0 17 19\n\
                       IpExt: InNoRoutes ListenOverflows\n\
                       IpExt: 0 99\n";
        assert_eq!(tcp_ext(netstat, "ListenOverflows"), Some(17));
        assert_eq!(tcp_ext(netstat, "ListenDrops"), Some(19));
        assert_eq!(tcp_ext(netstat, "Nothing"), None);
        assert_eq!(tcp_ext("", "ListenOverflows"), None);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let sample = Target::This.sample().expect("/proc/self is readable");
        assert!(sample.rss_bytes > 0);
        assert!(sample.cpu_seconds >= 0.0);
    }
}
