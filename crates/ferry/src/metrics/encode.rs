//! The few shapes every collector here writes, so that each metric is one
//! line of name, help and value: a counter or gauge, alone or by labels,
//! and a histogram from buckets already counted.

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::fmt::Error;
use std::time::Duration;

type Labels<'a> = [(&'static str, &'a str)];

/// A counter's name without `_total`: the encoder adds it.
pub fn counter<N: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), Error> {
    let counter = ConstCounter::new(value);
    counter.encode(encoder.encode_descriptor(name, help, None, counter.metric_type())?)
}

pub fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

/// One counter family: each sample with its labels.
pub fn counters(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: &[(&Labels<'_>, u64)],
) -> Result<(), Error> {
    family(encoder, name, help, MetricType::Counter, samples, |mut metric, value| {
        metric.encode_counter::<Vec<(&str, &str)>, _, f64>(value, None)
    })
}

/// One gauge family: each sample with its labels.
pub fn gauges(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: &[(&Labels<'_>, f64)],
) -> Result<(), Error> {
    family(encoder, name, help, MetricType::Gauge, samples, |mut metric, value| {
        metric.encode_gauge(value)
    })
}

fn family<V>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric_type: MetricType,
    samples: &[(&Labels<'_>, V)],
    encode: impl Fn(MetricEncoder<'_>, &V) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in samples {
        encode(family.encode_family(&labels.to_vec())?, value)?;
    }
    Ok(())
}

/// A histogram without labels whose bucket `i` counts durations under
/// 2^i µs and whose last bucket counts the rest (the broker's delivery
/// latency and the log's fsyncs are both kept so). `counts` are each
/// bucket's own, not cumulated.
pub fn histogram_pow2_micros(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    counts: &[u64],
    sum: Duration,
) -> Result<(), Error> {
    let buckets: Vec<(f64, u64)> = counts
        .iter()
        .enumerate()
        .map(|(bucket, count)| {
            // The encoder writes f64::MAX as +Inf.
            let last = bucket + 1 == counts.len();
            (if last { f64::MAX } else { (1u64 << bucket) as f64 / 1e6 }, *count)
        })
        .collect();
    encoder
        .encode_descriptor(name, help, None, MetricType::Histogram)?
        .encode_histogram::<NoLabelSet>(sum.as_secs_f64(), counts.iter().sum(), &buckets, None)
}
