//! `fanout`: P publishers on one topic, `bench/fanout`, and S subscribers
//! all subscribed to it, closed loop — the Open MQTT Benchmark's `fanout`
//! and Event Grid's broadcast. Every subscriber is to receive every
//! message, so a run of M messages expects M × S deliveries.

use super::{
    connect_subscribers_then_publishers, join, join_publishers, seconds_between, spawn_closed_loop,
    split, Sampler,
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
    let sampler = Sampler::start(common.broker_pid)?;

    let (subscribers, publishers, connect_seconds) = connect_subscribers_then_publishers(
        broker,
        "fanout",
        version,
        args.subscribers,
        TOPIC,
        common.sub_qos(),
        args.publishers,
    )
    .await?;

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
        connections: Connections::new(connections, connect_seconds),
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
        latency_cdf: Vec::new(),
        timeline: Vec::new(),
        broker: broker_usage,
        bench: bench_usage,
        per_subscriber: None,
        conn: None,
    })
}
