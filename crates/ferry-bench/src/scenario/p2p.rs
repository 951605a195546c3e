//! `p2p`: N publisher/subscriber pairs, pair i on `bench/p2p/{i}`, at a
//! fixed total rate (open loop) — the Open MQTT Benchmark's `p2p`.
//!
//! Every message's due time is fixed before the run starts, and it carries
//! that time in its payload, so its latency counts from when it should have
//! left: a broker that stalls publishers pays for every message the stall
//! delayed, not just for the one that was waiting.

use super::{
    connect_all, positive_rate, spawn_open_loop, split, subscribe_all, sum_outcomes, Measured, Run,
    Subscriber,
};
use crate::args::P2pArgs;
use crate::report::{Connections, Report};
use crate::tracker::Tracker;
use crate::{clock, BenchError};

/// Runs the scenario and reports.
pub async fn run(args: P2pArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    positive_rate(args.rate, "--rate")?;
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
    let mut run = Run::start(common).await?;
    let counts = split(total, args.pairs)?;
    let tag = std::process::id();

    let connect_start = clock::now_ns();
    let sub_ids = (0..args.pairs).map(|i| format!("ferry-bench-{tag}-p2p-sub-{i}")).collect();
    let (subscribers, _) =
        connect_all(run.broker, sub_ids, run.version, run.subscriber_session_expiry).await?;
    let subscribers = subscribe_all(
        subscribers.into_iter().map(|(conn, _)| conn).collect(),
        |i| format!("bench/p2p/{i}"),
        common.sub_qos(),
    )
    .await?;
    let pub_ids = (0..args.pairs).map(|i| format!("ferry-bench-{tag}-p2p-pub-{i}")).collect();
    let (publishers, _) = connect_all(run.broker, pub_ids, run.version, 0).await?;
    let connect_seconds = super::seconds_since(connect_start);

    // Subscriber i hears only publisher i: its tracker is that one's.
    let subscribers: Vec<_> = subscribers
        .into_iter()
        .zip(&counts)
        .enumerate()
        .map(|(i, (sub, &count))| {
            Subscriber::spawn(sub, Tracker::new(&[count]), run.listen(i as u32, None))
        })
        .collect();
    let publishers =
        spawn_open_loop(&run, args.rate, publishers, &counts, common, |i| format!("bench/p2p/{i}"));
    let first = run.start_publishing(&publishers, Some(total)).await;
    let published = run.join_publishers(publishers, first).await?;
    let (sent, total_sent) = (&published.sent, published.total());
    let outcomes = run.join_subscribers(subscribers, |i| u64::from(sent[i])).await?;
    let (counts, last_receive) = sum_outcomes(&outcomes, |i| std::slice::from_ref(&sent[i]), first);

    let measured = Measured {
        connections: Connections::new(2 * u64::from(args.pairs), connect_seconds),
        publish_start_ns: first,
        published: &published,
        last_receive_ns: last_receive,
        counts,
        expected: total_sent,
        latency_from: "intended send time",
    };
    run.report("p2p", &args, measured).await
}
