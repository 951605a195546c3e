//! The few shapes every collector here writes, so that each metric is one
//! line of name, help and value: a counter or gauge, alone or by labels,
//! and a histogram from buckets already counted.

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeMetric, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use std::fmt::Error;

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
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in samples {
        family
            .encode_family(&labels.to_vec())?
            .encode_counter::<Vec<(&str, &str)>, _, f64>(value, None)?;
    }
    Ok(())
}

/// One gauge family: each sample with its labels.
pub fn gauges(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    samples: &[(&Labels<'_>, f64)],
) -> Result<(), Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in samples {
        family.encode_family(&labels.to_vec())?.encode_gauge(value)?;
    }
    Ok(())
}

/// A histogram without labels. `buckets`: each upper bound in seconds
/// (`f64::MAX` for +Inf, which must come last) with its own count, not
/// cumulated; `sum` in seconds.
pub fn histogram(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    buckets: &[(f64, u64)],
    sum: f64,
) -> Result<(), Error> {
    let count = buckets.iter().map(|(_, count)| count).sum();
    encoder
        .encode_descriptor(name, help, None, MetricType::Histogram)?
        .encode_histogram::<NoLabelSet>(sum, count, buckets, None)
}
