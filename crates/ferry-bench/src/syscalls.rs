//! The broker's system calls over a run, counted by `perf stat` on the
//! kernel's syscall tracepoints (`--syscalls`).
//!
//! `perf stat -e raw_syscalls:sys_enter -e syscalls:sys_enter_write … -p PID`
//! runs as a child process for the measured part of the run. It starts with
//! its counters disabled (`-D -1`) and is driven through two FIFOs
//! (`--control fifo:CTL,ACK`): `enable` once it is attached, acknowledged,
//! so no syscall of the run is missed while perf starts; `disable` at the
//! end, then SIGINT, and its CSV output (`-x,`) is read back. Counters are
//! inherited by threads started after perf attached, and folded into the
//! total when a thread exits, so unlike `/proc` they miss nothing.
//!
//! A tracepoint counter is not free for the traced process: every system
//! call takes the kernel's slow entry path and fills a trace record for
//! each event that matches. On the 2-core VM this was written on, `dd
//! bs=1` (4 million read/write calls) took 1.4 s alone, 2.2 s with
//! `raw_syscalls:sys_enter` counted and 3.1 s with the families as well:
//! 0.2 to 0.4 µs a call, or a third more CPU per message for Mosquitto
//! (about 15 calls a message at QoS 1, one in flight). So the broker's
//! CPU, rate and latency figures of a run with `--syscalls` carry that
//! cost, and `ferry bench compare` counts in a separate run. `strace`
//! would cost ten times more and is not used.
//!
//! Nothing here fails a run: where perf is missing, refuses (permissions,
//! `perf_event_paranoid`, no tracefs) or misbehaves, the error is a reason
//! for the report to print instead of figures.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Counts every system call.
pub const TOTAL_EVENT: &str = "raw_syscalls:sys_enter";

/// The families reported apart, with the system calls of each: what a
/// broker calls per message to write, to read, to wait for sockets, to
/// change what it waits for (Mosquitto turns EPOLLOUT on and off around
/// each write it cannot finish at once), and to wake or wait for another
/// of its threads.
pub const FAMILIES: [(Family, &[&str]); 5] = [
    (Family::Send, &["write", "writev", "sendto", "sendmsg", "sendmmsg"]),
    (Family::Recv, &["read", "readv", "recvfrom", "recvmsg", "recvmmsg"]),
    (Family::EpollWait, &["epoll_wait", "epoll_pwait", "epoll_pwait2"]),
    (Family::EpollCtl, &["epoll_ctl"]),
    (Family::Futex, &["futex"]),
];

/// A family of system calls counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Send,
    Recv,
    EpollWait,
    EpollCtl,
    Futex,
}

/// System calls the broker entered while counting was enabled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SyscallCounts {
    /// Every system call.
    pub total: u64,
    /// write, writev, sendto, sendmsg, sendmmsg.
    pub send: u64,
    /// read, readv, recvfrom, recvmsg, recvmmsg.
    pub recv: u64,
    /// epoll_wait, epoll_pwait, epoll_pwait2.
    pub epoll_wait: u64,
    /// epoll_ctl.
    pub epoll_ctl: u64,
    /// futex.
    pub futex: u64,
}

impl SyscallCounts {
    /// From perf's counts by event name; every event asked for must be
    /// there (a family's system calls that the kernel has no tracepoint
    /// for were not asked for).
    fn from_events(events: &BTreeMap<String, u64>, asked: &[String]) -> Result<Self, String> {
        if let Some(missing) = asked.iter().find(|e| !events.contains_key(e.as_str())) {
            return Err(format!("perf printed no count for {missing}"));
        }
        let family = |family: Family| -> u64 {
            let names = FAMILIES.iter().find(|(f, _)| *f == family).map_or(&[][..], |(_, n)| n);
            names.iter().filter_map(|name| events.get(&tracepoint(name))).sum()
        };
        Ok(SyscallCounts {
            total: events[TOTAL_EVENT],
            send: family(Family::Send),
            recv: family(Family::Recv),
            epoll_wait: family(Family::EpollWait),
            epoll_ctl: family(Family::EpollCtl),
            futex: family(Family::Futex),
        })
    }
}

/// The tracepoint of entry into system call `name`.
fn tracepoint(name: &str) -> String {
    format!("syscalls:sys_enter_{name}")
}

/// Where tracefs may be mounted.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The events to ask perf for: the total and each family's system calls
/// that this kernel has a tracepoint for (`epoll_pwait2` is from Linux
/// 5.11, and perf refuses the whole list for one unknown event). Where
/// tracefs cannot be read here, all of them, and perf says what it thinks.
fn events() -> Vec<String> {
    let all = FAMILIES.iter().flat_map(|(_, names)| names.iter());
    let root = TRACEFS.iter().map(Path::new).find(|root| root.join("events/syscalls").is_dir());
    let known = |name: &&&str| {
        root.is_none_or(|root| {
            root.join("events/syscalls").join(format!("sys_enter_{name}")).is_dir()
        })
    };
    std::iter::once(TOTAL_EVENT.to_owned())
        .chain(all.filter(known).map(|n| tracepoint(n)))
        .collect()
}

/// How long perf may take to attach and acknowledge `enable`: it opens a
/// counter per event and thread, on a machine busy with the run.
const START_PATIENCE: Duration = Duration::from_secs(10);

/// How long perf may take to acknowledge `disable`, and to exit after SIGINT.
const STOP_PATIENCE: Duration = Duration::from_secs(5);

/// A running `perf stat` on the broker, counting.
#[derive(Debug)]
pub struct Counter {
    child: Child,
    /// The FIFOs, perf's output and its stderr; removed on drop.
    dir: PathBuf,
    /// Our ends of the control and acknowledgement FIFOs, both opened
    /// read-write so that neither open waits for perf, and no write fails
    /// if perf is gone.
    ctl: File,
    ack: File,
    events: Vec<String>,
}

impl Counter {
    /// Starts perf on `pid` and returns once it counts. Blocks for as long
    /// as perf takes to attach (tens of milliseconds). The error is a
    /// reason for the report.
    pub fn start(pid: u32) -> Result<Counter, String> {
        let dir = scratch_dir()?;
        let (ctl_path, ack_path) = (dir.join("ctl"), dir.join("ack"));
        let fail = |why: String| {
            let _ = std::fs::remove_dir_all(&dir);
            why
        };
        for fifo in [&ctl_path, &ack_path] {
            mkfifo(fifo).map_err(|e| fail(format!("cannot create {}: {e}", fifo.display())))?;
        }
        let open = |path: &Path| std::fs::OpenOptions::new().read(true).write(true).open(path);
        let (ctl, ack) = match (open(&ctl_path), open(&ack_path)) {
            (Ok(ctl), Ok(ack)) => (ctl, ack),
            (Err(e), _) | (_, Err(e)) => return Err(fail(format!("cannot open a FIFO: {e}"))),
        };
        let stderr = File::create(dir.join("stderr"))
            .map_err(|e| fail(format!("cannot create perf's log: {e}")))?;
        let events = events();
        let mut command = Command::new("perf");
        command
            .args(["stat", "-x,", "--no-big-num", "-D", "-1", "--control"])
            .arg(format!("fifo:{},{}", ctl_path.display(), ack_path.display()))
            .arg("-o")
            .arg(dir.join("out.csv"));
        for event in &events {
            command.args(["-e", event]);
        }
        command
            .args(["-p", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            // Its own process group: a Ctrl-C meant for the bench is not for
            // perf, which is stopped in order at the end.
            .process_group(0);
        let child = command.spawn().map_err(|e| {
            fail(match e.kind() {
                std::io::ErrorKind::NotFound => {
                    "perf is not installed (Debian: linux-perf)".to_owned()
                }
                _ => format!("cannot run perf: {e}"),
            })
        })?;
        let mut counter = Counter { child, dir, ctl, ack, events };
        counter.command("enable", START_PATIENCE)?;
        Ok(counter)
    }

    /// Stops counting and perf, and returns the counts. Blocks until perf
    /// has exited (at most a few seconds).
    pub fn finish(mut self) -> Result<SyscallCounts, String> {
        // Without the acknowledgement (perf gone: the broker exited), its
        // output, if any, still holds the counts up to then.
        let disabled = self.command("disable", STOP_PATIENCE);
        if self.child.try_wait().ok().flatten().is_none() {
            signal(&self.child, libc::SIGINT);
        }
        let deadline = Instant::now() + STOP_PATIENCE;
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() >= deadline {
                return Err(format!(
                    "perf did not exit within {} s of SIGINT",
                    STOP_PATIENCE.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let output = std::fs::read_to_string(self.dir.join("out.csv")).unwrap_or_default();
        let counts = parse(&output).map_err(|why| self.with_stderr(why))?;
        SyscallCounts::from_events(&counts, &self.events)
            .map_err(|why| self.with_stderr(disabled.err().unwrap_or(why)))
    }

    /// Writes `command` to perf's control FIFO and waits up to `patience`
    /// for its acknowledgement.
    fn command(&mut self, command: &str, patience: Duration) -> Result<(), String> {
        self.ctl
            .write_all(format!("{command}\n").as_bytes())
            .map_err(|e| format!("cannot write to perf's control FIFO: {e}"))?;
        let deadline = Instant::now() + patience;
        let mut received = Vec::new();
        loop {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                return Err(self.with_stderr(format!("perf exited ({status})")));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(self.with_stderr(format!(
                    "perf did not acknowledge `{command}` within {} s",
                    patience.as_secs()
                )));
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            if readable(&self.ack, wait) {
                let mut buffer = [0u8; 64];
                let n = self
                    .ack
                    .read(&mut buffer)
                    .map_err(|e| format!("cannot read perf's acknowledgement FIFO: {e}"))?;
                received.extend_from_slice(&buffer[..n]);
                if received.windows(4).any(|w| w == b"ack\n") {
                    return Ok(());
                }
            }
        }
    }

    /// `why`, followed by what perf wrote to stderr that says more.
    fn with_stderr(&self, why: String) -> String {
        let text = std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
        match perf_complaint(&text) {
            Some(complaint) => format!("{why}: {complaint}"),
            None => why,
        }
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The lines of perf's stderr that say what went wrong, without the
/// `Events enabled`/`disabled` notes and blank lines; at most three.
fn perf_complaint(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("Events "))
        .take(3)
        .collect();
    (!lines.is_empty()).then(|| lines.join(" "))
}

/// Counts by event name from `perf stat -x,` output: lines of
/// `count,unit,event,run time,percent enabled,…`. `<not counted>` (the
/// process never ran while counting) is 0; `<not supported>` is an error.
pub fn parse(csv: &str) -> Result<BTreeMap<String, u64>, String> {
    let mut counts = BTreeMap::new();
    for line in csv.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split(',');
        let (Some(value), Some(_unit), Some(event)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(format!("unexpected line in perf's output: {line:?}"));
        };
        let count = match value {
            "<not counted>" => 0,
            "<not supported>" => return Err(format!("perf: {event} is not supported here")),
            value => value
                .parse::<u64>()
                .map_err(|_| format!("unexpected count in perf's output: {line:?}"))?,
        };
        *counts.entry(event.to_owned()).or_insert(0) += count;
    }
    if counts.is_empty() {
        return Err("perf printed no counts".into());
    }
    Ok(counts)
}

/// A fresh directory for one counter's FIFOs and output.
fn scratch_dir() -> Result<PathBuf, String> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ferry-bench-perf-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn mkfifo(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
    if unsafe { libc::mkfifo(path.as_ptr(), 0o600) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `file` has something to read within `wait`.
fn readable(file: &File, wait: Duration) -> bool {
    let mut fd = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let timeout = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd, for the duration of the call.
    let ready = unsafe { libc::poll(&mut fd, 1, timeout) };
    ready > 0 && fd.revents & libc::POLLIN != 0
}

fn signal(child: &Child, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) has no memory effects; the pid is our unreaped child.
        unsafe { libc::kill(pid, signal) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `perf stat -x, -o FILE -D -1 --control … -e … -p PID` from perf 6.1
    /// against Mosquitto, stopped with SIGINT.
    const OUTPUT: &str = "# started on Wed Nov 25 16:55:14 2026

612840,,raw_syscalls:sys_enter,1875749348,100.00,,
0,,syscalls:sys_enter_write,1875776388,100.00,,
201932,,syscalls:sys_enter_writev,1875799863,100.00,,
150211,,syscalls:sys_enter_sendto,1875802000,100.00,,
<not counted>,,syscalls:sys_enter_sendmsg,0,100.00,,
0,,syscalls:sys_enter_read,1875810000,100.00,,
201105,,syscalls:sys_enter_recvfrom,1875811000,100.00,,
51200,,syscalls:sys_enter_epoll_wait,1875812000,100.00,,
0,,syscalls:sys_enter_epoll_pwait,1875813000,100.00,,
99000,,syscalls:sys_enter_epoll_ctl,1875813500,100.00,,
12,,syscalls:sys_enter_futex,1875814000,100.00,,
";

    fn asked(names: &[&str]) -> Vec<String> {
        std::iter::once(TOTAL_EVENT.to_owned()).chain(names.iter().map(|n| tracepoint(n))).collect()
    }

    #[test]
    fn perf_csv_is_parsed_into_families() {
        let events = parse(OUTPUT).unwrap();
        assert_eq!(events[TOTAL_EVENT], 612_840);
        assert_eq!(events["syscalls:sys_enter_sendmsg"], 0, "<not counted> is none");
        let names = [
            "write",
            "writev",
            "sendto",
            "sendmsg",
            "read",
            "recvfrom",
            "epoll_wait",
            "epoll_pwait",
            "epoll_ctl",
            "futex",
        ];
        let counts = SyscallCounts::from_events(&events, &asked(&names)).unwrap();
        assert_eq!(
            counts,
            SyscallCounts {
                total: 612_840,
                send: 201_932 + 150_211,
                recv: 201_105,
                epoll_wait: 51_200,
                epoll_ctl: 99_000,
                futex: 12,
            }
        );
        let missing = SyscallCounts::from_events(&events, &asked(&["recvmsg"])).unwrap_err();
        assert!(missing.contains("syscalls:sys_enter_recvmsg"), "{missing}");
    }

    #[test]
    fn perf_csv_oddities() {
        assert!(parse("# started on x\n\n").unwrap_err().contains("no counts"));
        let unsupported = "<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n";
        assert!(parse(unsupported).unwrap_err().contains("not supported"));
        assert!(parse("12 raw_syscalls:sys_enter\n").unwrap_err().contains("unexpected"));
        assert!(parse("x,,raw_syscalls:sys_enter,1,100.00,,\n").unwrap_err().contains("count"));
    }

    #[test]
    fn perf_complaints_are_kept_short() {
        let stderr = "Events disabled\n\nError:\nNo permissions to read \
                      /sys/kernel/tracing/events/raw_syscalls/sys_enter\n\
                      Hint: Try 'sudo mount -o remount,mode=755 /sys/kernel/tracing/'\nmore\n";
        assert_eq!(
            perf_complaint(stderr).unwrap(),
            "Error: No permissions to read /sys/kernel/tracing/events/raw_syscalls/sys_enter \
             Hint: Try 'sudo mount -o remount,mode=755 /sys/kernel/tracing/'"
        );
        assert_eq!(perf_complaint("Events disabled\nEvents enabled\n"), None);
    }

    #[test]
    fn the_total_is_always_asked_for() {
        let events = events();
        assert_eq!(events[0], TOTAL_EVENT);
        assert!(events.contains(&tracepoint("futex")), "{events:?}");
    }

    /// Against a child that makes system calls, where perf works; where it
    /// does not, the reason must say so rather than panic.
    #[test]
    fn a_busy_process_is_counted_where_perf_works() {
        let mut busy = Command::new("sh")
            .args(["-c", "while :; do read x < /dev/null; done"])
            .spawn()
            .expect("sh runs");
        let result = Counter::start(busy.id()).and_then(|counter| {
            std::thread::sleep(Duration::from_millis(300));
            counter.finish()
        });
        let _ = busy.kill();
        let _ = busy.wait();
        match result {
            Ok(counts) => {
                assert!(counts.total > 0, "{counts:?}");
                assert!(counts.total >= counts.send + counts.recv + counts.futex, "{counts:?}");
            }
            Err(why) => {
                eprintln!("perf unavailable here: {why}");
                assert!(!why.is_empty());
            }
        }
    }

    #[test]
    fn a_missing_process_is_a_reason_not_a_panic() {
        // Pids are below 2^22 on Linux.
        let why = Counter::start(u32::MAX - 1).and_then(Counter::finish).unwrap_err();
        assert!(!why.is_empty());
    }
}
