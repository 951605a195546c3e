//! Command-line options of `ferry bench`, as clap types the `ferry` binary
//! embeds, and serializable so a report carries the parameters it ran with.

use crate::BenchError;
use clap::{Args, Subcommand, ValueEnum};
use ferry_mqtt::{ProtocolVersion, QoS};
use serde::Serialize;
use std::path::PathBuf;

/// `ferry bench <scenario> [options]`, or `ferry bench compare --suite FILE`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub action: Action,
}

/// What `ferry bench` does: one scenario against one broker, or a suite of
/// scenarios against several brokers. Two types rather than a `compare`
/// scenario, so that a single run ([`crate::run`]) and a run inside a
/// suite can never be a suite.
#[derive(Debug, Clone, Subcommand, Serialize)]
#[serde(untagged)]
pub enum Action {
    #[command(flatten)]
    Scenario(Scenario),
    /// A suite of scenarios against several brokers, one after the other,
    /// written up as a Markdown report with SVG charts.
    ///
    /// The suite (a TOML file; bench/suite.toml is an example) says how to
    /// start each broker and which runs to make. Each broker is started
    /// afresh for each run, awaited until it accepts connections, loaded
    /// with its pid for CPU and memory, and stopped. The report has a table
    /// per run: a column per broker, and the first broker against the best
    /// of the others.
    ///
    /// Example: ulimit -n 20000; ferry bench compare --suite bench/suite.toml --only "pubsub QoS 0"
    Compare(CompareArgs),
    /// Eclipse Ditto's benchmark shapes against Ditto's HTTP API v2 (on
    /// Ferry, or on Ditto): create N things from the coffee-brewer
    /// template, then read, search or modify them.
    ///
    /// Example: ferry bench twins create --things 100000 && ferry bench twins read --duration 30
    Twins(crate::twins::TwinsArgs),
}

/// The load shapes `ferry bench` can generate.
#[derive(Debug, Clone, Subcommand, Serialize)]
#[serde(tag = "scenario", rename_all = "lowercase")]
pub enum Scenario {
    /// C publishers → one subscriber on a wildcard, closed loop (the shape
    /// of the Mosquitto performance article).
    ///
    /// Each publisher is its own connection with up to --inflight messages
    /// unacknowledged. The article's program drives its connections from
    /// 100 threads that each wait for one publish at a time: with 100
    /// connections that is `--publishers 100 --inflight 1`.
    ///
    /// Example: ferry bench pubsub --publishers 100 --messages 1000000 --qos 1 --broker-pid $(pidof ferry)
    Pubsub(PubsubArgs),
    /// N publisher/subscriber pairs, each pair on its own topic, at a fixed
    /// total rate (open loop; Open MQTT Benchmark `p2p`).
    ///
    /// Example: ferry bench p2p --pairs 1000 --rate 20000 --duration 30 --qos 1
    P2p(P2pArgs),
    /// P publishers on one topic, bench/fanout, and S subscribers all
    /// subscribed to it, closed loop: every subscriber gets every message
    /// (Open MQTT Benchmark `fanout`, Event Grid broadcast).
    ///
    /// Example: ferry bench fanout --publishers 5 --subscribers 1000 --messages 10000 --qos 1
    Fanout(FanoutArgs),
    /// Many publishers, publisher i on bench/fanin/{i}, into one shared
    /// subscription $share/bench/bench/fanin/# of K subscribers, closed
    /// loop: every message reaches exactly one member of the group (Open
    /// MQTT Benchmark `sharedsub`, Event Grid fan-in).
    ///
    /// Example: ferry bench fanin --publishers 100 --subscribers 4 --messages 100000 --qos 1
    Fanin(FaninArgs),
    /// IotEdgePerf's transmitter: a burst of messages at a target rate from
    /// N publishers (publisher i on bench/burst/{i}) to one subscriber on
    /// bench/burst/#, open loop: the source rate achieved against the
    /// target, the delivery rate, the latency of every message and of the
    /// last one, and the backlog (sent − received) over time.
    ///
    /// With --receive-from the publishers load --broker, an edge, and the
    /// subscriber listens at the upstream the edge forwards to: the rates,
    /// latency and backlog are then the edge's, end to end.
    ///
    /// Example: ferry bench burst --burst-length 50000 --target-rate 2000 --payload-size 1024 --qos 1
    Burst(BurstArgs),
    /// N connections opened at a target rate and held idle: connect rate,
    /// failures, time to connect all, and the broker's RSS per connection
    /// (with --broker-pid); then every client sends DISCONNECT and closes.
    ///
    /// Open files: the bench needs one file descriptor per connection (and
    /// the broker one per client). Where the open-file limit is capped at
    /// 20,000, one bench process can hold about 19,000 connections; to go
    /// further, run several `ferry bench conn` processes at once, each with
    /// its own --connections. Each loopback source address offers about
    /// 28,000 ephemeral ports, and the kernel's search for a free one slows
    /// as they fill, so the clients are spread over 127.0.0.2, 127.0.0.3, …
    /// (--source-addresses, by default one per 2,500 connections; only when
    /// the broker is on 127.0.0.1 or another IPv4 loopback address). Where
    /// limits allow, 50,000+ connections from one process: raise the limit
    /// in the shell of both broker and bench (`ulimit -n 120000`, within the
    /// hard limit and fs.nr_open) and let --source-addresses default (20
    /// for 50,000).
    ///
    /// Example: ulimit -n 20000; ferry bench conn --connections 19000 --rate 5000 --broker-pid $(pidof ferry)
    Conn(ConnArgs),
}

/// MQTT protocol version of the load clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
pub enum MqttVersion {
    #[value(name = "3.1.1")]
    #[serde(rename = "3.1.1")]
    V311,
    #[value(name = "5")]
    #[serde(rename = "5")]
    V5,
}

impl From<MqttVersion> for ProtocolVersion {
    fn from(version: MqttVersion) -> ProtocolVersion {
        match version {
            MqttVersion::V311 => ProtocolVersion::V311,
            MqttVersion::V5 => ProtocolVersion::V5,
        }
    }
}

/// Options every scenario takes.
#[derive(Debug, Clone, Args, Serialize)]
pub struct CommonArgs {
    /// Broker to load, as mqtt://host:port.
    #[arg(long, default_value = "mqtt://127.0.0.1:1883")]
    pub broker: String,
    /// MQTT version of every load connection.
    #[arg(long, value_enum, default_value = "5")]
    pub mqtt_version: MqttVersion,
    /// QoS of the publishes (0, 1 or 2). At 1 and 2 the report adds the
    /// ack latency: from each message's send time to its PUBACK (QoS 1) or
    /// PUBREC (QoS 2) at the publisher, which for a durable broker includes
    /// its fsync.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub qos: u8,
    /// QoS of the subscriptions; defaults to --qos.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub sub_qos: Option<u8>,
    /// Payload bytes; at least 16 (publisher id, sequence number, timestamp).
    #[arg(long, default_value_t = 16)]
    pub payload_size: usize,
    /// Subscribers keep persistent sessions with this Session Expiry
    /// Interval in seconds (3.1.1: clean session 0), so a durable broker
    /// must store their QoS 1/2 messages before acknowledging them. 0:
    /// clean sessions.
    #[arg(long, default_value_t = 0)]
    pub session_expiry: u32,
    /// Most unacknowledged QoS 1/2 messages per publisher.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub inflight: u16,
    /// Seconds a subscriber waits for missing messages after the last
    /// arrival once publishing is over; what is still missing is lost.
    #[arg(long, default_value_t = 3.0)]
    pub drain_timeout: f64,
    /// Pid of the broker: its CPU time, RSS and context switches (summed
    /// over its threads) are sampled from /proc at the start and the end of
    /// the run.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Count the broker's system calls over the run with `perf stat` on the
    /// kernel's syscall tracepoints (needs --broker-pid): in all, and the
    /// send/write, recv/read, epoll_wait, epoll_ctl and futex families, per
    /// delivered message. Counting slows each of the broker's system calls
    /// (0.2–0.4 µs here), which its CPU, rate and latency figures of the
    /// same run then include: `ferry bench compare` counts them in a second
    /// run of its own. Where perf is missing or refused, the report says
    /// why instead of failing the run.
    #[arg(long, requires = "broker_pid")]
    pub syscalls: bool,
    /// Seconds over which the publishers start, evenly spaced (publisher i
    /// of n starts i/n of the way in), so load builds up instead of
    /// arriving all at once.
    #[arg(long, default_value_t = 0.0)]
    pub ramp_up: f64,
    /// Write every figure and the parameters to this file as JSON.
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
    /// Write the latency percentile and rate-over-time charts (and, for
    /// burst, the backlog) as SVG files into this directory.
    #[arg(long)]
    #[serde(skip)]
    pub plots: Option<PathBuf>,
    /// No progress on stderr (by default a bar on a terminal, a line a
    /// second otherwise).
    #[arg(long, short = 'q')]
    #[serde(skip)]
    pub quiet: bool,
}

impl CommonArgs {
    /// The publish QoS.
    pub fn qos(&self) -> QoS {
        QoS::from_u8(self.qos).unwrap_or(QoS::AtMostOnce)
    }

    /// The subscription QoS.
    pub fn sub_qos(&self) -> QoS {
        self.sub_qos.and_then(QoS::from_u8).unwrap_or(self.qos())
    }

    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.payload_size < crate::payload::HEADER_LEN {
            return Err(BenchError::Options(format!(
                "--payload-size {} is below the {}-byte benchmark header",
                self.payload_size,
                crate::payload::HEADER_LEN
            )));
        }
        if !(self.drain_timeout.is_finite() && self.drain_timeout > 0.0) {
            return Err(BenchError::Options(
                "--drain-timeout must be a positive number of seconds".into(),
            ));
        }
        if !(self.ramp_up.is_finite() && self.ramp_up >= 0.0) {
            return Err(BenchError::Options("--ramp-up must be 0 or more seconds".into()));
        }
        Ok(())
    }
}

/// `ferry bench pubsub`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct PubsubArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Publisher connections; publisher i publishes on bench/{i}.
    #[arg(long, short = 'c', default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub publishers: u32,
    /// Messages in total, split evenly across the publishers.
    #[arg(long, short = 'm', default_value_t = 100_000)]
    pub messages: u64,
    /// Topic filter of the single subscriber.
    #[arg(long, default_value = "bench/#")]
    pub filter: String,
}

/// `ferry bench p2p`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct P2pArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Publisher/subscriber pairs; pair i uses bench/p2p/{i}.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub pairs: u32,
    /// Target publish rate in messages per second, over all pairs.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Seconds to publish for (rate × duration messages in total).
    #[arg(long, default_value_t = 10.0, conflicts_with = "count")]
    pub duration: f64,
    /// Messages in total instead of --duration.
    #[arg(long)]
    pub count: Option<u64>,
}

/// `ferry bench fanout`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct FanoutArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Publisher connections, all on bench/fanout.
    #[arg(long, short = 'c', default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub publishers: u32,
    /// Subscriber connections, each subscribed to bench/fanout.
    #[arg(long, short = 's', default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub subscribers: u32,
    /// Messages published in total, split evenly across the publishers;
    /// each is delivered to every subscriber.
    #[arg(long, short = 'm', default_value_t = 10_000)]
    pub messages: u64,
}

/// `ferry bench fanin`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct FaninArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Publisher connections; publisher i publishes on bench/fanin/{i}.
    #[arg(long, short = 'c', default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub publishers: u32,
    /// Members of the shared subscription $share/bench/bench/fanin/#.
    #[arg(long, short = 's', default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub subscribers: u32,
    /// Messages in total, split evenly across the publishers; each is
    /// delivered to one member of the group.
    #[arg(long, short = 'm', default_value_t = 100_000)]
    pub messages: u64,
}

/// `ferry bench burst`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct BurstArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Messages in the burst, over all publishers (IotEdgePerf's
    /// --burst-length).
    #[arg(long, short = 'm', default_value_t = 10_000)]
    pub burst_length: u64,
    /// Target source rate in messages per second, over all publishers
    /// (IotEdgePerf's --target-rate).
    #[arg(long, default_value_t = 2_000.0)]
    pub target_rate: f64,
    /// Publisher connections sharing the burst (IotEdgePerf's transmitter
    /// modules).
    #[arg(long, short = 'c', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub publishers: u32,
    /// Receive at this broker (mqtt://host:port), the upstream that the
    /// edge at --broker forwards to, instead of at --broker. With
    /// --session-expiry the subscriber's session there is persistent and
    /// it outlives the upstream: when the upstream goes away it connects
    /// again every 100 ms and resumes its session, and the report adds the
    /// drain from the moment it got back in to the last arrival. Keep
    /// --drain-timeout longer than the upstream stays away after the burst.
    #[arg(long)]
    pub receive_from: Option<String>,
    /// Topic filter of the subscriber at --receive-from: the published
    /// topics as the upstream sees them, e.g. edge-1/bench/burst/# behind
    /// an uplink with remote_prefix = "edge-1/". Default: bench/burst/#.
    #[arg(long, requires = "receive_from")]
    pub receive_topic: Option<String>,
}

/// `ferry bench conn`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct ConnArgs {
    /// Broker to load, as mqtt://host:port.
    #[arg(long, default_value = "mqtt://127.0.0.1:1883")]
    pub broker: String,
    /// MQTT version of every connection.
    #[arg(long, value_enum, default_value = "5")]
    pub mqtt_version: MqttVersion,
    /// Connections to open and hold (one open file each in this process).
    #[arg(long, short = 'n', default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: u32,
    /// Target connections per second; 0 opens them as fast as --concurrency allows.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Most CONNECTs awaiting their CONNACK at once.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Open every connection at once, as a fleet does when it reconnects
    /// after a broker restart or a network blip: no --rate, no
    /// --concurrency bound. SYNs beyond the broker's listen backlog are
    /// dropped and retried a second or more later; the report counts them
    /// (listen overflows) when the broker runs on this machine.
    #[arg(long, conflicts_with_all = ["rate", "concurrency"])]
    pub storm: bool,
    /// Seconds to hold every connection idle once all are connected and
    /// the broker's RSS was measured.
    #[arg(long, default_value_t = 1.0)]
    pub hold: f64,
    /// Keep-alive in seconds sent in CONNECT; the clients send no PINGREQ,
    /// so it must outlast the run or the broker drops them (0 = none).
    #[arg(long, default_value_t = 600)]
    pub keep_alive: u16,
    /// Loopback source addresses (127.0.0.2, 127.0.0.3, …) the clients are
    /// spread over, each good for about 28,000 ephemeral ports; defaults to
    /// one per 2,500 connections. Only used for a broker on IPv4 loopback.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_000))]
    pub source_addresses: Option<u32>,
    /// Pid of the broker: its RSS is sampled before connecting and once
    /// every connection is open and idle.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Write every figure and the parameters to this file as JSON.
    #[arg(long)]
    #[serde(skip)]
    pub json: Option<PathBuf>,
}

impl ConnArgs {
    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), BenchError> {
        if !(self.rate.is_finite() && self.rate >= 0.0) {
            return Err(BenchError::Options("--rate must be 0 or a positive number".into()));
        }
        if self.storm && self.rate > 0.0 {
            return Err(BenchError::Options(
                "--storm opens every connection at once: no --rate".into(),
            ));
        }
        if !(self.hold.is_finite() && self.hold >= 0.0) {
            return Err(BenchError::Options("--hold must be 0 or more seconds".into()));
        }
        if self.keep_alive > 0 && self.hold >= f64::from(self.keep_alive) {
            return Err(BenchError::Options(format!(
                "--hold {} must be shorter than --keep-alive {}: idle clients send no PINGREQ",
                self.hold, self.keep_alive
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        scenario: Scenario,
    }

    fn burst(argv: &[&str]) -> Result<BurstArgs, clap::Error> {
        let argv = ["ferry-bench", "burst"].iter().chain(argv);
        Cli::try_parse_from(argv).map(|cli| match cli.scenario {
            Scenario::Burst(args) => args,
            other => panic!("parsed as {other:?}"),
        })
    }

    #[test]
    fn burst_receives_at_the_broker_unless_told_otherwise() {
        let args = burst(&[]).unwrap();
        assert_eq!((args.receive_from, args.receive_topic), (None, None));
    }

    #[test]
    fn burst_receives_from_an_upstream_under_its_topics() {
        let args = burst(&[
            "--broker",
            "mqtt://127.0.0.1:1884",
            "--receive-from",
            "mqtt://127.0.0.1:1885",
            "--receive-topic",
            "edge-1/bench/burst/#",
        ])
        .unwrap();
        assert_eq!(args.common.broker, "mqtt://127.0.0.1:1884");
        assert_eq!(args.receive_from.as_deref(), Some("mqtt://127.0.0.1:1885"));
        assert_eq!(args.receive_topic.as_deref(), Some("edge-1/bench/burst/#"));
        let json = serde_json::to_value(&args).unwrap();
        assert_eq!(json["receive_from"], "mqtt://127.0.0.1:1885", "the report keeps it");
    }

    #[test]
    fn a_receive_topic_needs_an_upstream() {
        let err = burst(&["--receive-topic", "edge-1/bench/burst/#"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }
}

/// `ferry bench compare`.
#[derive(Debug, Clone, Args, Serialize)]
pub struct CompareArgs {
    /// Suite file (TOML): brokers, how to start them, and the runs.
    #[arg(long)]
    pub suite: PathBuf,
    /// Markdown document to write.
    #[arg(long, default_value = DEFAULT_OUTPUT)]
    pub output: PathBuf,
    /// Directory for the SVG charts; by default `bench` next to --output.
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// Run only the runs whose name contains this; may be repeated.
    #[arg(long)]
    pub only: Vec<String>,
    /// Write every report of every run and broker to this file as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub(crate) const DEFAULT_OUTPUT: &str = "docs/benchmarks.md";
