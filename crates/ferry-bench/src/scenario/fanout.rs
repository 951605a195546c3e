//! `fanout`: P publishers on one topic, `bench/fanout`, and S subscribers
//! all subscribed to it, closed loop — the Open MQTT Benchmark's `fanout`
//! and Event Grid's broadcast. Every subscriber is to receive every
//! message, so a run of M messages expects M × S deliveries.

use super::{spawn_closed_loop, split, sum_outcomes, Measured, Run, Subscriber};
use crate::args::FanoutArgs;
use crate::report::Report;
use crate::tracker::Tracker;
use crate::BenchError;

/// The one topic every publisher sends on and every subscriber listens to.
pub const TOPIC: &str = "bench/fanout";

/// Runs the scenario and reports.
pub async fn run(args: FanoutArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    let mut run = Run::start(common).await?;
    let counts = split(args.messages, args.publishers)?;

    let (subscribers, publishers, connections) = run
        .connect_subscribers_then_publishers(
            "fanout",
            args.subscribers,
            TOPIC,
            common.sub_qos(),
            args.publishers,
        )
        .await?;
    let subscribers: Vec<_> = subscribers
        .into_iter()
        .map(|sub| Subscriber::spawn(sub, Tracker::new(&counts), run.listen(0, None)))
        .collect();

    let publishers = spawn_closed_loop(&run, publishers, &counts, common, |_| TOPIC.to_owned());
    let start =
        run.start_publishing(&publishers, Some(args.messages * u64::from(args.subscribers))).await;
    let published = run.join_publishers(publishers, start).await?;
    let (sent, total_sent) = (&published.sent, published.total());
    let outcomes = run.join_subscribers(subscribers, |_| total_sent).await?;
    let (mut counts, last_receive) = sum_outcomes(&outcomes, |_| sent, start);
    // Summed over subscribers, `sent` would count each message once per
    // subscriber; it stays what was published, and the expected deliveries
    // are sent × subscribers.
    counts.sent = total_sent;

    let measured = Measured {
        connections,
        publish_start_ns: start,
        published: &published,
        last_receive_ns: last_receive,
        counts,
        expected: total_sent * u64::from(args.subscribers),
        latency_from: "send time",
    };
    run.report("fanout", &args, measured).await
}
