//! `fanin`: many publishers, publisher i on `bench/fanin/{i}`, into one
//! shared subscription `$share/bench/bench/fanin/#` of K subscribers, closed
//! loop — the Open MQTT Benchmark's `sharedsub` and Event Grid's fan-in.
//!
//! The broker hands each message to one member of the group, so delivery is
//! judged over the union: the members' trackers are merged, and a message
//! that reached two members counts as a duplicate, one that reached none as
//! lost. How many each member got is reported too, showing the spread.

use super::{spawn_closed_loop, split, Measured, Run, Subscriber};
use crate::args::FaninArgs;
use crate::report::Report;
use crate::subscriber::Group;
use crate::tracker::Tracker;
use crate::BenchError;
use std::sync::Arc;

/// The shared subscription of every member: group `bench`, filter `bench/fanin/#`.
pub const FILTER: &str = "$share/bench/bench/fanin/#";

/// Runs the scenario and reports.
pub async fn run(args: FaninArgs) -> Result<Report, BenchError> {
    let common = &args.common;
    let mut run = Run::start(common).await?;
    let counts = split(args.messages, args.publishers)?;

    let (subscribers, publishers, connections) = run
        .connect_subscribers_then_publishers(
            "fanin",
            args.subscribers,
            FILTER,
            common.sub_qos(),
            args.publishers,
        )
        .await?;
    let group = Arc::new(Group::default());
    let subscribers: Vec<_> = subscribers
        .into_iter()
        .map(|sub| {
            let listen = run.listen(0, Some(Arc::clone(&group)));
            Subscriber::spawn(sub, Tracker::new(&counts), listen)
        })
        .collect();

    let publishers =
        spawn_closed_loop(&run, publishers, &counts, common, |i| format!("bench/fanin/{i}"));
    let start = run.start_publishing(&publishers, Some(args.messages)).await;
    let published = run.join_publishers(publishers, start).await?;
    let (sent, total_sent) = (&published.sent, published.total());
    let outcomes = run.join_subscribers(subscribers, |_| total_sent).await?;

    let mut union = Tracker::new(&counts);
    let mut last_receive = start;
    for outcome in &outcomes {
        union.merge(&outcome.tracker);
        last_receive = last_receive.max(outcome.last_receive_ns);
    }
    let measured = Measured {
        connections,
        publish_start_ns: start,
        published: &published,
        last_receive_ns: last_receive,
        counts: union.counts(sent),
        expected: total_sent,
        latency_from: "send time",
    };
    let mut report = run.report("fanin", &args, measured).await?;
    report.per_subscriber = Some(outcomes.iter().map(|o| o.tracker.received()).collect());
    Ok(report)
}
