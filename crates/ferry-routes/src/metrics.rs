//! The routes' Prometheus metrics, collected at scrape time from
//! `RoutesService::status`: nothing on the publish path but the per-endpoint
//! `routed` counter the route table keeps. docs/routes.md lists every name.

use crate::service::EndpointStatus;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

/// A snapshot of every endpoint, encoded as metric families.
#[derive(Debug)]
pub struct RoutesMetrics {
    endpoints: Vec<EndpointStatus>,
    /// Messages no route took (with `count_unrouted`).
    unrouted: u64,
}

impl RoutesMetrics {
    pub fn new(endpoints: Vec<EndpointStatus>, unrouted: u64) -> RoutesMetrics {
        RoutesMetrics { endpoints, unrouted }
    }
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

impl Collector for RoutesMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let endpoint = |status: &EndpointStatus| -> Vec<(&'static str, String)> {
            vec![("endpoint", status.name.clone())]
        };
        let counter = |encoder: &mut DescriptorEncoder<'_>,
                       name: &str,
                       help: &str,
                       value: &dyn Fn(&EndpointStatus) -> u64|
         -> Result<(), std::fmt::Error> {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for status in &self.endpoints {
                family
                    .encode_family(&endpoint(status))?
                    .encode_counter::<Labels, _, f64>(&value(status), None)?;
            }
            Ok(())
        };
        let unrouted = ConstCounter::new(self.unrouted);
        unrouted.encode(encoder.encode_descriptor(
            "ferry_route_unrouted_messages",
            "Messages no route took (counted with [routes] count_unrouted = true).",
            None,
            unrouted.metric_type(),
        )?)?;
        counter(
            &mut encoder,
            "ferry_route_routed_messages",
            "Messages routes sent to the endpoint (stored for it).",
            &|s| s.figures.routed,
        )?;
        counter(
            &mut encoder,
            "ferry_route_sent_messages",
            "Messages the endpoint acknowledged.",
            &|s| s.figures.sent,
        )?;
        counter(&mut encoder, "ferry_route_batches", "Batches the endpoint acknowledged.", &|s| {
            s.figures.batches
        })?;

        let mut dropped = encoder.encode_descriptor(
            "ferry_route_dropped_messages",
            "Messages dropped unsent, by reason: ttl, cap, rejected_by_endpoint, http_<status>, too_large, invalid_topic, unreadable.",
            None,
            MetricType::Counter,
        )?;
        for status in &self.endpoints {
            for (reason, count) in &status.figures.dropped {
                let labels = vec![("endpoint", status.name.as_str()), ("reason", *reason)];
                dropped.encode_family(&labels)?.encode_counter::<Labels, _, f64>(count, None)?;
            }
        }

        let gauge = |encoder: &mut DescriptorEncoder<'_>,
                     name: &str,
                     help: &str,
                     value: &dyn Fn(&EndpointStatus) -> f64|
         -> Result<(), std::fmt::Error> {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for status in &self.endpoints {
                family.encode_family(&endpoint(status))?.encode_gauge(&value(status))?;
            }
            Ok(())
        };
        gauge(
            &mut encoder,
            "ferry_route_queued_bytes",
            "Log bytes the endpoint's queue holds (what max_bytes caps).",
            &|s| s.queued_bytes as f64,
        )?;
        gauge(
            &mut encoder,
            "ferry_route_oldest_queued_age_seconds",
            "How long the oldest queued message has waited; 0 when none.",
            &|s| s.oldest.map_or(0.0, |age| age.as_secs_f64()),
        )?;
        gauge(
            &mut encoder,
            "ferry_route_endpoint_connected",
            "1 while the endpoint is connected.",
            &|s| f64::from(u8::from(s.figures.connected)),
        )?;
        gauge(
            &mut encoder,
            "ferry_route_endpoint_configured",
            "1 if the endpoint is in the configuration; 0 for a queue left by a removed one.",
            &|s| f64::from(u8::from(s.configured)),
        )?;
        gauge(
            &mut encoder,
            "ferry_route_backoff_seconds",
            "How long the endpoint waits before it tries again; 0 when it is not backing off.",
            &|s| s.figures.backoff.as_secs_f64(),
        )?;

        let mut queued = encoder.encode_descriptor(
            "ferry_route_queued_messages",
            "Messages queued for the endpoint, by priority (0 highest).",
            None,
            MetricType::Gauge,
        )?;
        for status in &self.endpoints {
            for (priority, count) in status.queued.iter().enumerate() {
                let priority = priority.to_string();
                let labels =
                    vec![("endpoint", status.name.as_str()), ("priority", priority.as_str())];
                queued.encode_family(&labels)?.encode_gauge(&(*count as i64))?;
            }
        }

        for (name, help, histogram) in [
            (
                "ferry_route_send_duration_seconds",
                "Time from sending a batch to its acknowledgement.",
                true,
            ),
            ("ferry_route_batch_messages", "Messages per batch.", false),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
            for status in &self.endpoints {
                let Some(stats) = &status.stats else { continue };
                let metric = if histogram { &stats.send_seconds } else { &stats.batch_messages };
                metric.encode(family.encode_family(&endpoint(status))?)?;
            }
        }
        Ok(())
    }
}
