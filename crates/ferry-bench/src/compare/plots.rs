//! The SVG charts of a run, one line per broker: latency by percentile and
//! message rates over time. The document links the same files this writes,
//! so both go through [`kinds`].

use super::suite::slug;
use super::{Outcome, RunResult};
use crate::plot::{self, Series};
use crate::BenchError;
use std::path::Path;

/// A chart drawn for a run when some broker has data for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    Latency,
    Rate,
}

impl PlotKind {
    /// `<run-slug>-latency.svg`, `<run-slug>-rate.svg`.
    pub fn file_name(self, run: &str) -> String {
        let suffix = match self {
            PlotKind::Latency => "latency",
            PlotKind::Rate => "rate",
        };
        format!("{}-{suffix}.svg", slug(run))
    }

    /// Alt text and chart title.
    pub fn caption(self, run: &str) -> String {
        match self {
            PlotKind::Latency => format!("{run}: latency by percentile"),
            PlotKind::Rate => format!("{run}: messages per second over time"),
        }
    }

    fn render(self, result: &RunResult) -> String {
        let title = self.caption(&result.run.name);
        let reports = result.cells.iter().filter_map(|cell| match &cell.outcome {
            Outcome::Report(report) => Some((cell.broker.as_str(), report)),
            Outcome::Error(_) => None,
        });
        match self {
            PlotKind::Latency => {
                let series: Vec<_> = reports
                    .map(|(label, report)| Series { label, data: &report.latency_cdf[..] })
                    .collect();
                plot::latency_cdf(&title, &series)
            }
            PlotKind::Rate => {
                let series: Vec<_> = reports
                    .map(|(label, report)| Series { label, data: &report.timeline[..] })
                    .collect();
                plot::rates(&title, &series)
            }
        }
    }
}

/// The charts `result` has data for: none for a run where every broker
/// failed, no latency chart for `conn`.
pub fn kinds(result: &RunResult) -> Vec<PlotKind> {
    let reports = || {
        result.cells.iter().filter_map(|cell| match &cell.outcome {
            Outcome::Report(report) => Some(report),
            Outcome::Error(_) => None,
        })
    };
    let mut kinds = Vec::new();
    if reports().any(|report| !report.latency_cdf.is_empty()) {
        kinds.push(PlotKind::Latency);
    }
    if reports().any(|report| !report.timeline.is_empty()) {
        kinds.push(PlotKind::Rate);
    }
    kinds
}

/// Writes every chart of every run into `dir`.
pub fn write_all(dir: &Path, results: &[RunResult]) -> Result<(), BenchError> {
    for result in results {
        for kind in kinds(result) {
            let path = dir.join(kind.file_name(&result.run.name));
            std::fs::write(&path, kind.render(result))
                .map_err(|source| BenchError::Output { path, source })?;
        }
    }
    Ok(())
}
