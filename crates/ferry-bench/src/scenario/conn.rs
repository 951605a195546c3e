//! `conn`: open N connections at a target rate with at most `concurrency`
//! CONNECTs in flight, hold them idle, and measure what that costs the
//! broker — the connection test of the Mosquitto performance article.
//! With `--storm`, open them all at once, as a fleet reconnects after a
//! broker restart, and count the SYNs the kernel dropped for a full listen
//! backlog (TcpExtListenOverflows, when the broker is on this machine).
//!
//! A failed connection is a result, not an error: the run goes on and
//! reports how many failed and the first reason. Clients are spread over
//! loopback source addresses (`--source-addresses`) so that one process is
//! not limited by, or slowed down by, the ~28,000 ephemeral ports of a
//! single address.

use super::{
    default_source_addresses, disconnect_all, join, seconds_since, settled_rss, source_address,
    Sampler,
};
use crate::args::ConnArgs;
use crate::client::Conn;
use crate::histogram::LatencySummary;
use crate::procstat;
use crate::report::{ConnFigures, Connections, Delivery, Report, Throughput};
use crate::tracker::Counts;
use crate::{clock, BenchError};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Runs the scenario and reports.
pub async fn run(args: ConnArgs) -> Result<Report, BenchError> {
    args.validate()?;
    let broker = super::resolve(&args.broker).await?;
    let sources = sources(broker, &args)?;
    let version = args.mqtt_version.into();
    let tag = std::process::id();
    let sampler = Sampler::start(args.broker_pid, false).await?;

    // Connect phase: client i is due at start + i / rate, and waits for one
    // of `concurrency` permits, held until its CONNACK (or failure). A
    // storm has a permit for every client.
    let permits = if args.storm { args.connections } else { args.concurrency };
    let permits = Arc::new(Semaphore::new(permits as usize));
    // The kernel's count is for the whole machine: only meaningful when the
    // broker is on it, and when nothing else overflows a backlog meanwhile.
    let overflows_before = broker.ip().is_loopback().then(procstat::listen_overflows).flatten();
    let start = tokio::time::Instant::now();
    let connect_start = clock::now_ns();
    let mut handles = Vec::with_capacity(args.connections as usize);
    for i in 0..args.connections {
        if args.rate > 0.0 {
            tokio::time::sleep_until(start + Duration::from_secs_f64(f64::from(i) / args.rate))
                .await;
        }
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .map_err(|e| BenchError::Task(e.to_string()))?;
        let source = sources.map(|count| source_address(i, count));
        let id = format!("ferry-bench-{tag}-conn-{i}");
        let keep_alive = args.keep_alive;
        handles.push(tokio::spawn(async move {
            let result = Conn::connect_from(broker, source, id, version, keep_alive).await;
            drop(permit);
            result.map(|(mut conn, _)| {
                conn.release_buffers();
                conn
            })
        }));
    }
    let mut conns = Vec::with_capacity(handles.len());
    let mut failed = 0u64;
    let mut first_error = None;
    for handle in handles {
        match join(handle).await? {
            Ok(conn) => conns.push(conn),
            Err(error) => {
                failed += 1;
                first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    let connect_seconds = seconds_since(connect_start);
    let listen_overflows = overflows_before
        .zip(procstat::listen_overflows())
        .map(|(before, after)| after.saturating_sub(before));
    let connected = conns.len() as u64;
    let connects_per_second = connected as f64 / connect_seconds.max(1e-9);

    // All open and idle: let the broker's RSS settle, then sample both.
    let broker_rss_before = sampler.broker_start().map(|(_, s)| s.rss_bytes);
    let broker_rss_connected = match args.broker_pid {
        Some(pid) => Some(settled_rss(pid).await?),
        None => None,
    };
    let sampled = sampler.finish(0).await?;
    let (broker_usage, bench_usage) = (sampled.broker, sampled.bench);

    tokio::time::sleep(Duration::from_secs_f64(args.hold)).await;

    let disconnections = disconnect_all(conns).await?;

    let figures = ConnFigures {
        attempted: u64::from(args.connections),
        connected,
        failed,
        first_error,
        connect_seconds,
        connects_per_second,
        listen_overflows,
        source_addresses: sources.unwrap_or(0),
        broker_rss_before_bytes: broker_rss_before,
        broker_rss_connected_bytes: broker_rss_connected,
        broker_rss_per_connection_bytes: broker_rss_before
            .zip(broker_rss_connected)
            .and_then(|(before, after)| ConnFigures::rss_per_connection(before, after, connected)),
        bench_rss_connected_bytes: bench_usage.rss_end_bytes,
        disconnect_seconds: disconnections.seconds,
    };
    Ok(Report {
        disconnections,
        scenario: "conn",
        parameters: serde_json::to_value(&args).unwrap_or_default(),
        connections: Connections {
            count: connected,
            seconds: connect_seconds,
            per_second: connects_per_second,
        },
        publish: Throughput::new(0, 0, 0.0),
        receive: Throughput::new(0, 0, 0.0),
        delivery: Delivery::new(Counts::default(), 0),
        latency: LatencySummary::default(),
        latency_from: "send time",
        latency_cdf: Vec::new(),
        ack_latency: None,
        timeline: Vec::new(),
        broker: broker_usage,
        bench: bench_usage,
        syscalls: None,
        per_subscriber: None,
        burst: None,
        conn: Some(figures),
    })
}

/// How many loopback source addresses to spread the clients over, or
/// `None` to let the kernel choose (a broker not on IPv4 loopback, which
/// 127.0.0.x cannot reach).
fn sources(broker: SocketAddr, args: &ConnArgs) -> Result<Option<u32>, BenchError> {
    let count = args.source_addresses.unwrap_or(default_source_addresses(args.connections));
    match broker.ip() {
        IpAddr::V4(ip) if ip.is_loopback() => Ok(Some(count)),
        _ if args.source_addresses.is_some_and(|n| n > 1) => Err(BenchError::Options(format!(
            "--source-addresses {count} needs a broker on IPv4 loopback, not {broker}"
        ))),
        _ => Ok(None),
    }
}
