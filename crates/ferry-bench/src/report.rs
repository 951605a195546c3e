//! The result of a run: figures, their JSON form, and the table printed at
//! the end.

use crate::histogram::{CdfPoint, LatencySummary};
use crate::plot::{self, Series};
use crate::procstat::{Sample, SwitchDelta};
use crate::syscalls::SyscallCounts;
use crate::timeline::Tick;
use crate::tracker::Counts;
use serde::Serialize;
use std::fmt;

/// Everything a run measured, with the parameters it ran with.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `pubsub`, `p2p`, …
    pub scenario: &'static str,
    /// The scenario's options, as given or defaulted.
    pub parameters: serde_json::Value,
    pub connections: Connections,
    /// Every connection sent DISCONNECT and closed, all at once at the end.
    pub disconnections: Connections,
    /// From the first publish to the last acknowledgement (or last write at QoS 0).
    pub publish: Throughput,
    /// From the first publish to the last arrival at a subscriber.
    pub receive: Throughput,
    pub delivery: Delivery,
    /// End-to-end latency of each first arrival, from [`Report::latency_from`].
    pub latency: LatencySummary,
    /// `send time` (closed loop) or `intended send time` (open loop,
    /// corrected for coordinated omission).
    pub latency_from: &'static str,
    /// The latency distribution for plotting: see [`crate::histogram::Latency::cdf`].
    pub latency_cdf: Vec<CdfPoint>,
    /// Acknowledgement latency of each QoS 1/2 message at its publisher,
    /// from the same send time as [`Report::latency`] to its PUBACK (QoS 1)
    /// or PUBREC (QoS 2): how long a publisher waits for the broker to take
    /// the message over, which for a durable broker includes storing it
    /// under its fsync policy. `None` when nothing was acknowledged (QoS 0).
    pub ack_latency: Option<LatencySummary>,
    /// Cumulative sent and received counts every [`crate::timeline::TICK`]
    /// from the start of publishing: rates and backlog over time.
    pub timeline: Vec<Tick>,
    /// The broker's resource use, when `--broker-pid` was given.
    pub broker: Option<Usage>,
    /// The bench process's own resource use.
    pub bench: Usage,
    /// The broker's system calls, with `--syscalls`: counted, or why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<Syscalls>,
    /// Distinct messages each subscriber received, in subscriber order, for
    /// scenarios whose subscribers split the load (`fanin`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_subscriber: Option<Vec<u64>>,
    /// What the `burst` scenario adds: source against target rate, drain
    /// time and backlog.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<BurstFigures>,
    /// Connection figures of the `conn` scenario, which publishes nothing:
    /// when present, the table shows these instead of messages and latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conn: Option<ConnFigures>,
}

/// What `burst` measured, in the IoT Edge article's terms.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BurstFigures {
    /// The rate asked for, messages per second.
    pub target_rate: f64,
    /// Messages sent over the time from the first due message to the last
    /// one queued: what the source achieved.
    pub source_rate: f64,
    /// Messages received over the time from the first due message to the
    /// last arrival.
    pub delivery_rate: f64,
    /// From the last message's due time to the last arrival: how long the
    /// end of the burst took to get through.
    pub last_message_latency_ms: f64,
    /// Sent but not yet received when the last message was queued.
    pub backlog_at_burst_end: u64,
    /// The largest backlog sampled.
    pub max_backlog: u64,
    /// With `--receive-from`, after the upstream went away and came back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<Drain>,
}

/// How fast an edge emptied its backlog once its upstream returned: from
/// when the subscriber got back in to the upstream to the last arrival.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Drain {
    /// When the upstream accepted the subscriber again, seconds since the
    /// first due message.
    pub upstream_back_seconds: f64,
    /// Distinct messages that arrived from then on.
    pub messages: u64,
    /// From then to the last arrival.
    pub seconds: f64,
    /// `messages` over `seconds`; 0 when nothing arrived after the return.
    pub messages_per_second: f64,
}

impl Drain {
    /// From when the upstream returned and what arrived after.
    pub fn new(upstream_back_seconds: f64, messages: u64, seconds: f64) -> Drain {
        let messages_per_second = if seconds > 0.0 { messages as f64 / seconds } else { 0.0 };
        Drain { upstream_back_seconds, messages, seconds, messages_per_second }
    }
}

impl BurstFigures {
    /// From counts and the seconds each phase took since the first due message.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        target_rate: f64,
        sent: u64,
        received: u64,
        send_seconds: f64,
        receive_seconds: f64,
        last_message_latency_seconds: f64,
        backlog_at_burst_end: u64,
        max_backlog: u64,
        drain: Option<Drain>,
    ) -> BurstFigures {
        let per_second = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
        BurstFigures {
            target_rate,
            source_rate: per_second(sent, send_seconds),
            delivery_rate: per_second(received, receive_seconds),
            last_message_latency_ms: last_message_latency_seconds * 1e3,
            backlog_at_burst_end,
            max_backlog,
            drain,
        }
    }

    fn fmt_table(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  {:<22}{:>14.0} msg/s  (target {:.0}, {:.1}%)",
            "source rate",
            self.source_rate,
            self.target_rate,
            self.source_rate * 100.0 / self.target_rate.max(f64::MIN_POSITIVE)
        )?;
        writeln!(f, "  {:<22}{:>14.0} msg/s", "delivery rate", self.delivery_rate)?;
        writeln!(f, "  {:<22}{:>14.1} ms", "last message latency", self.last_message_latency_ms)?;
        writeln!(
            f,
            "  {:<22}{:>14}  at burst end {}",
            "max backlog", self.max_backlog, self.backlog_at_burst_end
        )?;
        if let Some(drain) = &self.drain {
            writeln!(
                f,
                "  {:<22}{:>14.0} msg/s  ({} messages in {:.3} s; upstream back at {:.3} s)",
                "drain after return",
                drain.messages_per_second,
                drain.messages,
                drain.seconds,
                drain.upstream_back_seconds
            )?;
        }
        Ok(())
    }
}

/// What `conn` measured: how fast and how reliably connections opened, and
/// what holding them idle costs the broker.
#[derive(Debug, Clone, Serialize)]
pub struct ConnFigures {
    /// Connections attempted.
    pub attempted: u64,
    /// Connections that got a successful CONNACK.
    pub connected: u64,
    /// Connections that failed (TCP connect, CONNACK timeout or refusal).
    pub failed: u64,
    /// The first failure in client order, if any.
    pub first_error: Option<String>,
    /// From the first connect to the last CONNACK or failure.
    pub connect_seconds: f64,
    /// Connections established per second over the connect phase.
    pub connects_per_second: f64,
    /// SYNs or handshakes the kernel dropped during the connect phase
    /// because a listen backlog was full (TcpExtListenOverflows, for the
    /// whole machine); `None` when the broker is not on this machine.
    pub listen_overflows: Option<u64>,
    /// Loopback source addresses the clients were spread over (0 when the
    /// broker is not on IPv4 loopback and the kernel chose the source).
    pub source_addresses: u32,
    /// Broker RSS before the first connect, when `--broker-pid` was given.
    pub broker_rss_before_bytes: Option<u64>,
    /// Broker RSS once every connection was open and idle and RSS settled.
    pub broker_rss_connected_bytes: Option<u64>,
    /// (connected − before) / connected; may be slightly negative for small
    /// runs where the allocator returned memory in between.
    pub broker_rss_per_connection_bytes: Option<f64>,
    /// The bench's own RSS with every connection open.
    pub bench_rss_connected_bytes: u64,
    /// From the first DISCONNECT to the last socket closed.
    pub disconnect_seconds: f64,
}

impl ConnFigures {
    /// Broker RSS growth per connection; `None` without samples or connections.
    pub fn rss_per_connection(before: u64, connected_rss: u64, connections: u64) -> Option<f64> {
        (connections > 0).then(|| (connected_rss as f64 - before as f64) / connections as f64)
    }

    fn fmt_table(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  {:<22}{:>14} of {} in {:.3} s  ({:.0} conn/s, {} source address{})",
            "connected",
            self.connected,
            self.attempted,
            self.connect_seconds,
            self.connects_per_second,
            self.source_addresses,
            if self.source_addresses == 1 { "" } else { "es" }
        )?;
        if let Some(overflows) = self.listen_overflows {
            writeln!(
                f,
                "  {:<22}{:>14}  (TcpExtListenOverflows: SYNs dropped for a full backlog)",
                "listen overflows", overflows
            )?;
        }
        write!(f, "  {:<22}{:>14}", "failed", self.failed)?;
        if let Some(error) = &self.first_error {
            write!(f, "  first: {error}")?;
        }
        writeln!(f)?;
        if let (Some(before), Some(after), Some(per)) = (
            self.broker_rss_before_bytes,
            self.broker_rss_connected_bytes,
            self.broker_rss_per_connection_bytes,
        ) {
            writeln!(
                f,
                "  {:<22}{:>14.0} bytes/conn  (RSS {:.1} → {:.1} MiB)",
                "broker RSS",
                per,
                before as f64 / 1048576.0,
                after as f64 / 1048576.0
            )?;
        }
        writeln!(
            f,
            "  {:<22}{:>14.1} MiB with all connected",
            "bench RSS",
            self.bench_rss_connected_bytes as f64 / 1048576.0
        )?;
        writeln!(f, "  {:<22}{:>14.3} s", "disconnect all", self.disconnect_seconds)
    }
}

/// How fast the load connections were opened.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Connections {
    /// Connections opened (publishers and subscribers).
    pub count: u64,
    pub seconds: f64,
    pub per_second: f64,
}

impl Connections {
    /// `count` connections opened in `seconds`.
    pub fn new(count: u64, seconds: f64) -> Connections {
        Connections { count, seconds, per_second: count as f64 / seconds.max(1e-9) }
    }
}

/// Messages through one direction over a phase.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Throughput {
    pub messages: u64,
    pub seconds: f64,
    pub messages_per_second: f64,
    /// Payload megabytes (10^6 bytes) per second.
    pub payload_mb_per_second: f64,
}

impl Throughput {
    /// `messages` of `payload_size` bytes in `seconds`.
    pub fn new(messages: u64, payload_size: usize, seconds: f64) -> Throughput {
        let per_second = |n: f64| if seconds > 0.0 { n / seconds } else { 0.0 };
        Throughput {
            messages,
            seconds,
            messages_per_second: per_second(messages as f64),
            payload_mb_per_second: per_second(messages as f64 * payload_size as f64) / 1e6,
        }
    }
}

/// Delivery accounting summed over subscribers.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Delivery {
    #[serde(flatten)]
    pub counts: Counts,
    /// Distinct messages received per message expected, in percent.
    pub delivered_percent: f64,
}

impl Delivery {
    /// From the summed counts; `expected` is how many distinct arrivals a
    /// perfect broker would produce (sent × subscribers per message).
    pub fn new(counts: Counts, expected: u64) -> Delivery {
        let delivered_percent =
            if expected == 0 { 100.0 } else { counts.received as f64 * 100.0 / expected as f64 };
        Delivery { counts, delivered_percent }
    }
}

/// CPU, memory and context switches of one process over the run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Usage {
    pub cpu_seconds: f64,
    /// CPU seconds over wall seconds, in percent of one core.
    pub cpu_percent: f64,
    /// CPU microseconds per distinct delivered message.
    pub cpu_us_per_message: f64,
    pub rss_start_bytes: u64,
    pub rss_end_bytes: u64,
    /// Context switches of all the process's threads over the run, from
    /// `/proc/PID/task/*/status`.
    pub context_switches: SwitchDelta,
    /// Voluntary plus involuntary context switches per distinct delivered
    /// message.
    pub context_switches_per_message: f64,
}

impl Usage {
    /// From samples at the start and end of a run of `wall_seconds` that
    /// delivered `delivered` messages, and the context switches in between.
    pub fn between(
        start: Sample,
        end: Sample,
        switches: SwitchDelta,
        wall_seconds: f64,
        delivered: u64,
    ) -> Usage {
        let cpu_seconds = (end.cpu_seconds - start.cpu_seconds).max(0.0);
        Usage {
            cpu_seconds,
            cpu_percent: if wall_seconds > 0.0 { cpu_seconds * 100.0 / wall_seconds } else { 0.0 },
            cpu_us_per_message: per_message(cpu_seconds * 1e6, delivered),
            rss_start_bytes: start.rss_bytes,
            rss_end_bytes: end.rss_bytes,
            context_switches: switches,
            context_switches_per_message: per_message(switches.counts.total() as f64, delivered),
        }
    }
}

/// `amount` per delivered message; 0 when nothing was delivered.
fn per_message(amount: f64, delivered: u64) -> f64 {
    if delivered > 0 {
        amount / delivered as f64
    } else {
        0.0
    }
}

/// The broker's system calls over the run (`--syscalls`), or why they were
/// not counted: perf missing or refused never fails a run.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Syscalls {
    Counted(SyscallFigures),
    Unavailable { reason: String },
}

/// System calls in total and by family, each as a count and per distinct
/// delivered message.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SyscallFigures {
    pub total: Calls,
    /// write, writev, sendto, sendmsg, sendmmsg.
    pub send: Calls,
    /// read, readv, recvfrom, recvmsg, recvmmsg.
    pub recv: Calls,
    /// epoll_wait, epoll_pwait, epoll_pwait2.
    pub epoll_wait: Calls,
    pub epoll_ctl: Calls,
    pub futex: Calls,
    /// Everything else.
    pub other: Calls,
}

/// A number of system calls, and the same per delivered message.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Calls {
    pub calls: u64,
    pub per_message: f64,
}

impl SyscallFigures {
    /// From perf's counts over a run that delivered `delivered` messages.
    pub fn new(counts: SyscallCounts, delivered: u64) -> SyscallFigures {
        let calls = |calls: u64| Calls { calls, per_message: per_message(calls as f64, delivered) };
        let families =
            counts.send + counts.recv + counts.epoll_wait + counts.epoll_ctl + counts.futex;
        SyscallFigures {
            total: calls(counts.total),
            send: calls(counts.send),
            recv: calls(counts.recv),
            epoll_wait: calls(counts.epoll_wait),
            epoll_ctl: calls(counts.epoll_ctl),
            futex: calls(counts.futex),
            other: calls(counts.total.saturating_sub(families)),
        }
    }
}

impl Syscalls {
    /// The figures, if counted.
    pub fn counted(&self) -> Option<&SyscallFigures> {
        match self {
            Syscalls::Counted(figures) => Some(figures),
            Syscalls::Unavailable { .. } => None,
        }
    }
}

impl Report {
    /// The run's charts as (file name, SVG): latency percentiles and rates
    /// over time, and the backlog for `burst`; none for `conn`.
    pub fn charts(&self) -> Vec<(String, String)> {
        if self.conn.is_some() {
            return Vec::new();
        }
        let name = self.scenario;
        let latency = [Series { label: name, data: &self.latency_cdf }];
        let timeline = [Series { label: name, data: &self.timeline }];
        let mut charts = vec![
            (
                format!("{name}-latency.svg"),
                plot::latency_cdf(&format!("{name}: latency from {}", self.latency_from), &latency),
            ),
            (format!("{name}-rate.svg"), plot::rates(&format!("{name}: rates"), &timeline)),
        ];
        if self.burst.is_some() {
            charts.push((
                format!("{name}-backlog.svg"),
                plot::backlog(&format!("{name}: backlog (sent − received)"), &timeline),
            ));
        }
        charts
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.delivery.counts;
        writeln!(f, "ferry bench {}", self.scenario)?;
        if let Some(conn) = &self.conn {
            return conn.fmt_table(f);
        }
        let c_ = &self.connections;
        writeln!(
            f,
            "  {:<22}{:>14} in {:.3} s  ({:.0} conn/s)",
            "connections", c_.count, c_.seconds, c_.per_second
        )?;
        let d = &self.disconnections;
        writeln!(
            f,
            "  {:<22}{:>14} in {:.3} s  ({:.0} conn/s)",
            "disconnections", d.count, d.seconds, d.per_second
        )?;
        for (name, t) in [("published", &self.publish), ("received", &self.receive)] {
            writeln!(
                f,
                "  {:<22}{:>14} in {:.3} s  ({:.0} msg/s, {:.2} MB/s)",
                name, t.messages, t.seconds, t.messages_per_second, t.payload_mb_per_second
            )?;
        }
        writeln!(f, "  {:<22}{:>13.3}%", "delivered", self.delivery.delivered_percent)?;
        writeln!(
            f,
            "  {:<22}{:>14}  duplicates {}  out of order {}  unexpected {}",
            "lost", c.lost, c.duplicates, c.out_of_order, c.unexpected
        )?;
        if let Some(burst) = &self.burst {
            burst.fmt_table(f)?;
        }
        if let Some(per) = &self.per_subscriber {
            let min = per.iter().min().copied().unwrap_or(0);
            let max = per.iter().max().copied().unwrap_or(0);
            write!(f, "  {:<22}{:>14}  min {}  max {}", "per subscriber", per.len(), min, max)?;
            if per.len() <= 16 {
                let each: Vec<String> = per.iter().map(u64::to_string).collect();
                write!(f, "  ({})", each.join(", "))?;
            }
            writeln!(f)?;
        }
        fmt_latency(f, "latency", self.latency_from, &self.latency)?;
        if let Some(ack) = &self.ack_latency {
            fmt_latency(f, "ack latency", self.latency_from, ack)?;
        }
        let usage = |f: &mut fmt::Formatter<'_>, name: &str, u: &Usage| {
            writeln!(
                f,
                "  {:<22}{:>10.3} s CPU ({:.0}% of a core, {:.2} µs/msg), RSS {:.1} → {:.1} MiB",
                name,
                u.cpu_seconds,
                u.cpu_percent,
                u.cpu_us_per_message,
                u.rss_start_bytes as f64 / 1048576.0,
                u.rss_end_bytes as f64 / 1048576.0
            )?;
            let s = &u.context_switches;
            write!(
                f,
                "  {:<22}{:>10.2} ctx switches/msg ({} voluntary, {} involuntary",
                "", u.context_switches_per_message, s.counts.voluntary, s.counts.involuntary
            )?;
            if s.threads_exited > 0 {
                write!(
                    f,
                    "; {} thread{} exited during the run, {} switches are missing",
                    s.threads_exited,
                    if s.threads_exited == 1 { "" } else { "s" },
                    if s.threads_exited == 1 { "its" } else { "their" }
                )?;
            }
            writeln!(f, ")")
        };
        if let Some(broker) = &self.broker {
            usage(f, "broker", broker)?;
        }
        match &self.syscalls {
            Some(Syscalls::Counted(s)) => writeln!(
                f,
                "  {:<22}{:>10.2} syscalls/msg (send/write {:.2}, recv/read {:.2}, \
                 epoll_wait {:.2}, epoll_ctl {:.2}, futex {:.2}, other {:.2}; {} in all)",
                "",
                s.total.per_message,
                s.send.per_message,
                s.recv.per_message,
                s.epoll_wait.per_message,
                s.epoll_ctl.per_message,
                s.futex.per_message,
                s.other.per_message,
                s.total.calls
            )?,
            Some(Syscalls::Unavailable { reason }) => {
                writeln!(f, "  {:<22}{:>10} syscalls/msg ({reason})", "", "n/a")?
            }
            None => {}
        }
        usage(f, "bench (this process)", &self.bench)
    }
}

/// One writer for both latency blocks, so that their columns line up.
fn fmt_latency(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    from: &str,
    l: &LatencySummary,
) -> fmt::Result {
    writeln!(f, "  {name} from {from} (µs, {} samples)", l.count)?;
    writeln!(
        f,
        "    {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "min", "p50", "p75", "p90", "p95", "p99", "p99.9", "max"
    )?;
    writeln!(
        f,
        "    {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
        l.min_us, l.p50_us, l.p75_us, l.p90_us, l.p95_us, l.p99_us, l.p99_9_us, l.max_us
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procstat::SwitchCounts;
    use crate::syscalls::SyscallCounts;

    #[test]
    fn rates_and_percentages() {
        let t = Throughput::new(2_000, 500, 0.5);
        assert_eq!(t.messages_per_second, 4_000.0);
        assert_eq!(t.payload_mb_per_second, 2.0);
        assert_eq!(Throughput::new(10, 16, 0.0).messages_per_second, 0.0, "no division by zero");

        let counts = Counts { sent: 200, received: 150, lost: 50, ..Counts::default() };
        assert_eq!(Delivery::new(counts, 200).delivered_percent, 75.0);
        assert_eq!(Delivery::new(Counts::default(), 0).delivered_percent, 100.0);
    }

    #[test]
    fn drain_after_the_upstream_returns() {
        let drain = Drain::new(50.0, 1_000_000, 20.0);
        assert_eq!(drain.messages_per_second, 50_000.0);
        assert_eq!(Drain::new(50.0, 0, 0.0).messages_per_second, 0.0, "nothing came back");
        let figures = BurstFigures::new(20_000.0, 10, 10, 1.0, 2.0, 1.0, 0, 10, Some(drain));
        let json = serde_json::to_value(figures).unwrap();
        assert_eq!(json["drain"]["messages_per_second"], 50_000.0);
        let without = serde_json::to_value(BurstFigures { drain: None, ..figures }).unwrap();
        assert!(without.get("drain").is_none(), "absent without an outage");
    }

    #[test]
    fn usage_between_samples() {
        let start = Sample { cpu_seconds: 1.0, rss_bytes: 10 };
        let end = Sample { cpu_seconds: 3.0, rss_bytes: 30 };
        let switches = SwitchDelta {
            counts: SwitchCounts { voluntary: 1_500_000, involuntary: 500_000 },
            threads_exited: 0,
            threads_started: 1,
        };
        let u = Usage::between(start, end, switches, 4.0, 1_000_000);
        assert_eq!(u.cpu_seconds, 2.0);
        assert_eq!(u.cpu_percent, 50.0);
        assert_eq!(u.cpu_us_per_message, 2.0);
        assert_eq!(u.context_switches_per_message, 2.0);
        assert_eq!((u.rss_start_bytes, u.rss_end_bytes), (10, 30));
        let none = Usage::between(start, end, switches, 0.0, 0);
        assert_eq!((none.cpu_us_per_message, none.context_switches_per_message), (0.0, 0.0));
    }

    #[test]
    fn table_and_json_carry_every_figure() {
        let report = Report {
            scenario: "pubsub",
            parameters: serde_json::json!({"publishers": 4}),
            connections: Connections { count: 5, seconds: 0.01, per_second: 500.0 },
            disconnections: Connections::new(5, 0.005),
            publish: Throughput::new(100, 16, 1.0),
            receive: Throughput::new(100, 16, 1.0),
            delivery: Delivery::new(Counts { sent: 100, received: 100, ..Counts::default() }, 100),
            latency: LatencySummary { count: 100, p99_9_us: 42.0, ..LatencySummary::default() },
            latency_from: "send time",
            latency_cdf: Vec::new(),
            ack_latency: None,
            timeline: Vec::new(),
            broker: None,
            bench: Usage::between(
                Sample { cpu_seconds: 0.0, rss_bytes: 0 },
                Sample { cpu_seconds: 0.1, rss_bytes: 1 << 20 },
                SwitchDelta {
                    counts: SwitchCounts { voluntary: 230, involuntary: 20 },
                    ..SwitchDelta::default()
                },
                1.0,
                100,
            ),
            syscalls: None,
            per_subscriber: None,
            burst: None,
            conn: None,
        };
        let table = report.to_string();
        assert!(table.contains("p99.9"), "{table}");
        assert!(table.contains("100.000%"), "{table}");
        assert!(table.contains("disconnections                     5 in 0.005 s"), "{table}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["latency"]["p99_9_us"], 42.0);
        assert_eq!(json["delivery"]["lost"], 0);
        assert_eq!(json["delivery"]["delivered_percent"], 100.0);
        assert_eq!(json["parameters"]["publishers"], 4);
        assert!(json["broker"].is_null());
        assert!(json.get("per_subscriber").is_none(), "only where subscribers split the load");
        assert!(json["ack_latency"].is_null(), "QoS 0: nothing acknowledged: {json}");
        assert!(!table.contains("ack latency"), "{table}");

        let shared = Report { per_subscriber: Some(vec![34, 33, 33]), ..report };
        assert!(shared.to_string().contains("min 33  max 34  (34, 33, 33)"), "{shared}");
        assert_eq!(serde_json::to_value(&shared).unwrap()["per_subscriber"][0], 34);

        let names: Vec<String> = shared.charts().into_iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["pubsub-latency.svg", "pubsub-rate.svg"]);
    }

    #[test]
    fn broker_switches_and_syscalls_in_table_and_json() {
        let zero = Sample { cpu_seconds: 0.0, rss_bytes: 0 };
        let counts = Counts { sent: 1_000, received: 1_000, ..Counts::default() };
        let switches = SwitchDelta {
            counts: SwitchCounts { voluntary: 1_900, involuntary: 100 },
            threads_exited: 1,
            threads_started: 0,
        };
        let syscalls = SyscallCounts {
            total: 5_000,
            send: 1_000,
            recv: 2_000,
            epoll_wait: 1_000,
            epoll_ctl: 500,
            futex: 300,
        };
        let report = Report {
            scenario: "pubsub",
            parameters: serde_json::json!({"syscalls": true}),
            connections: Connections::new(2, 0.01),
            disconnections: Connections::new(2, 0.01),
            publish: Throughput::new(1_000, 16, 1.0),
            receive: Throughput::new(1_000, 16, 1.0),
            delivery: Delivery::new(counts, 1_000),
            latency: LatencySummary { count: 1_000, ..LatencySummary::default() },
            latency_from: "send time",
            latency_cdf: Vec::new(),
            ack_latency: None,
            timeline: Vec::new(),
            broker: Some(Usage::between(zero, zero, switches, 1.0, 1_000)),
            bench: Usage::between(zero, zero, SwitchDelta::default(), 1.0, 1_000),
            syscalls: Some(Syscalls::Counted(SyscallFigures::new(syscalls, 1_000))),
            per_subscriber: None,
            burst: None,
            conn: None,
        };
        let table = report.to_string();
        assert!(
            table.contains(
                "      2.00 ctx switches/msg (1900 voluntary, 100 involuntary; \
                 1 thread exited during the run, its switches are missing)\n"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "      5.00 syscalls/msg (send/write 1.00, recv/read 2.00, epoll_wait 1.00, \
                 epoll_ctl 0.50, futex 0.30, other 0.20; 5000 in all)\n"
            ),
            "{table}"
        );
        let broker = table.find("  broker ").unwrap();
        let bench = table.find("  bench (this process)").unwrap();
        let calls = table.find("syscalls/msg").unwrap();
        assert!(broker < calls && calls < bench, "the broker's lines together: {table}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["broker"]["context_switches"]["voluntary"], 1_900);
        assert_eq!(json["broker"]["context_switches"]["threads_exited"], 1);
        assert_eq!(json["broker"]["context_switches_per_message"], 2.0);
        assert_eq!(json["syscalls"]["status"], "counted");
        assert_eq!(json["syscalls"]["total"]["calls"], 5_000);
        assert_eq!(json["syscalls"]["recv"]["per_message"], 2.0);
        assert_eq!(json["syscalls"]["other"]["calls"], 200);

        let refused = Report {
            syscalls: Some(Syscalls::Unavailable { reason: "perf is not installed".into() }),
            ..report
        };
        let table = refused.to_string();
        assert!(table.contains("       n/a syscalls/msg (perf is not installed)\n"), "{table}");
        let json = serde_json::to_value(&refused).unwrap();
        assert_eq!(json["syscalls"]["status"], "unavailable");
        assert_eq!(json["syscalls"]["reason"], "perf is not installed");
        let none = Report { syscalls: None, ..refused };
        assert!(!none.to_string().contains("syscalls"), "not asked for");
        assert!(serde_json::to_value(&none).unwrap().get("syscalls").is_none());
    }

    #[test]
    fn ack_latency_follows_the_end_to_end_latency() {
        let zero = Sample { cpu_seconds: 0.0, rss_bytes: 0 };
        let counts = Counts { sent: 100, received: 100, ..Counts::default() };
        let report = Report {
            scenario: "p2p",
            parameters: serde_json::json!({"qos": 1}),
            connections: Connections::new(2, 0.01),
            disconnections: Connections::new(2, 0.01),
            publish: Throughput::new(100, 16, 1.0),
            receive: Throughput::new(100, 16, 1.0),
            delivery: Delivery::new(counts, 100),
            latency: LatencySummary { count: 100, p50_us: 300.0, ..LatencySummary::default() },
            latency_from: "intended send time",
            latency_cdf: Vec::new(),
            ack_latency: Some(LatencySummary {
                count: 100,
                p50_us: 120.0,
                p99_us: 2_500.0,
                ..LatencySummary::default()
            }),
            timeline: Vec::new(),
            broker: None,
            bench: Usage::between(zero, zero, SwitchDelta::default(), 1.0, 100),
            syscalls: None,
            per_subscriber: None,
            burst: None,
            conn: None,
        };
        let table = report.to_string();
        let end_to_end = table.find("  latency from intended send time (µs, 100 samples)\n");
        let ack = table.find("  ack latency from intended send time (µs, 100 samples)\n");
        assert!(end_to_end.is_some_and(|e| ack.is_some_and(|a| e < a)), "{table}");
        assert!(table.contains("     120.0 "), "{table}");
        assert!(table.contains("    2500.0 "), "{table}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["ack_latency"]["count"], 100);
        assert_eq!(json["ack_latency"]["p99_us"], 2_500.0);
        assert_eq!(json["latency"]["p50_us"], 300.0, "the end-to-end latency is unchanged");
    }

    #[test]
    fn conn_table_and_json() {
        assert_eq!(ConnFigures::rss_per_connection(1_000, 3_000, 1_000), Some(2.0));
        assert_eq!(ConnFigures::rss_per_connection(3_000, 1_000, 1_000), Some(-2.0));
        assert_eq!(ConnFigures::rss_per_connection(1_000, 3_000, 0), None);
        let zero = Sample { cpu_seconds: 0.0, rss_bytes: 0 };
        let report = Report {
            scenario: "conn",
            parameters: serde_json::json!({"connections": 3}),
            connections: Connections { count: 2, seconds: 0.5, per_second: 4.0 },
            disconnections: Connections::new(2, 0.1),
            publish: Throughput::new(0, 0, 0.0),
            receive: Throughput::new(0, 0, 0.0),
            delivery: Delivery::new(Counts::default(), 0),
            latency: LatencySummary::default(),
            latency_from: "send time",
            latency_cdf: Vec::new(),
            ack_latency: None,
            timeline: Vec::new(),
            broker: None,
            bench: Usage::between(zero, zero, SwitchDelta::default(), 1.0, 0),
            syscalls: None,
            per_subscriber: None,
            burst: None,
            conn: Some(ConnFigures {
                attempted: 3,
                connected: 2,
                failed: 1,
                first_error: Some("refused".into()),
                connect_seconds: 0.5,
                connects_per_second: 4.0,
                listen_overflows: Some(7),
                source_addresses: 1,
                broker_rss_before_bytes: Some(1 << 20),
                broker_rss_connected_bytes: Some((1 << 20) + 4096),
                broker_rss_per_connection_bytes: Some(2048.0),
                bench_rss_connected_bytes: 1 << 20,
                disconnect_seconds: 0.1,
            }),
        };
        let table = report.to_string();
        assert!(table.contains("2048 bytes/conn"), "{table}");
        assert!(table.contains("first: refused"), "{table}");
        assert!(table.contains("listen overflows                   7"), "{table}");
        assert!(!table.contains("latency"), "nothing is published: {table}");
        assert!(report.charts().is_empty(), "no messages, no charts");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["conn"]["broker_rss_per_connection_bytes"], 2048.0);
        assert_eq!(json["conn"]["failed"], 1);
    }
}
