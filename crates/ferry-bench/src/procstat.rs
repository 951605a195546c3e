//! CPU time, resident memory and context switches of a process, read from
//! `/proc`.
//!
//! Sampled at the start and end of a run for the broker (`--broker-pid`) and
//! for the bench itself: the broker's CPU per delivered message is the figure
//! brokers are compared on, and the bench's own CPU shows whether the load
//! generator, not the broker, was the bottleneck.
//!
//! Context switches are counted per thread: `/proc/PID/status` has only the
//! thread group leader's (proc(5): its `voluntary_ctxt_switches` and
//! `nonvoluntary_ctxt_switches` are those of the task, and the leader is one
//! task), so they are read from `/proc/PID/task/TID/status` of every thread
//! and compared thread by thread. A thread that exits during the run takes
//! its switches since the first reading with it; [`Switches::since`] counts
//! such threads so that a report can say its figure is short.

use serde::Serialize;
use std::collections::BTreeMap;
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

/// Context switches of one thread, or summed over threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SwitchCounts {
    /// The thread gave up the CPU itself: it blocked, waiting for something.
    pub voluntary: u64,
    /// The scheduler took the CPU away: time slice used up, or preempted.
    pub involuntary: u64,
}

impl SwitchCounts {
    /// Voluntary plus involuntary.
    pub fn total(self) -> u64 {
        self.voluntary + self.involuntary
    }
}

/// Context switches of every thread of a process at one moment, by thread id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Switches {
    threads: BTreeMap<u32, SwitchCounts>,
}

/// Context switches between two [`Switches`] readings of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SwitchDelta {
    #[serde(flatten)]
    pub counts: SwitchCounts,
    /// Threads in the first reading and not in the second: they exited
    /// during the run, and their switches after the first reading are
    /// missing from `counts`.
    pub threads_exited: u32,
    /// Threads in the second reading only, started during the run; all
    /// their switches are counted.
    pub threads_started: u32,
}

impl Switches {
    /// From `(thread id, that thread's status text)` pairs; threads whose
    /// status has no switch counts are left out.
    pub fn from_statuses<'a>(statuses: impl IntoIterator<Item = (u32, &'a str)>) -> Switches {
        let threads =
            statuses.into_iter().filter_map(|(tid, text)| Some((tid, switch_counts(text)?)));
        Switches { threads: threads.collect() }
    }

    /// Threads read.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Summed over the threads.
    pub fn sum(&self) -> SwitchCounts {
        self.threads.values().fold(SwitchCounts::default(), |sum, t| SwitchCounts {
            voluntary: sum.voluntary + t.voluntary,
            involuntary: sum.involuntary + t.involuntary,
        })
    }

    /// What happened since the earlier reading `start`, thread by thread: a
    /// thread in both adds its growth, a thread only here all its switches
    /// (it started since), a thread only in `start` nothing (it exited, and
    /// its last counts are gone with it).
    pub fn since(&self, start: &Switches) -> SwitchDelta {
        let mut delta = SwitchDelta::default();
        for (tid, now) in &self.threads {
            let before = start.threads.get(tid).copied().unwrap_or_else(|| {
                delta.threads_started += 1;
                SwitchCounts::default()
            });
            // A thread id reused by a new thread can count less than its
            // namesake did: its growth is unknown, take none.
            delta.counts.voluntary += now.voluntary.saturating_sub(before.voluntary);
            delta.counts.involuntary += now.involuntary.saturating_sub(before.involuntary);
        }
        let exited = start.threads.keys().filter(|tid| !self.threads.contains_key(tid)).count();
        delta.threads_exited = exited as u32;
        delta
    }
}

impl Target {
    /// Reads the context switches of every thread of the process now. A
    /// thread that exits between listing and reading is left out.
    pub fn switches(self) -> io::Result<Switches> {
        let dir = format!("{}/task", self.dir());
        let mut statuses = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let Some(tid) = entry.file_name().to_str().and_then(|name| name.parse().ok()) else {
                continue;
            };
            match std::fs::read_to_string(entry.path().join("status")) {
                Ok(text) => statuses.push((tid, text)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                // ESRCH: the thread is gone but its directory was still listed.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                Err(e) => return Err(e),
            }
        }
        let switches = Switches::from_statuses(statuses.iter().map(|(t, s)| (*t, s.as_str())));
        if switches.threads() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{dir}: no thread with voluntary_ctxt_switches in its status"),
            ));
        }
        Ok(switches)
    }
}

/// The `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` lines
/// of a `/proc/PID/task/TID/status`.
fn switch_counts(status: &str) -> Option<SwitchCounts> {
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].trim().parse().ok()
    };
    Some(SwitchCounts {
        voluntary: field("voluntary_ctxt_switches:")?,
        involuntary: field("nonvoluntary_ctxt_switches:")?,
    })
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

    /// The end of a real `/proc/PID/task/TID/status` (Linux 6.18).
    const STATUS: &str = "Name:\tferry\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4243\n\
        VmRSS:\t   10240 kB\nThreads:\t3\nCpus_allowed_list:\t0-1\n\
        Mems_allowed_list:\t0\nvoluntary_ctxt_switches:\t150\n\
        nonvoluntary_ctxt_switches:\t7\n";

    #[test]
    fn switches_are_read_from_a_thread_status() {
        assert_eq!(switch_counts(STATUS), Some(SwitchCounts { voluntary: 150, involuntary: 7 }));
        assert_eq!(switch_counts("Name:\tx\nvoluntary_ctxt_switches:\t3\n"), None);
        assert_eq!(SwitchCounts { voluntary: 150, involuntary: 7 }.total(), 157);
    }

    #[test]
    fn switches_are_compared_thread_by_thread() {
        let status = |v: u64, n: u64| {
            format!("Name:\tw\nvoluntary_ctxt_switches:\t{v}\nnonvoluntary_ctxt_switches:\t{n}\n")
        };
        let (a, b, c, d) = (status(100, 10), status(50, 5), status(400, 1), status(130, 12));
        let (e, f) = (status(60, 5), status(20, 2));
        let start = Switches::from_statuses([(1, a.as_str()), (2, b.as_str()), (3, c.as_str())]);
        assert_eq!(start.sum(), SwitchCounts { voluntary: 550, involuntary: 16 });
        // Thread 3 exited, thread 4 started; 1 and 2 went on.
        let end = Switches::from_statuses([
            (1, d.as_str()),
            (2, e.as_str()),
            (4, f.as_str()),
            (5, "Name:\tno counts\n"),
        ]);
        assert_eq!(end.threads(), 3, "a status without counts is left out");
        let delta = end.since(&start);
        assert_eq!(delta.counts, SwitchCounts { voluntary: 30 + 10 + 20, involuntary: 2 + 2 });
        assert_eq!((delta.threads_exited, delta.threads_started), (1, 1));
        // A summed /proc/PID/status would have said 210 - 550: less than nothing.
        assert!(end.sum().voluntary < start.sum().voluntary);

        let reused = Switches::from_statuses([(1, b.as_str())]);
        assert_eq!(reused.since(&start).counts, SwitchCounts::default(), "never negative");
    }

    #[test]
    fn this_process_switches_can_be_read() {
        let start = Target::This.switches().expect("/proc/self/task is readable");
        assert!(start.threads() >= 1);
        std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(5)))
            .join()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let end = Target::This.switches().unwrap();
        assert!(end.since(&start).counts.voluntary >= 1, "this thread slept and was woken");
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
