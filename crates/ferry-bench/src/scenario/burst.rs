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

use super::{positive_rate, spawn_open_loop, split, sum_outcomes, Measured, Run, Subscriber};
use crate::args::BurstArgs;
use crate::report::{BurstFigures, Report};
use crate::timeline::Tick;
use crate::tracker::Tracker;
use crate::BenchError;

/// The subscriber's filter: every publisher's topic.
pub const FILTER: &str = "bench/burst/#";

/// Runs the scenario and reports.
pub async fn run(args: BurstArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    positive_rate(args.target_rate, "--target-rate")?;
    let mut run = Run::start(common).await?;
    let counts = split(args.burst_length, args.publishers)?;
    let (subscribers, publishers, connections) = run
        .connect_subscribers_then_publishers("burst", 1, FILTER, common.sub_qos(), args.publishers)
        .await?;
    let sub = subscribers.into_iter().next().expect("one subscriber was connected");

    let subscriber = Subscriber::spawn(sub, Tracker::new(&counts), run.listen(0, None));
    let publishers = spawn_open_loop(&run, args.target_rate, publishers, &counts, common, |i| {
        format!("bench/burst/{i}")
    });
    let first = run.start_publishing(&publishers, Some(args.burst_length)).await;
    let published = run.join_publishers(publishers, first).await?;
    let (sent, total_sent) = (&published.sent, published.total());
    let outcomes = run.join_subscribers(vec![subscriber], |_| total_sent).await?;
    let (counts, last_receive) = sum_outcomes(&outcomes, |_| sent, first);

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
    report.burst = Some(BurstFigures::new(
        args.target_rate,
        total_sent,
        counts.received,
        burst_end_seconds,
        seconds(last_receive.saturating_sub(first)),
        seconds(last_receive.saturating_sub(published.last_stamp_ns)),
        backlog_at(&report.timeline, burst_end_seconds),
        max_backlog(&report.timeline),
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
