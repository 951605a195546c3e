//! The scenarios, and what they share: resolving the broker, opening many
//! connections at once, sampling CPU and memory around the run.

pub mod burst;
pub mod conn;
pub mod fanin;
pub mod fanout;
pub mod p2p;
pub mod pubsub;

use crate::args::CommonArgs;
use crate::client::Conn;
use crate::histogram::SharedLatency;
use crate::procstat::{Sample, Switches, Target};
use crate::publisher::{self, Gate, GateKeeper, Plan, Schedule};
use crate::report::{Connections, Delivery, Report, SyscallFigures, Syscalls, Throughput, Usage};
use crate::subscriber::{self, Group, Listen};
use crate::timeline::{Display, Progress, Ticker};
use crate::tracker::{Counts, Tracker};
use crate::{clock, syscalls, BenchError};
use ferry_mqtt::{ConnAck, ProtocolVersion, QoS};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// What every message-carrying scenario does around its load: checks the
/// common options, resolves the broker, samples CPU and memory, shows
/// progress while publishing, and turns what was measured into a
/// [`Report`].
pub struct Run {
    pub broker: SocketAddr,
    pub version: ProtocolVersion,
    /// Session expiry of every subscriber (0: clean sessions).
    pub subscriber_session_expiry: u32,
    /// Counters every publisher and subscriber of the run adds to.
    pub progress: Arc<Progress>,
    /// The histogram every subscriber of the run records latency into.
    latency: Arc<SharedLatency>,
    /// The histogram every publisher of the run records the latency of
    /// its acknowledgements into.
    ack_latency: Arc<SharedLatency>,
    drain_timeout: Duration,
    payload_size: usize,
    ramp_up_ns: u64,
    sampler: Sampler,
    display: Display,
    ticker: Option<Ticker>,
    /// Connections whose work is done, closed together when the run ends.
    to_close: Vec<Conn>,
}

/// What a scenario measured, for [`Run::report`].
pub struct Measured<'a> {
    pub connections: Connections,
    /// When publishing started ([`Run::start_publishing`]).
    pub publish_start_ns: u64,
    /// What the publishers did, from [`Run::join_publishers`].
    pub published: &'a Published,
    /// When the last message arrived anywhere.
    pub last_receive_ns: u64,
    pub counts: Counts,
    /// Distinct arrivals a perfect broker would produce.
    pub expected: u64,
    /// See [`Report::latency_from`].
    pub latency_from: &'static str,
}

impl Run {
    /// Checks the options, resolves the broker and takes the first samples.
    pub async fn start(common: &CommonArgs) -> Result<Run, BenchError> {
        common.validate()?;
        Ok(Run {
            broker: resolve(&common.broker).await?,
            version: common.mqtt_version.into(),
            subscriber_session_expiry: common.session_expiry,
            progress: Progress::new(),
            latency: SharedLatency::new(),
            ack_latency: SharedLatency::new(),
            drain_timeout: Duration::from_secs_f64(common.drain_timeout),
            payload_size: common.payload_size,
            ramp_up_ns: (common.ramp_up * 1e9) as u64,
            sampler: Sampler::start(common.broker_pid, common.syscalls).await?,
            display: Display::detect(common.quiet),
            ticker: None,
            to_close: Vec::new(),
        })
    }

    /// Waits until the publishers are set up, starts the live view and
    /// the timeline, and lets the publishers go; returns the start of the
    /// schedule. `expected` is the number of arrivals that completes the
    /// run, when known in advance.
    pub async fn start_publishing(
        &mut self,
        publishers: &Publishers,
        expected: Option<u64>,
    ) -> u64 {
        let start = publishers.keeper.open(publishers.margin_ns).await;
        let ticker = Ticker::start(Arc::clone(&self.progress), start, expected, self.display);
        self.ticker = Some(ticker);
        start
    }

    /// How long after the start publisher `i` of `n` begins: spread evenly
    /// over the ramp-up.
    pub fn ramp_offset(&self, i: usize, n: usize) -> u64 {
        (u128::from(self.ramp_up_ns) * i as u128 / n.max(1) as u128) as u64
    }

    /// How a subscriber of this run listens.
    pub fn listen(&self, publisher_base: u32, group: Option<Arc<Group>>) -> Listen {
        Listen {
            publisher_base,
            drain_timeout: self.drain_timeout,
            progress: Arc::clone(&self.progress),
            latency: Arc::clone(&self.latency),
            group,
            upstream: None,
        }
    }

    /// Stops the live view, takes the last samples and builds the report.
    pub async fn report(
        mut self,
        scenario: &'static str,
        parameters: &impl Serialize,
        measured: Measured<'_>,
    ) -> Result<Report, BenchError> {
        let timeline = match self.ticker.take() {
            Some(ticker) => ticker.finish().await,
            None => Vec::new(),
        };
        let m = measured;
        // Every subscriber and publisher has finished, and flushed its recorder.
        let latency = self.latency.snapshot();
        let ack_latency = self.ack_latency.snapshot();
        let Sampled { broker, bench, syscalls } = self.sampler.finish(m.counts.received).await?;
        let disconnections = disconnect_all(std::mem::take(&mut self.to_close)).await?;
        let window = |end_ns| seconds_between(m.publish_start_ns, end_ns);
        Ok(Report {
            scenario,
            parameters: serde_json::to_value(parameters).unwrap_or_default(),
            connections: m.connections,
            disconnections,
            publish: Throughput::new(
                m.published.total(),
                self.payload_size,
                window(m.published.done_ns),
            ),
            receive: Throughput::new(
                m.counts.received,
                self.payload_size,
                window(m.last_receive_ns),
            ),
            delivery: Delivery::new(m.counts, m.expected),
            latency: latency.summary(),
            latency_from: m.latency_from,
            latency_cdf: latency.cdf(),
            ack_latency: (!ack_latency.is_empty()).then(|| ack_latency.summary()),
            timeline,
            broker,
            bench,
            syscalls,
            per_subscriber: None,
            burst: None,
            conn: None,
        })
    }
}

/// A subscriber task and the channel that tells it how many messages were
/// sent once the publishers are done.
pub struct Subscriber {
    pub task: JoinHandle<Result<(subscriber::Outcome, Conn), BenchError>>,
    pub sent: oneshot::Sender<u64>,
}

impl Subscriber {
    /// Starts receiving on `conn`.
    pub fn spawn(mut conn: Conn, tracker: Tracker, listen: Listen) -> Subscriber {
        let (sent, expected) = oneshot::channel();
        let task = tokio::spawn(async move {
            subscriber::run(&mut conn, tracker, expected, listen).await.map(|o| (o, conn))
        });
        Subscriber { task, sent }
    }
}

impl Run {
    /// Tells subscriber `i` how many messages were sent to it, `sent_to(i)`,
    /// and waits for each; their connections close when the run ends.
    pub async fn join_subscribers(
        &mut self,
        subscribers: Vec<Subscriber>,
        sent_to: impl Fn(usize) -> u64,
    ) -> Result<Vec<subscriber::Outcome>, BenchError> {
        let mut tasks = Vec::with_capacity(subscribers.len());
        for (i, Subscriber { task, sent }) in subscribers.into_iter().enumerate() {
            // A subscriber may already have stopped with an error; its result says why.
            let _ = sent.send(sent_to(i));
            tasks.push(task);
        }
        let mut outcomes = Vec::with_capacity(tasks.len());
        for task in tasks {
            let (outcome, conn) = join(task).await??;
            outcomes.push(outcome);
            self.to_close.push(conn);
        }
        Ok(outcomes)
    }

    /// Waits for the publishers (no time before `start_ns`); their
    /// connections close when the run ends.
    pub async fn join_publishers(
        &mut self,
        publishers: Publishers,
        start_ns: u64,
    ) -> Result<Published, BenchError> {
        let handles = publishers.tasks;
        let mut published = Published {
            sent: Vec::with_capacity(handles.len()),
            done_ns: start_ns,
            last_queued_ns: start_ns,
            last_stamp_ns: start_ns,
        };
        for handle in handles {
            let (outcome, conn) = join(handle).await??;
            self.to_close.push(conn);
            published.sent.push(outcome.sent);
            published.done_ns = published.done_ns.max(outcome.done_ns);
            published.last_queued_ns = published.last_queued_ns.max(outcome.last_queued_ns);
            published.last_stamp_ns = published.last_stamp_ns.max(outcome.last_stamp_ns);
        }
        Ok(published)
    }
}

/// Sends DISCONNECT on every connection at once and closes them: how fast
/// that went is the run's disconnect rate.
pub async fn disconnect_all(conns: Vec<Conn>) -> Result<Connections, BenchError> {
    let start = clock::now_ns();
    let count = conns.len() as u64;
    let closing: Vec<_> = conns.into_iter().map(|conn| tokio::spawn(conn.disconnect())).collect();
    for handle in closing {
        join(handle).await?;
    }
    Ok(Connections::new(count, seconds_since(start)))
}

/// Sums subscribers' outcomes: counts (subscriber `i` judged against
/// `sent_to(i)`, what the publishers it hears sent) and the last arrival
/// (not before `start_ns`).
pub fn sum_outcomes<'a>(
    outcomes: &[subscriber::Outcome],
    sent_to: impl Fn(usize) -> &'a [u32],
    start_ns: u64,
) -> (Counts, u64) {
    let mut counts = Counts::default();
    let mut last_receive = start_ns;
    for (i, outcome) in outcomes.iter().enumerate() {
        counts += outcome.tracker.counts(sent_to(i));
        last_receive = last_receive.max(outcome.last_receive_ns);
    }
    (counts, last_receive)
}

/// The address of `mqtt://host:port`.
pub async fn resolve(broker: &str) -> Result<SocketAddr, BenchError> {
    let bad = || BenchError::BrokerUrl(broker.to_owned());
    let host_port = broker.strip_prefix("mqtt://").ok_or_else(bad)?.trim_end_matches('/');
    if !host_port.contains(':') {
        return Err(bad());
    }
    tokio::net::lookup_host(host_port)
        .await
        .map_err(|source| BenchError::Connect { broker: broker.to_owned(), source })?
        .next()
        .ok_or_else(bad)
}

/// Opens one connection per client id, all at once, and returns them in
/// order with how long it took for the last CONNACK to arrive.
pub async fn connect_all(
    broker: SocketAddr,
    client_ids: Vec<String>,
    version: ProtocolVersion,
    session_expiry: u32,
) -> Result<(Vec<(Conn, ConnAck)>, f64), BenchError> {
    let start = clock::now_ns();
    let handles: Vec<_> = client_ids
        .into_iter()
        .map(|id| tokio::spawn(Conn::connect(broker, id, version, session_expiry)))
        .collect();
    let mut conns = Vec::with_capacity(handles.len());
    for handle in handles {
        conns.push(join(handle).await??);
    }
    Ok((conns, seconds_since(start)))
}

impl Run {
    /// Connects `subscribers` clients subscribed to `filter` (every SUBACK
    /// received, so no message is published before its subscription
    /// exists), then `publishers` clients; ids are
    /// `ferry-bench-{pid}-{scenario}-sub-{i}` and `-pub-{i}`. Returns both
    /// groups and how fast they connected.
    pub async fn connect_subscribers_then_publishers(
        &self,
        scenario: &str,
        subscribers: u32,
        filter: &str,
        sub_qos: QoS,
        publishers: u32,
    ) -> Result<(Vec<Conn>, Vec<(Conn, ConnAck)>, Connections), BenchError> {
        self.connect_subscribers_at_then_publishers(
            self.broker,
            scenario,
            subscribers,
            filter,
            sub_qos,
            publishers,
        )
        .await
    }

    /// Like [`Run::connect_subscribers_then_publishers`], but the
    /// subscribers connect to `subscribe_at` (the upstream of an edge that
    /// the publishers load) rather than to the broker.
    pub async fn connect_subscribers_at_then_publishers(
        &self,
        subscribe_at: SocketAddr,
        scenario: &str,
        subscribers: u32,
        filter: &str,
        sub_qos: QoS,
        publishers: u32,
    ) -> Result<(Vec<Conn>, Vec<(Conn, ConnAck)>, Connections), BenchError> {
        let tag = std::process::id();
        let start = clock::now_ns();
        let sub_ids =
            (0..subscribers).map(|i| format!("ferry-bench-{tag}-{scenario}-sub-{i}")).collect();
        let (connected, _) =
            connect_all(subscribe_at, sub_ids, self.version, self.subscriber_session_expiry)
                .await?;
        let subscribed = subscribe_all(
            connected.into_iter().map(|(conn, _)| conn).collect(),
            |_| filter.to_owned(),
            sub_qos,
        )
        .await?;
        let pub_ids =
            (0..publishers).map(|i| format!("ferry-bench-{tag}-{scenario}-pub-{i}")).collect();
        let (publishers, _) = connect_all(self.broker, pub_ids, self.version, 0).await?;
        let count = (subscribed.len() + publishers.len()) as u64;
        Ok((subscribed, publishers, Connections::new(count, seconds_since(start))))
    }
}

/// Subscribes connection `i` to `filter(i)` at `qos`, all at once, and
/// returns the connections in order once every SUBACK has arrived.
pub async fn subscribe_all(
    conns: Vec<Conn>,
    filter: impl Fn(usize) -> String,
    qos: QoS,
) -> Result<Vec<Conn>, BenchError> {
    let handles: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut conn)| {
            let filter = filter(i);
            tokio::spawn(async move { conn.subscribe(&filter, qos).await.map(|_| conn) })
        })
        .collect();
    let mut subscribed = Vec::with_capacity(handles.len());
    for handle in handles {
        subscribed.push(join(handle).await??);
    }
    Ok(subscribed)
}

/// Starts one closed-loop publisher per connection, held at a gate until
/// [`Run::start_publishing`]: publisher `i` sends `counts[i]` messages on
/// `topic(i)` with the common options (beginning at its ramp-up offset),
/// then disconnects.
pub fn spawn_closed_loop(
    run: &Run,
    publishers: Vec<(Conn, ConnAck)>,
    counts: &[u32],
    common: &CommonArgs,
    topic: impl Fn(usize) -> String,
) -> Publishers {
    let n = publishers.len();
    let schedule = |i| Schedule::ClosedLoop { offset_ns: run.ramp_offset(i, n) };
    spawn_publishers(run, publishers, counts, common, topic, schedule, 0)
}

/// Starts one open-loop publisher per connection, held at a gate until
/// [`Run::start_publishing`], together sending `rate` messages per second:
/// each publisher sends every n-th slot, staggered so that the total load
/// is evenly spaced (and, with a ramp-up, joining one after another).
/// Publisher `i` sends `counts[i]` messages on `topic(i)`.
pub fn spawn_open_loop(
    run: &Run,
    rate: f64,
    publishers: Vec<(Conn, ConnAck)>,
    counts: &[u32],
    common: &CommonArgs,
    topic: impl Fn(usize) -> String,
) -> Publishers {
    let n = publishers.len();
    let gap_ns = 1e9 / rate;
    let interval_ns = (gap_ns * n as f64).round().max(1.0) as u64;
    let schedule = |i| Schedule::OpenLoop {
        offset_ns: run.ramp_offset(i, n) + (gap_ns * i as f64) as u64,
        interval_ns,
    };
    spawn_publishers(run, publishers, counts, common, topic, schedule, OPEN_LOOP_MARGIN_NS)
}

/// Time between opening the gate and the first due message of an
/// open-loop run, for a thousand waiting publishers to wake.
pub const OPEN_LOOP_MARGIN_NS: u64 = 5_000_000;

/// Publisher tasks, set up and waiting at their gate.
pub struct Publishers {
    pub tasks: Vec<JoinHandle<Result<(publisher::Outcome, Conn), BenchError>>>,
    keeper: GateKeeper,
    /// From opening the gate to the start of the schedule.
    margin_ns: u64,
}

fn spawn_publishers(
    run: &Run,
    publishers: Vec<(Conn, ConnAck)>,
    counts: &[u32],
    common: &CommonArgs,
    topic: impl Fn(usize) -> String,
    schedule: impl Fn(usize) -> Schedule,
    margin_ns: u64,
) -> Publishers {
    let (keeper, gate) = publisher::gate(publishers.len());
    let tasks = publishers
        .into_iter()
        .zip(counts)
        .enumerate()
        .map(|(i, (conn, &count))| {
            spawn_publisher(conn, plan(run, common, i, topic(i), count, schedule(i), gate.clone()))
        })
        .collect();
    Publishers { tasks, keeper, margin_ns }
}

/// Checks an open-loop rate option.
pub fn positive_rate(rate: f64, option: &str) -> Result<(), BenchError> {
    if rate.is_finite() && rate > 0.0 {
        Ok(())
    } else {
        Err(BenchError::Options(format!(
            "{option} must be a positive number of messages per second"
        )))
    }
}

/// The plan of publisher `i` with the common options.
pub fn plan(
    run: &Run,
    common: &CommonArgs,
    i: usize,
    topic: String,
    count: u32,
    schedule: Schedule,
    gate: Gate,
) -> Plan {
    Plan {
        id: i as u32,
        topic,
        qos: common.qos(),
        payload_size: common.payload_size,
        count,
        inflight: common.inflight,
        schedule,
        progress: Arc::clone(&run.progress),
        ack_latency: Arc::clone(&run.ack_latency),
        gate,
    }
}

/// Runs `plan` on a connection and hands the connection back.
pub fn spawn_publisher(
    (mut conn, connack): (Conn, ConnAck),
    plan: Plan,
) -> JoinHandle<Result<(publisher::Outcome, Conn), BenchError>> {
    tokio::spawn(async move {
        let receive_maximum = connack.properties.receive_maximum;
        publisher::run(&mut conn, &plan, receive_maximum).await.map(|outcome| (outcome, conn))
    })
}

/// What the publishers of a run did together.
#[derive(Debug, Clone, Default)]
pub struct Published {
    /// Messages each publisher sent, in publisher order.
    pub sent: Vec<u32>,
    /// When the last publisher was done (sent and acknowledged).
    pub done_ns: u64,
    /// When the last message was queued for writing.
    pub last_queued_ns: u64,
    /// The latest send time stamped in a message.
    pub last_stamp_ns: u64,
}

impl Published {
    /// Messages sent over all publishers.
    pub fn total(&self) -> u64 {
        self.sent.iter().map(|&n| u64::from(n)).sum()
    }
}

/// Waits for a task, turning a panic into an error.
pub async fn join<T>(handle: JoinHandle<T>) -> Result<T, BenchError> {
    handle.await.map_err(|e| BenchError::Task(e.to_string()))
}

/// Seconds on the process clock since `start_ns`.
pub fn seconds_since(start_ns: u64) -> f64 {
    seconds_between(start_ns, clock::now_ns())
}

/// Seconds between two process clock readings; 0 if they are reversed.
pub fn seconds_between(start_ns: u64, end_ns: u64) -> f64 {
    end_ns.saturating_sub(start_ns) as f64 / 1e9
}

/// CPU, RSS and context switches of the broker (if its pid is known) and of
/// this process, sampled when the run starts, and the broker's system
/// calls counted by perf in between (with `--syscalls`).
pub struct Sampler {
    broker: Option<(u32, Sample, Switches)>,
    bench: (Sample, Switches),
    /// The running counter, or why there is none.
    syscalls: Option<Result<syscalls::Counter, String>>,
    start_ns: u64,
}

/// What [`Sampler::finish`] measured: the broker's and this process's
/// usage, and the broker's system calls if they were asked for.
pub struct Sampled {
    pub broker: Option<Usage>,
    pub bench: Usage,
    pub syscalls: Option<Syscalls>,
}

impl Sampler {
    /// Starts perf on the broker if `count_syscalls` (and waits until it
    /// counts), then takes the first samples.
    pub async fn start(
        broker_pid: Option<u32>,
        count_syscalls: bool,
    ) -> Result<Sampler, BenchError> {
        let syscalls = match broker_pid {
            Some(pid) if count_syscalls => Some(
                tokio::task::spawn_blocking(move || syscalls::Counter::start(pid))
                    .await
                    .map_err(|e| BenchError::Task(e.to_string()))?,
            ),
            _ => None,
        };
        let broker = match broker_pid {
            Some(pid) => {
                Some((pid, sample(Target::Pid(pid), pid)?, switches(Target::Pid(pid), pid)?))
            }
            None => None,
        };
        let this = std::process::id();
        Ok(Sampler {
            broker,
            bench: (sample(Target::This, this)?, switches(Target::This, this)?),
            syscalls,
            start_ns: clock::now_ns(),
        })
    }

    /// The broker's pid and first sample, if `--broker-pid` was given.
    pub fn broker_start(&self) -> Option<(u32, Sample)> {
        self.broker.as_ref().map(|(pid, sample, _)| (*pid, *sample))
    }

    /// Takes the last samples and stops perf: usage over the run, per
    /// `delivered` message.
    pub async fn finish(self, delivered: u64) -> Result<Sampled, BenchError> {
        let wall = seconds_since(self.start_ns);
        let broker = match &self.broker {
            Some((pid, start, start_switches)) => {
                let target = Target::Pid(*pid);
                let end = sample(target, *pid)?;
                let switches = switches(target, *pid)?.since(start_switches);
                Some(Usage::between(*start, end, switches, wall, delivered))
            }
            None => None,
        };
        let this = std::process::id();
        let (start, start_switches) = &self.bench;
        let end = sample(Target::This, this)?;
        let switches = switches(Target::This, this)?.since(start_switches);
        let bench = Usage::between(*start, end, switches, wall, delivered);
        let syscalls = match self.syscalls {
            Some(Ok(counter)) => Some(
                tokio::task::spawn_blocking(move || counter.finish())
                    .await
                    .map_err(|e| BenchError::Task(e.to_string()))?,
            ),
            Some(Err(why)) => Some(Err(why)),
            None => None,
        };
        let syscalls = syscalls.map(|counted| match counted {
            Ok(counts) => Syscalls::Counted(SyscallFigures::new(counts, delivered)),
            Err(reason) => Syscalls::Unavailable { reason },
        });
        Ok(Sampled { broker, bench, syscalls })
    }
}

fn switches(target: Target, pid: u32) -> Result<Switches, BenchError> {
    target.switches().map_err(|source| BenchError::Proc { pid, source })
}

fn sample(target: Target, pid: u32) -> Result<Sample, BenchError> {
    target.sample().map_err(|source| BenchError::Proc { pid, source })
}

/// Connections per loopback source address by default. Each address offers
/// about 28,000 ephemeral ports (net.ipv4.ip_local_port_range), but the
/// kernel finds a free one by probing, which slows as they fill: from one
/// address, 19,000 connections opened at 6,700/s with two thirds of the
/// bench's CPU in `__inet_hash_connect`; from eight, at 23,700/s.
pub const CONNECTIONS_PER_SOURCE: u32 = 2_500;

/// How many source addresses `connections` clients are spread over by
/// default: ceil(connections / [`CONNECTIONS_PER_SOURCE`]), at least 1.
pub fn default_source_addresses(connections: u32) -> u32 {
    connections.div_ceil(CONNECTIONS_PER_SOURCE).max(1)
}

/// The local address client `i` binds to when the clients are spread over
/// `count` loopback source addresses 127.0.0.2, 127.0.0.3, … (round robin,
/// carrying into the third octet past 127.0.0.255).
pub fn source_address(i: u32, count: u32) -> IpAddr {
    let first = u32::from(Ipv4Addr::new(127, 0, 0, 2));
    IpAddr::V4(Ipv4Addr::from(first + i % count.max(1)))
}

/// Whether RSS has settled: two readings agree within 1%.
pub fn rss_settled(previous: u64, current: u64) -> bool {
    previous.abs_diff(current) * 100 <= previous.max(current)
}

/// Samples the RSS of `pid` every 200 ms until two readings in a row agree
/// within 1% (or 5 s have passed) and returns the last reading.
pub async fn settled_rss(pid: u32) -> Result<u64, BenchError> {
    const INTERVAL: Duration = Duration::from_millis(200);
    const LIMIT: Duration = Duration::from_secs(5);
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut previous = sample(Target::Pid(pid), pid)?.rss_bytes;
    loop {
        tokio::time::sleep(INTERVAL).await;
        let current = sample(Target::Pid(pid), pid)?.rss_bytes;
        if rss_settled(previous, current) || tokio::time::Instant::now() >= deadline {
            return Ok(current);
        }
        previous = current;
    }
}

/// Splits `total` messages over `n` publishers as evenly as possible.
pub fn split(total: u64, n: u32) -> Result<Vec<u32>, BenchError> {
    let n64 = u64::from(n.max(1));
    (0..n64)
        .map(|i| {
            let share = total / n64 + u64::from(i < total % n64);
            u32::try_from(share).map_err(|_| {
                BenchError::Options(format!("{share} messages per publisher is more than 2^32"))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_exact() {
        assert_eq!(split(10, 3).unwrap(), vec![4, 3, 3]);
        assert_eq!(split(2, 4).unwrap(), vec![1, 1, 0, 0]);
        assert!(split(1 << 40, 1).is_err());
    }

    #[test]
    fn source_addresses_by_default_and_round_robin() {
        assert_eq!(default_source_addresses(1), 1);
        assert_eq!(default_source_addresses(2_500), 1);
        assert_eq!(default_source_addresses(2_501), 2);
        assert_eq!(default_source_addresses(19_000), 8);
        assert_eq!(default_source_addresses(50_000), 20);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(source_address(0, 1), ip("127.0.0.2"));
        assert_eq!(source_address(7, 1), ip("127.0.0.2"));
        assert_eq!(source_address(0, 3), ip("127.0.0.2"));
        assert_eq!(source_address(1, 3), ip("127.0.0.3"));
        assert_eq!(source_address(2, 3), ip("127.0.0.4"));
        assert_eq!(source_address(3, 3), ip("127.0.0.2"));
        assert_eq!(source_address(254, 300), ip("127.0.1.0"), "carries past .255");
        assert_eq!(source_address(5, 0), ip("127.0.0.2"), "no division by zero");
    }

    #[test]
    fn rss_settles_within_one_percent() {
        assert!(rss_settled(1_000_000, 1_000_000));
        assert!(rss_settled(1_000_000, 1_009_000));
        assert!(rss_settled(1_009_000, 1_000_000));
        assert!(!rss_settled(1_000_000, 1_020_000));
        assert!(!rss_settled(1_020_000, 1_000_000));
        assert!(rss_settled(0, 0));
    }

    #[tokio::test]
    async fn broker_urls() {
        assert_eq!(
            resolve("mqtt://127.0.0.1:1883").await.unwrap(),
            "127.0.0.1:1883".parse().unwrap()
        );
        assert!(matches!(resolve("127.0.0.1:1883").await, Err(BenchError::BrokerUrl(_))));
        assert!(matches!(resolve("mqtt://localhost").await, Err(BenchError::BrokerUrl(_))));
    }
}
