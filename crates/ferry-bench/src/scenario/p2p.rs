//! `p2p`: N publisher/subscriber pairs, pair i on `bench/p2p/{i}`, at a
//! fixed total rate (open loop) — the Open MQTT Benchmark's `p2p`.
//!
//! Every message's due time is fixed before the run starts, and it carries
//! that time in its payload, so its latency counts from when it should have
//! left: a broker that stalls publishers pays for every message the stall
//! delayed, not just for the one that was waiting.

use super::{connect_all, join, seconds_between, split, subscribe_all, Sampler};
use crate::args::P2pArgs;
use crate::histogram::Latency;
use crate::publisher::{self, Plan, Schedule};
use crate::report::{Connections, Delivery, Report, Throughput};
use crate::tracker::{Counts, Tracker};
use crate::{clock, subscriber, BenchError};
use std::time::Duration;
use tokio::sync::oneshot;

/// Time between connecting the last client and the first due message, so
/// every task is running when the schedule starts.
const START_MARGIN_NS: u64 = 20_000_000;

/// Runs the scenario and reports.
pub async fn run(args: P2pArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    common.validate()?;
    if !(args.rate.is_finite() && args.rate > 0.0) {
        return Err(BenchError::Options(
            "--rate must be a positive number of messages per second".into(),
        ));
    }
    let total = match args.count {
        Some(count) => count,
        None if args.duration.is_finite() && args.duration > 0.0 => {
            (args.rate * args.duration).round() as u64
        }
        None => {
            return Err(BenchError::Options(
                "--duration must be a positive number of seconds".into(),
            ))
        }
    };
    let broker = super::resolve(&common.broker).await?;
    let version = common.mqtt_version.into();
    let counts = split(total, args.pairs)?;
    let tag = std::process::id();
    let sampler = Sampler::start(common.broker_pid)?;

    let connect_start = clock::now_ns();
    let sub_ids = (0..args.pairs).map(|i| format!("ferry-bench-{tag}-p2p-sub-{i}")).collect();
    let (subscribers, _) = connect_all(broker, sub_ids, version).await?;
    let subscribers = subscribe_all(
        subscribers.into_iter().map(|(conn, _)| conn).collect(),
        |i| format!("bench/p2p/{i}"),
        common.sub_qos(),
    )
    .await?;
    let pub_ids = (0..args.pairs).map(|i| format!("ferry-bench-{tag}-p2p-pub-{i}")).collect();
    let (publishers, _) = connect_all(broker, pub_ids, version).await?;
    let connect_seconds = super::seconds_since(connect_start);

    let drain = Duration::from_secs_f64(common.drain_timeout);
    let gap_ns = 1e9 / args.rate;
    let interval_ns = (gap_ns * f64::from(args.pairs)).round().max(1.0) as u64;
    let first_ns = clock::now_ns() + START_MARGIN_NS;
    let mut sub_handles = Vec::with_capacity(subscribers.len());
    let mut pub_handles = Vec::with_capacity(publishers.len());
    for (i, ((mut sub, (mut conn, connack)), &count)) in
        subscribers.into_iter().zip(publishers).zip(&counts).enumerate()
    {
        let (expected_tx, expected_rx) = oneshot::channel();
        sub_handles.push(tokio::spawn(async move {
            let outcome =
                subscriber::run(&mut sub, Tracker::new(&[count]), i as u32, expected_rx, drain)
                    .await;
            sub.disconnect().await;
            outcome
        }));
        let plan = Plan {
            id: i as u32,
            topic: format!("bench/p2p/{i}"),
            qos: common.qos(),
            payload_size: common.payload_size,
            count,
            inflight: common.inflight,
            // Pairs are staggered so that the total load is evenly spaced.
            schedule: Schedule::OpenLoop {
                first_ns: first_ns + (gap_ns * i as f64) as u64,
                interval_ns,
            },
        };
        pub_handles.push(tokio::spawn(async move {
            let outcome =
                publisher::run(&mut conn, &plan, connack.properties.receive_maximum).await;
            if let Ok(done) = &outcome {
                // A dropped subscriber has already failed; its result says why.
                let _ = expected_tx.send(u64::from(done.sent));
            }
            conn.disconnect().await;
            outcome
        }));
    }

    let mut total_sent = 0;
    let mut publish_end = first_ns;
    let mut sent = Vec::with_capacity(pub_handles.len());
    for handle in pub_handles {
        let outcome = join(handle).await??;
        total_sent += u64::from(outcome.sent);
        publish_end = publish_end.max(outcome.done_ns);
        sent.push(outcome.sent);
    }
    let mut counts = Counts::default();
    let mut latency = Latency::new();
    let mut last_receive = first_ns;
    for (handle, &sent) in sub_handles.into_iter().zip(&sent) {
        let outcome = join(handle).await??;
        counts += outcome.tracker.counts(&[sent]);
        latency.merge(&outcome.latency);
        last_receive = last_receive.max(outcome.last_receive_ns);
    }

    let (broker_usage, bench_usage) = sampler.finish(counts.received)?;
    let connections = 2 * u64::from(args.pairs);
    Ok(Report {
        scenario: "p2p",
        parameters: serde_json::to_value(&args).unwrap_or_default(),
        connections: Connections::new(connections, connect_seconds),
        publish: Throughput::new(
            total_sent,
            common.payload_size,
            seconds_between(first_ns, publish_end),
        ),
        receive: Throughput::new(
            counts.received,
            common.payload_size,
            seconds_between(first_ns, last_receive),
        ),
        delivery: Delivery::new(counts, total_sent),
        latency: latency.summary(),
        latency_from: "intended send time",
        latency_cdf: Vec::new(),
        timeline: Vec::new(),
        broker: broker_usage,
        bench: bench_usage,
        per_subscriber: None,
        conn: None,
    })
}
