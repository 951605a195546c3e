//! `fanin`: many publishers, publisher i on `bench/fanin/{i}`, into one
//! shared subscription `$share/bench/bench/fanin/#` of K subscribers, closed
//! loop — the Open MQTT Benchmark's `sharedsub` and Event Grid's fan-in.
//!
//! The broker hands each message to one member of the group, so delivery is
//! judged over the union: the members' trackers are merged, and a message
//! that reached two members counts as a duplicate, one that reached none as
//! lost. How many each member got is reported too, showing the spread.

use super::{
    connect_subscribers_then_publishers, join, join_publishers, seconds_between, spawn_closed_loop,
    split, Sampler,
};
use crate::args::FaninArgs;
use crate::histogram::Latency;
use crate::report::{Connections, Delivery, Report, Throughput};
use crate::subscriber::{self, Group};
use crate::tracker::Tracker;
use crate::{clock, BenchError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// The shared subscription of every member: group `bench`, filter `bench/fanin/#`.
pub const FILTER: &str = "$share/bench/bench/fanin/#";

/// Runs the scenario and reports.
pub async fn run(args: FaninArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    common.validate()?;
    let broker = super::resolve(&common.broker).await?;
    let version = common.mqtt_version.into();
    let counts = split(args.messages, args.publishers)?;
    let sampler = Sampler::start(common.broker_pid)?;

    let (subscribers, publishers, connect_seconds) = connect_subscribers_then_publishers(
        broker,
        "fanin",
        version,
        args.subscribers,
        FILTER,
        common.sub_qos(),
        args.publishers,
    )
    .await?;

    let drain = Duration::from_secs_f64(common.drain_timeout);
    let group = Arc::new(Group::default());
    let mut expected_txs = Vec::with_capacity(subscribers.len());
    let sub_handles: Vec<_> = subscribers
        .into_iter()
        .map(|mut sub| {
            let (expected_tx, expected_rx) = oneshot::channel();
            expected_txs.push(expected_tx);
            let tracker = Tracker::new(&counts);
            let group = Arc::clone(&group);
            tokio::spawn(async move {
                let outcome =
                    subscriber::run_in_group(&mut sub, tracker, expected_rx, drain, group).await;
                sub.disconnect().await;
                outcome
            })
        })
        .collect();

    let publish_start = clock::now_ns();
    let handles = spawn_closed_loop(publishers, &counts, common, |i| format!("bench/fanin/{i}"));
    let (sent, publish_end) = join_publishers(handles, publish_start).await?;
    let total_sent: u64 = sent.iter().map(|&n| u64::from(n)).sum();
    for expected_tx in expected_txs {
        // A subscriber may already have stopped with an error; its result says why.
        let _ = expected_tx.send(total_sent);
    }

    let mut union = Tracker::new(&counts);
    let mut per_subscriber = Vec::with_capacity(sub_handles.len());
    let mut latency = Latency::new();
    let mut last_receive = publish_start;
    for handle in sub_handles {
        let outcome = join(handle).await??;
        per_subscriber.push(outcome.tracker.received());
        union.merge(&outcome.tracker);
        latency.merge(&outcome.latency);
        last_receive = last_receive.max(outcome.last_receive_ns);
    }
    let counts = union.counts(&sent);

    let (broker_usage, bench_usage) = sampler.finish(counts.received)?;
    let connections = u64::from(args.publishers) + u64::from(args.subscribers);
    Ok(Report {
        scenario: "fanin",
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
        delivery: Delivery::new(counts, total_sent),
        latency: latency.summary(),
        latency_from: "send time",
        latency_cdf: Vec::new(),
        timeline: Vec::new(),
        broker: broker_usage,
        bench: bench_usage,
        per_subscriber: Some(per_subscriber),
        conn: None,
    })
}
