//! `burst`: IotEdgePerf's transmitter — a burst of messages at a target
//! rate from N publishers (publisher i on `bench/burst/{i}`) to one
//! subscriber on `bench/burst/#`, open loop.
//!
//! The IoT Edge article reads four things off such a burst: the source rate
//! the transmitter actually achieved against the target, the rate at which
//! messages arrived, the latency of every message and of the last one (how
//! long the queue took to drain), and the backlog — sent but not yet
//! received — over time, which grows while the source outpaces delivery and
//! shrinks once the burst is over. Latency counts from each message's due
//! time, so a source that falls behind shows up as latency, as it would for
//! a device whose readings queue up before they leave.
//!
//! With `--receive-from` the subscriber is at the upstream of the edge the
//! publishers load (`crate::upstream`), as IotEdgePerf reads the IoT Hub's
//! side; after an outage the report adds the drain from the upstream's
//! return.

use super::{
    positive_rate, resolve, spawn_open_loop, split, sum_outcomes, Measured, Run, Subscriber,
};
use crate::args::BurstArgs;
use crate::report::{BurstFigures, Drain, Report};
use crate::timeline::Tick;
use crate::tracker::Tracker;
use crate::upstream::{receive_filter, Upstream};
use crate::BenchError;
use std::sync::Arc;

/// The subscriber's filter: every publisher's topic.
pub const FILTER: &str = "bench/burst/#";

/// Runs the scenario and reports.
pub async fn run(args: BurstArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    positive_rate(args.target_rate, "--target-rate")?;
    let upstream = match &args.receive_from {
        Some(url) => Some(Upstream {
            broker: resolve(url).await?,
            filter: receive_filter(args.receive_topic.as_deref(), FILTER)?,
            qos: common.sub_qos(),
            version: common.mqtt_version.into(),
            session_expiry: common.session_expiry,
        }),
        None => None,
    };
    let mut run = Run::start(common).await?;
    let counts = split(args.burst_length, args.publishers)?;
    let (subscribe_at, filter) =
        upstream.as_ref().map_or((run.broker, FILTER), |u| (u.broker, u.filter.as_str()));
    let (subscribers, publishers, connections) = run
        .connect_subscribers_at_then_publishers(
            subscribe_at,
            "burst",
            1,
            filter,
            common.sub_qos(),
            args.publishers,
        )
        .await?;
    let sub = subscribers.into_iter().next().expect("one subscriber was connected");

    let mut listen = run.listen(0, None);
    // Without a persistent session, what the upstream took while the
    // subscriber was away would be lost on the way to it and blamed on the
    // edge: such a subscriber fails the run instead of resuming.
    listen.upstream = upstream.filter(|u| u.session_expiry > 0).map(Arc::new);
    let subscriber = Subscriber::spawn(sub, Tracker::new(&counts), listen);
    let publishers = spawn_open_loop(&run, args.target_rate, publishers, &counts, common, |i| {
        format!("bench/burst/{i}")
    });
    let first = run.start_publishing(&publishers, Some(args.burst_length)).await;
    let published = run.join_publishers(publishers, first).await?;
    let (sent, total_sent) = (&published.sent, published.total());
    let outcomes = run.join_subscribers(vec![subscriber], |_| total_sent).await?;
    let (counts, last_receive) = sum_outcomes(&outcomes, |_| sent, first);
    let upstream_return = outcomes.first().and_then(|o| o.upstream_return);

    let measured = Measured {
        connections,
        publish_start_ns: first,
        published: &published,
        last_receive_ns: last_receive,
        counts,
        expected: total_sent,
        latency_from: "intended send time",
    };
    let mut report = run.report("burst", &args, measured).await?;
    let burst_end_seconds = seconds(published.last_queued_ns.saturating_sub(first));
    let drain = upstream_return.map(|back| {
        Drain::new(
            seconds(back.at_ns.saturating_sub(first)),
            counts.received.saturating_sub(back.received_before),
            seconds(last_receive.saturating_sub(back.at_ns)),
        )
    });
    report.burst = Some(BurstFigures::new(
        args.target_rate,
        total_sent,
        counts.received,
        burst_end_seconds,
        seconds(last_receive.saturating_sub(first)),
        seconds(last_receive.saturating_sub(published.last_stamp_ns)),
        backlog_at(&report.timeline, burst_end_seconds),
        max_backlog(&report.timeline),
        drain,
    ));
    Ok(report)
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The largest backlog (sent − received) the timeline saw.
pub fn max_backlog(timeline: &[Tick]) -> u64 {
    timeline.iter().map(|t| t.sent.saturating_sub(t.received)).max().unwrap_or(0)
}

/// The backlog at the first tick at or after `seconds` (the last tick if
/// none is that late).
pub fn backlog_at(timeline: &[Tick], seconds: f64) -> u64 {
    timeline
        .iter()
        .find(|t| t.seconds >= seconds)
        .or(timeline.last())
        .map_or(0, |t| t.sent.saturating_sub(t.received))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(seconds: f64, sent: u64, received: u64) -> Tick {
        Tick { seconds, sent, received }
    }

    #[test]
    fn backlog_grows_while_the_source_outpaces_delivery() {
        // 2,000 msg/s out, 1,000 msg/s in for 2 s, then draining.
        let timeline = [
            tick(0.0, 0, 0),
            tick(1.0, 2_000, 1_000),
            tick(2.0, 4_000, 2_000),
            tick(3.0, 4_000, 3_000),
            tick(4.0, 4_000, 4_000),
        ];
        assert_eq!(max_backlog(&timeline), 2_000);
        assert_eq!(backlog_at(&timeline, 2.0), 2_000);
        assert_eq!(backlog_at(&timeline, 2.5), 1_000, "the first tick at or after");
        assert_eq!(backlog_at(&timeline, 9.0), 0, "past the end: the last tick");
        assert_eq!(max_backlog(&[]), 0);
        assert_eq!(backlog_at(&[], 1.0), 0);
    }
}
