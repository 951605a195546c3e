//! The scenarios, and what they share: resolving the broker, opening many
//! connections at once, sampling CPU and memory around the run.

pub mod conn;
pub mod fanin;
pub mod fanout;
pub mod p2p;
pub mod pubsub;

use crate::args::CommonArgs;
use crate::client::Conn;
use crate::procstat::{Sample, Target};
use crate::publisher::{self, Plan, Schedule};
use crate::report::Usage;
use crate::{clock, BenchError};
use ferry_mqtt::{ConnAck, ProtocolVersion, QoS};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::task::JoinHandle;

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
) -> Result<(Vec<(Conn, ConnAck)>, f64), BenchError> {
    let start = clock::now_ns();
    let handles: Vec<_> =
        client_ids.into_iter().map(|id| tokio::spawn(Conn::connect(broker, id, version))).collect();
    let mut conns = Vec::with_capacity(handles.len());
    for handle in handles {
        conns.push(join(handle).await??);
    }
    Ok((conns, seconds_since(start)))
}

/// Subscribes connection `i` to `filter(i)` at `qos`, all at once, and
/// returns the connections in order once every SUBACK has arrived.
/// Connects `subscribers` clients subscribed to `filter` (every SUBACK
/// received, so no message is published before its subscription exists),
/// then `publishers` clients; ids are `ferry-bench-{pid}-{scenario}-sub-{i}`
/// and `-pub-{i}`. Returns both groups and the seconds it took.
pub async fn connect_subscribers_then_publishers(
    broker: SocketAddr,
    scenario: &str,
    version: ProtocolVersion,
    subscribers: u32,
    filter: &str,
    sub_qos: QoS,
    publishers: u32,
) -> Result<(Vec<Conn>, Vec<(Conn, ConnAck)>, f64), BenchError> {
    let tag = std::process::id();
    let start = clock::now_ns();
    let sub_ids =
        (0..subscribers).map(|i| format!("ferry-bench-{tag}-{scenario}-sub-{i}")).collect();
    let (connected, _) = connect_all(broker, sub_ids, version).await?;
    let subscribed = subscribe_all(
        connected.into_iter().map(|(conn, _)| conn).collect(),
        |_| filter.to_owned(),
        sub_qos,
    )
    .await?;
    let pub_ids =
        (0..publishers).map(|i| format!("ferry-bench-{tag}-{scenario}-pub-{i}")).collect();
    let (publishers, _) = connect_all(broker, pub_ids, version).await?;
    Ok((subscribed, publishers, seconds_since(start)))
}

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

/// Starts one closed-loop publisher per connection: publisher `i` sends
/// `counts[i]` messages on `topic(i)` with the common options, then
/// disconnects.
pub fn spawn_closed_loop(
    publishers: Vec<(Conn, ConnAck)>,
    counts: &[u32],
    common: &CommonArgs,
    topic: impl Fn(usize) -> String,
) -> Vec<JoinHandle<Result<publisher::Outcome, BenchError>>> {
    publishers
        .into_iter()
        .zip(counts)
        .enumerate()
        .map(|(i, ((mut conn, connack), &count))| {
            let plan = Plan {
                id: i as u32,
                topic: topic(i),
                qos: common.qos(),
                payload_size: common.payload_size,
                count,
                inflight: common.inflight,
                schedule: Schedule::ClosedLoop,
            };
            tokio::spawn(async move {
                let outcome =
                    publisher::run(&mut conn, &plan, connack.properties.receive_maximum).await;
                conn.disconnect().await;
                outcome
            })
        })
        .collect()
}

/// Waits for the publishers: how many messages each sent, and when the last
/// of them was done (not before `start_ns`).
pub async fn join_publishers(
    handles: Vec<JoinHandle<Result<publisher::Outcome, BenchError>>>,
    start_ns: u64,
) -> Result<(Vec<u32>, u64), BenchError> {
    let mut sent = Vec::with_capacity(handles.len());
    let mut end_ns = start_ns;
    for handle in handles {
        let outcome = join(handle).await??;
        sent.push(outcome.sent);
        end_ns = end_ns.max(outcome.done_ns);
    }
    Ok((sent, end_ns))
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

/// CPU and RSS of the broker (if its pid is known) and of this process,
/// sampled when the run starts.
pub struct Sampler {
    broker: Option<(u32, Sample)>,
    bench: Sample,
    start_ns: u64,
}

impl Sampler {
    /// Takes the first samples.
    pub fn start(broker_pid: Option<u32>) -> Result<Sampler, BenchError> {
        let broker = match broker_pid {
            Some(pid) => Some((pid, sample(Target::Pid(pid), pid)?)),
            None => None,
        };
        Ok(Sampler {
            broker,
            bench: sample(Target::This, std::process::id())?,
            start_ns: clock::now_ns(),
        })
    }

    /// The broker's pid and first sample, if `--broker-pid` was given.
    pub fn broker_start(&self) -> Option<(u32, Sample)> {
        self.broker
    }

    /// Takes the last samples: (broker, bench) usage over the run.
    pub fn finish(&self, delivered: u64) -> Result<(Option<Usage>, Usage), BenchError> {
        let wall = seconds_since(self.start_ns);
        let broker = match self.broker {
            Some((pid, start)) => {
                Some(Usage::between(start, sample(Target::Pid(pid), pid)?, wall, delivered))
            }
            None => None,
        };
        let bench =
            Usage::between(self.bench, sample(Target::This, std::process::id())?, wall, delivered);
        Ok((broker, bench))
    }
}

fn sample(target: Target, pid: u32) -> Result<Sample, BenchError> {
    target.sample().map_err(|source| BenchError::Proc { pid, source })
}

/// Connections per loopback source address by default: each address offers
/// about 28,000 ephemeral ports (net.ipv4.ip_local_port_range), so this
/// leaves room for other sockets and TIME_WAIT.
pub const CONNECTIONS_PER_SOURCE: u32 = 20_000;

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
        assert_eq!(default_source_addresses(20_000), 1);
        assert_eq!(default_source_addresses(20_001), 2);
        assert_eq!(default_source_addresses(50_000), 3);
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
