//! `pubsub`: C publishers, closed loop, into one wildcard subscriber — the
//! shape of the Mosquitto performance article (100 publishers, 1,000,000
//! messages, one subscriber on `#`).

use super::{spawn_closed_loop, split, sum_outcomes, Measured, Run, Subscriber};
use crate::args::PubsubArgs;
use crate::report::Report;
use crate::tracker::Tracker;
use crate::BenchError;

/// Runs the scenario and reports.
pub async fn run(args: PubsubArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    let mut run = Run::start(common).await?;
    let counts = split(args.messages, args.publishers)?;
    let (subscribers, publishers, connections) = run
        .connect_subscribers_then_publishers(
            "pubsub",
            1,
            &args.filter,
            common.sub_qos(),
            args.publishers,
        )
        .await?;
    let sub = subscribers.into_iter().next().expect("one subscriber was connected");

    let subscriber = Subscriber::spawn(sub, Tracker::new(&counts), run.listen(0, None));
    let publishers = spawn_closed_loop(&run, publishers, &counts, common, |i| format!("bench/{i}"));
    let start = run.start_publishing(&publishers, Some(args.messages)).await;
    let published = run.join_publishers(publishers, start).await?;
    let (sent, total_sent) = (&published.sent, published.total());
    let outcomes = run.join_subscribers(vec![subscriber], |_| total_sent).await?;
    let (counts, last_receive) = sum_outcomes(&outcomes, |_| sent, start);

    let measured = Measured {
        connections,
        publish_start_ns: start,
        published: &published,
        last_receive_ns: last_receive,
        counts,
        expected: total_sent,
        latency_from: "send time",
    };
    run.report("pubsub", &args, measured).await
}
