//! `fanout`: P publishers on one topic, `bench/fanout`, and S subscribers
//! all subscribed to it, closed loop — the Open MQTT Benchmark's `fanout`
//! and Event Grid's broadcast. Every subscriber is to receive every
//! message, so a run of M messages expects M × S deliveries.

use super::{
    connect_all, join, join_publishers, seconds_between, spawn_closed_loop, split, subscribe_all,
    Sampler,
};
use crate::args::FanoutArgs;
use crate::histogram::Latency;
use crate::report::{Connections, Delivery, Report, Throughput};
use crate::tracker::{Counts, Tracker};
use crate::{clock, subscriber, BenchError};
use std::time::Duration;
use tokio::sync::oneshot;

/// The one topic every publisher sends on and every subscriber listens to.
pub const TOPIC: &str = "bench/fanout";

/// Runs the scenario and reports.
pub async fn run(args: FanoutArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    common.validate()?;
    let broker = super::resolve(&common.broker).await?;
    let version = common.mqtt_version.into();
    let counts = split(args.messages, args.publishers)?;
    let tag = std::process::id();
    let sampler = Sampler::start(common.broker_pid)?;

    // Every subscription is in place (SUBACK received) before anyone publishes.
    let connect_start = clock::now_ns();
    let sub_ids =
        (0..args.subscribers).map(|i| format!("ferry-bench-{tag}-fanout-sub-{i}")).collect();
    let (subscribers, _) = connect_all(broker, sub_ids, version).await?;
    let subscribers = subscribe_all(
        subscribers.into_iter().map(|(conn, _)| conn).collect(),
        |_| TOPIC.to_owned(),
        common.sub_qos(),
    )
    .await?;
    let pub_ids =
        (0..args.publishers).map(|i| format!("ferry-bench-{tag}-fanout-pub-{i}")).collect();
    let (publishers, _) = connect_all(broker, pub_ids, version).await?;
    let connect_seconds = super::seconds_since(connect_start);

    let drain = Duration::from_secs_f64(common.drain_timeout);
    let mut expected_txs = Vec::with_capacity(subscribers.len());
    let sub_handles: Vec<_> = subscribers
        .into_iter()
        .map(|mut sub| {
            let (expected_tx, expected_rx) = oneshot::channel();
            expected_txs.push(expected_tx);
            let tracker = Tracker::new(&counts);
            tokio::spawn(async move {
                let outcome = subscriber::run(&mut sub, tracker, 0, expected_rx, drain).await;
                sub.disconnect().await;
                outcome
            })
        })
        .collect();

    let publish_start = clock::now_ns();
    let handles = spawn_closed_loop(publishers, &counts, common, |_| TOPIC.to_owned());
    let (sent, publish_end) = join_publishers(handles, publish_start).await?;
    let total_sent: u64 = sent.iter().map(|&n| u64::from(n)).sum();
    for expected_tx in expected_txs {
        // A subscriber may already have stopped with an error; its result says why.
        let _ = expected_tx.send(total_sent);
    }

    let mut counts = Counts::default();
    let mut latency = Latency::new();
    let mut last_receive = publish_start;
    for handle in sub_handles {
        let outcome = join(handle).await??;
        counts += outcome.tracker.counts(&sent);
        latency.merge(&outcome.latency);
        last_receive = last_receive.max(outcome.last_receive_ns);
    }
    // Summed over subscribers, `sent` would count each message once per
    // subscriber; it stays what was published, and the expected deliveries
    // are sent × subscribers.
    counts.sent = total_sent;
    let expected = total_sent * u64::from(args.subscribers);

    let (broker_usage, bench_usage) = sampler.finish(counts.received)?;
    let connections = u64::from(args.publishers) + u64::from(args.subscribers);
    Ok(Report {
        scenario: "fanout",
        parameters: serde_json::to_value(&args).unwrap_or_default(),
        connections: Connections {
            count: connections,
            seconds: connect_seconds,
            per_second: connections as f64 / connect_seconds.max(1e-9),
        },
        publish: Throughput::new(
            total_sent,
            common.payload_size,
            seconds_between(publish_start, publish_end),
        ),
        receive: Throughput::new(
            counts.received,
            common.payload_size,
            seconds_between(publish_start, last_receive),
        ),
        delivery: Delivery::new(counts, expected),
        latency: latency.summary(),
        latency_from: "send time",
        broker: broker_usage,
        bench: bench_usage,
        per_subscriber: None,
        conn: None,
    })
}
