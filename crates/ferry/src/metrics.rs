//! `GET /metrics`: Prometheus metrics in the OpenMetrics text format,
//! collected at scrape time. So far the routes' (`ferry_routes::RoutesMetrics`)
//! and the durable log's figures they depend on; the broker's own come
//! with the operations work. docs/routes.md lists every name.

use crate::reload::Reloader;
use ferry_broker::Broker;
use ferry_twins::service::Twins;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// The media types of the two formats: OpenMetrics for a scraper that asks
/// for it (Prometheus does), the older text format otherwise (what
/// `curl` and `promtool check metrics` read).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metrics in OpenMetrics text.
pub async fn render(
    broker: &Broker,
    reloader: &Reloader,
    twins: Option<&Twins>,
) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    if let Some(twins) = twins {
        registry.register_collector(Box::new(TwinMetrics {
            lagged_subscribers: twins.lagged_subscribers(),
        }));
    }
    if let Some(routes) = reloader.routes_metrics().await {
        registry.register_collector(Box::new(routes));
    }
    registry.register_collector(Box::new(StoreMetrics {
        refused_endpoint_full: broker.stats.refused_endpoint_full.get(),
        held_endpoint_full: broker.stats.held_endpoint_full.get(),
        free_disk_bytes: broker.store_figures().map(|figures| figures.free_disk_bytes),
    }));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

#[derive(Debug)]
struct StoreMetrics {
    refused_endpoint_full: u64,
    held_endpoint_full: u64,
    free_disk_bytes: Option<u64>,
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
        )?)?;
        if let Some(free) = self.free_disk_bytes {
            let free = ConstGauge::new(i64::try_from(free).unwrap_or(i64::MAX));
            free.encode(encoder.encode_descriptor(
                "ferry_store_disk_free_bytes",
                "Free space on the file system of the data directory.",
                None,
                free.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[derive(Debug)]
struct TwinMetrics {
    lagged_subscribers: u64,
}

impl Collector for TwinMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let lagged = ConstCounter::new(self.lagged_subscribers);
        lagged.encode(encoder.encode_descriptor(
            "ferry_twin_event_subscribers_lagged",
            "Subscribers to twin events (SSE streams) that fell behind the change feed and were closed; their clients resume from the event journal.",
            None,
            lagged.metric_type(),
        )?)
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
