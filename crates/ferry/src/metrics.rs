//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format,
//! collected at scrape time: the broker's (`metrics/broker.rs`), the
//! process's (`metrics/process.rs`), the routes' (`ferry_routes::RoutesMetrics`)
//! and the twins'. docs/metrics.md lists every name.

mod broker;
mod encode;
mod process;

use crate::ready::Accepting;
use crate::reload::Reloader;
use ferry_broker::Broker;
use ferry_twins::connections::{Connections, SourceFigures, TargetFigures};
use ferry_twins::service::Twins;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The media types of the two formats: OpenMetrics for a scraper that asks
/// for it (Prometheus does), the older text format otherwise (what
/// `curl` and `promtool check metrics` read).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a scrape reads.
pub struct Sources<'a> {
    pub broker: &'a Broker,
    pub reloader: &'a Reloader,
    pub listeners: &'a [Arc<Accepting>],
    pub twins: Option<&'a Twins>,
    pub connections: Option<&'a Connections>,
}

/// The metrics in OpenMetrics text.
pub async fn render(sources: Sources<'_>) -> Result<String, std::fmt::Error> {
    let Sources { broker, reloader, listeners, twins, connections } = sources;
    let mut registry = Registry::default();
    registry.register_collector(Box::new(broker::BrokerMetrics::read(broker, listeners)));
    registry.register_collector(Box::new(process::ProcessMetrics::read(broker)));
    if let Some(twins) = twins {
        let (things, policies) = twins.cached();
        registry.register_collector(Box::new(TwinMetrics {
            lagged_subscribers: twins.lagged_subscribers(),
            live_dropped: twins.live().dropped.load(Ordering::Relaxed),
            things_cached: things,
            policies_cached: policies,
            subjects_watched: twins.announcements().planned(),
            announcements_sent: twins.announcements().sent(),
        }));
    }
    if let Some(connections) = connections {
        registry.register_collector(Box::new(ConnectionMetrics(connections.figures().await)));
        let sources = connections.source_figures().await;
        registry.register_collector(Box::new(SourceMetrics(sources)));
    }
    if let Some(routes) = reloader.routes_metrics().await {
        registry.register_collector(Box::new(routes));
    }
    registry.register_collector(Box::new(StoreMetrics {
        refused_endpoint_full: broker.stats.refused_endpoint_full.get(),
        held_endpoint_full: broker.stats.held_endpoint_full.get(),
    }));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

/// The routes' figures the broker counts on its publish path.
#[derive(Debug)]
struct StoreMetrics {
    refused_endpoint_full: u64,
    held_endpoint_full: u64,
}

impl Collector for StoreMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let refused = ConstCounter::new(self.refused_endpoint_full);
        refused.encode(encoder.encode_descriptor(
            "ferry_route_refused_messages",
            "Publishes refused (0x97) because an endpoint held its max_bytes: at once with when_full = reject, past block_timeout with block.",
            None,
            refused.metric_type(),
        )?)?;
        let held = ConstCounter::new(self.held_endpoint_full);
        held.encode(encoder.encode_descriptor(
            "ferry_route_held_messages",
            "Publishes whose acknowledgement was held back because an endpoint with when_full = block held its max_bytes.",
            None,
            held.metric_type(),
        )?)
    }
}

#[derive(Debug)]
struct TwinMetrics {
    lagged_subscribers: u64,
    live_dropped: u64,
    things_cached: usize,
    policies_cached: usize,
    subjects_watched: usize,
    announcements_sent: u64,
}

impl Collector for TwinMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for (name, help, value) in [
            (
                "ferry_twin_event_subscribers_lagged",
                "Subscribers to twin events (SSE streams) that fell behind the change feed and were closed; their clients resume from the event journal.",
                self.lagged_subscribers,
            ),
            (
                "ferry_twin_live_dropped",
                "Live signals and twin events WebSocket sessions did not get because they fell behind (a full push queue, a lagging change feed).",
                self.live_dropped,
            ),
            (
                "ferry_twin_policy_announcements",
                "Policy announcements sent (subjectDeletion), each sending again of one not acknowledged counted.",
                self.announcements_sent,
            ),
        ] {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(name, help, None, counter.metric_type())?)?;
        }
        for (name, help, value) in [
            ("ferry_twin_things_cached", "Things in the twins' cache.", self.things_cached),
            (
                "ferry_twin_policies_cached",
                "Policies in the twins' cache (with their compiled enforcers).",
                self.policies_cached,
            ),
            (
                "ferry_twin_subjects_watched",
                "Policy subjects with an expiry or announcement whose time is watched.",
                self.subjects_watched,
            ),
        ] {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// A counter family: its name, its help, and what it counts of an item.
type CounterFamily<'n, T> = (&'n str, &'n str, fn(&T) -> u64);

/// Counter families with one sample per item, labelled by `labels`.
fn counter_families<'a, T>(
    encoder: &mut DescriptorEncoder<'_>,
    families: &[CounterFamily<'_, T>],
    items: &'a [T],
    labels: impl Fn(&'a T) -> [(&'static str, &'a str); 2],
) -> Result<(), std::fmt::Error> {
    for (name, help, count) in families {
        let mut family = encoder.encode_descriptor(
            name,
            help,
            None,
            prometheus_client::metrics::MetricType::Counter,
        )?;
        for item in items {
            ConstCounter::new(count(item)).encode(family.encode_family(&labels(item))?)?;
        }
    }
    Ok(())
}

/// The twins' connections, per target (`docs/twins.md`, Connections).
#[derive(Debug)]
struct ConnectionMetrics(Vec<TargetFigures>);

impl Collector for ConnectionMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        type Count = fn(&TargetFigures) -> u64;
        let families: [(&str, &str, Count); 5] = [
            (
                "ferry_twin_connection_dispatched",
                "Twin events a connection's target selected and its subjects may read.",
                |f| f.dispatched,
            ),
            (
                "ferry_twin_connection_filtered",
                "Twin events a target's topics or READ rights let nothing through of.",
                |f| f.filtered,
            ),
            ("ferry_twin_connection_published", "Requests the receiver answered 2xx.", |f| {
                f.published
            }),
            (
                "ferry_twin_connection_failed",
                "Requests refused for good (4xx) or out of tries.",
                |f| f.failed,
            ),
            (
                "ferry_twin_connection_dropped",
                "Requests dropped because the connection's queue was full.",
                |f| f.dropped,
            ),
        ];
        counter_families(&mut encoder, &families, &self.0, |target| {
            [("connection", target.connection.as_str()), ("target", target.address.as_str())]
        })?;
        let mut open = encoder.encode_descriptor(
            "ferry_twin_connection_open",
            "1 while the connection runs (connectionStatus open), else 0; per target.",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for target in &self.0 {
            let labels =
                [("connection", target.connection.as_str()), ("target", target.address.as_str())];
            ConstGauge::new(i64::from(target.open)).encode(open.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The twins' connections' sources (Kafka), per source.
#[derive(Debug)]
struct SourceMetrics(Vec<SourceFigures>);

impl Collector for SourceMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        type Count = fn(&SourceFigures) -> u64;
        let families: [(&str, &str, Count); 3] = [
            (
                "ferry_twin_connection_consumed",
                "Records a connection's source read (Ditto protocol commands).",
                |f| f.consumed,
            ),
            (
                "ferry_twin_connection_applied",
                "Commands of a connection's source that were executed and succeeded.",
                |f| f.applied,
            ),
            (
                "ferry_twin_connection_source_failed",
                "Commands of a connection's source not executed (enforcement, malformed) or refused.",
                |f| f.failed,
            ),
        ];
        counter_families(&mut encoder, &families, &self.0, |source| {
            [("connection", source.connection.as_str()), ("source", source.addresses.as_str())]
        })
    }
}

/// OpenMetrics text as the Prometheus text format (0.0.4): a counter's
/// HELP and TYPE name its samples' `_total` name, and there is no `# EOF`.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        if line.starts_with("# HELP ") {
            // Held until its TYPE line says whether the name takes `_total`.
            if let Some(previous) = help.replace(line) {
                out.push_str(previous);
                out.push('\n');
            }
            continue;
        }
        if let Some(name) =
            line.strip_prefix("# TYPE ").and_then(|rest| rest.strip_suffix(" counter"))
        {
            if let Some(help) = help.take() {
                out.push_str(&help.replacen(name, &format!("{name}_total"), 1));
                out.push('\n');
            }
            out.push_str(&format!("# TYPE {name}_total counter\n"));
            continue;
        }
        if let Some(help) = help.take() {
            out.push_str(help);
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_take_their_total_name_in_the_text_format() {
        let openmetrics = "# HELP a_sent Sent.\n# TYPE a_sent counter\na_sent_total 3\n\
                           # HELP b Queued.\n# TYPE b gauge\nb 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(openmetrics),
            "# HELP a_sent_total Sent.\n# TYPE a_sent_total counter\na_sent_total 3\n\
             # HELP b Queued.\n# TYPE b gauge\nb 1\n"
        );
    }
}
