//! `pubsub`: C publishers, closed loop, into one wildcard subscriber — the
//! shape of the Mosquitto performance article (100 publishers, 1,000,000
//! messages, one subscriber on `#`).

use super::{
    connect_all, join, join_publishers, seconds_between, spawn_closed_loop, split, Sampler,
};
use crate::args::PubsubArgs;
use crate::client::Conn;
use crate::report::{Connections, Delivery, Report, Throughput};
use crate::tracker::Tracker;
use crate::{clock, subscriber, BenchError};
use std::time::Duration;
use tokio::sync::oneshot;

/// Runs the scenario and reports.
pub async fn run(args: PubsubArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    common.validate()?;
    let broker = super::resolve(&common.broker).await?;
    let version = common.mqtt_version.into();
    let counts = split(args.messages, args.publishers)?;
    let tag = std::process::id();
    let sampler = Sampler::start(common.broker_pid)?;

    let connect_start = clock::now_ns();
    let (mut sub, _) = Conn::connect(broker, format!("ferry-bench-{tag}-sub"), version).await?;
    sub.subscribe(&args.filter, common.sub_qos()).await?;
    let ids = (0..args.publishers).map(|i| format!("ferry-bench-{tag}-pub-{i}")).collect();
    let (publishers, _) = connect_all(broker, ids, version).await?;
    let connect_seconds = super::seconds_since(connect_start);

    let (expected_tx, expected_rx) = oneshot::channel();
    let drain = Duration::from_secs_f64(common.drain_timeout);
    let tracker = Tracker::new(&counts);
    let subscriber = tokio::spawn(async move {
        let outcome = subscriber::run(&mut sub, tracker, 0, expected_rx, drain).await;
        sub.disconnect().await;
        outcome
    });

    let publish_start = clock::now_ns();
    let handles = spawn_closed_loop(publishers, &counts, common, |i| format!("bench/{i}"));
    let (sent, publish_end) = join_publishers(handles, publish_start).await?;
    let total_sent: u64 = sent.iter().map(|&n| u64::from(n)).sum();
    // The subscriber may already have stopped with an error; its result says why.
    let _ = expected_tx.send(total_sent);
    let received = join(subscriber).await??;

    let counts = received.tracker.counts(&sent);
    let (broker_usage, bench_usage) = sampler.finish(counts.received)?;
    Ok(Report {
        scenario: "pubsub",
        parameters: serde_json::to_value(&args).unwrap_or_default(),
        connections: Connections::new(u64::from(args.publishers) + 1, connect_seconds),
        publish: Throughput::new(
            total_sent,
            common.payload_size,
            seconds_between(publish_start, publish_end),
        ),
        receive: Throughput::new(
            counts.received,
            common.payload_size,
            seconds_between(publish_start, received.last_receive_ns),
        ),
        delivery: Delivery::new(counts, total_sent),
        latency: received.latency.summary(),
        latency_from: "send time",
        latency_cdf: Vec::new(),
        timeline: Vec::new(),
        broker: broker_usage,
        bench: bench_usage,
        per_subscriber: None,
        conn: None,
    })
}
