//! The document: a pure function from the suite, the machine, the versions
//! and the results to Markdown, so its layout is tested without brokers.
//!
//! Each run gets a table with a row per figure and a column per broker,
//! then a last column comparing the first broker (the subject) with the
//! best of the others, turned so that above 1× always means the subject
//! is ahead: subject ÷ best where higher is better, best ÷ subject where
//! lower is better.

use super::machine::Machine;
use super::plots;
use super::suite::{slug, substitute, Placeholders, Suite};
use super::{Outcome, RunResult};
use crate::histogram::LatencySummary;
use crate::report::{ConnFigures, Report, SyscallFigures, Syscalls};
use std::fmt::Write;

/// Everything the document says.
pub struct Document<'a> {
    pub suite: &'a Suite,
    /// The `ferry bench compare …` command that made it.
    pub command_line: &'a str,
    pub machine: &'a Machine,
    /// Per broker, in suite order: its version line, or what stands for it.
    pub versions: &'a [String],
    pub results: &'a [RunResult],
    /// The charts' directory relative to the document (`bench`).
    pub plot_link: &'a str,
}

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
    /// Context rather than merit (the load generator's own CPU): no ratio.
    Neither,
}

/// A row of a run's table. `value` is `None` where the figure does not
/// apply to a report; a row that applies to no report is left out.
struct Figure {
    label: &'static str,
    better: Better,
    value: fn(&Report) -> Option<f64>,
    show: fn(f64) -> String,
}

/// Reports that moved messages (every scenario but `conn`).
fn flow(report: &Report) -> Option<&Report> {
    report.conn.is_none().then_some(report)
}

fn latency(report: &Report) -> Option<&LatencySummary> {
    flow(report).map(|report| &report.latency).filter(|latency| latency.count > 0)
}

fn ack_latency(report: &Report) -> Option<&LatencySummary> {
    flow(report).and_then(|report| report.ack_latency.as_ref()).filter(|ack| ack.count > 0)
}

fn conn(report: &Report) -> Option<&ConnFigures> {
    report.conn.as_ref()
}

fn syscalls(report: &Report) -> Option<&SyscallFigures> {
    flow(report).and_then(|report| report.syscalls.as_ref()).and_then(Syscalls::counted)
}

const FIGURES: [Figure; 38] = [
    Figure {
        label: "connections/s",
        better: Better::Higher,
        value: |r| flow(r).map(|r| r.connections.per_second),
        show: count,
    },
    Figure {
        label: "disconnections/s",
        better: Better::Higher,
        value: |r| flow(r).map(|r| r.disconnections.per_second),
        show: count,
    },
    Figure {
        label: "published msg/s",
        better: Better::Higher,
        value: |r| flow(r).map(|r| r.publish.messages_per_second),
        show: count,
    },
    Figure {
        label: "received msg/s",
        better: Better::Higher,
        value: |r| flow(r).map(|r| r.receive.messages_per_second),
        show: count,
    },
    Figure {
        label: "received MB/s",
        better: Better::Higher,
        value: |r| flow(r).map(|r| r.receive.payload_mb_per_second),
        show: |v| format!("{v:.1}"),
    },
    Figure {
        label: "delivered",
        better: Better::Higher,
        value: |r| flow(r).map(|r| r.delivery.delivered_percent),
        show: percent,
    },
    Figure {
        label: "lost",
        better: Better::Lower,
        value: |r| flow(r).map(|r| r.delivery.counts.lost as f64),
        show: count,
    },
    Figure {
        label: "duplicates",
        better: Better::Lower,
        value: |r| flow(r).map(|r| r.delivery.counts.duplicates as f64),
        show: count,
    },
    Figure {
        label: "out of order",
        better: Better::Lower,
        value: |r| flow(r).map(|r| r.delivery.counts.out_of_order as f64),
        show: count,
    },
    Figure {
        label: "latency p50",
        better: Better::Lower,
        value: |r| latency(r).map(|l| l.p50_us),
        show: micros,
    },
    Figure {
        label: "latency p90",
        better: Better::Lower,
        value: |r| latency(r).map(|l| l.p90_us),
        show: micros,
    },
    Figure {
        label: "latency p99",
        better: Better::Lower,
        value: |r| latency(r).map(|l| l.p99_us),
        show: micros,
    },
    Figure {
        label: "latency p99.9",
        better: Better::Lower,
        value: |r| latency(r).map(|l| l.p99_9_us),
        show: micros,
    },
    Figure {
        label: "latency max",
        better: Better::Lower,
        value: |r| latency(r).map(|l| l.max_us),
        show: micros,
    },
    Figure {
        label: "ack latency p50",
        better: Better::Lower,
        value: |r| ack_latency(r).map(|l| l.p50_us),
        show: micros,
    },
    Figure {
        label: "ack latency p99",
        better: Better::Lower,
        value: |r| ack_latency(r).map(|l| l.p99_us),
        show: micros,
    },
    Figure {
        label: "broker CPU per delivered message",
        better: Better::Lower,
        value: |r| flow(r).and_then(|r| r.broker.as_ref()).map(|u| u.cpu_us_per_message),
        show: cpu_micros,
    },
    Figure {
        label: "broker context switches per delivered message",
        better: Better::Lower,
        value: |r| flow(r).and_then(|r| r.broker.as_ref()).map(|u| u.context_switches_per_message),
        show: per_message,
    },
    Figure {
        label: "broker syscalls per delivered message",
        better: Better::Lower,
        value: |r| syscalls(r).map(|s| s.total.per_message),
        show: per_message,
    },
    Figure {
        label: "of which send, write",
        better: Better::Neither,
        value: |r| syscalls(r).map(|s| s.send.per_message),
        show: per_message,
    },
    Figure {
        label: "of which recv, read",
        better: Better::Neither,
        value: |r| syscalls(r).map(|s| s.recv.per_message),
        show: per_message,
    },
    Figure {
        label: "of which epoll_wait",
        better: Better::Neither,
        value: |r| syscalls(r).map(|s| s.epoll_wait.per_message),
        show: per_message,
    },
    Figure {
        label: "of which epoll_ctl",
        better: Better::Neither,
        value: |r| syscalls(r).map(|s| s.epoll_ctl.per_message),
        show: per_message,
    },
    Figure {
        label: "of which futex",
        better: Better::Neither,
        value: |r| syscalls(r).map(|s| s.futex.per_message),
        show: per_message,
    },
    Figure {
        label: "broker CPU, % of a core",
        better: Better::Neither,
        value: |r| flow(r).and_then(|r| r.broker.as_ref()).map(|u| u.cpu_percent),
        show: |v| format!("{v:.0}%"),
    },
    Figure {
        label: "broker RSS at end",
        better: Better::Lower,
        value: |r| flow(r).and_then(|r| r.broker.as_ref()).map(|u| u.rss_end_bytes as f64),
        show: mib,
    },
    Figure {
        label: "bench CPU per delivered message",
        better: Better::Neither,
        value: |r| flow(r).map(|r| r.bench.cpu_us_per_message),
        show: cpu_micros,
    },
    Figure {
        label: "bench CPU, % of a core",
        better: Better::Neither,
        value: |r| flow(r).map(|r| r.bench.cpu_percent),
        show: |v| format!("{v:.0}%"),
    },
    Figure {
        label: "bench context switches per delivered message",
        better: Better::Neither,
        value: |r| flow(r).map(|r| r.bench.context_switches_per_message),
        show: per_message,
    },
    Figure {
        label: "burst source rate, msg/s",
        better: Better::Higher,
        value: |r| r.burst.map(|b| b.source_rate),
        show: count,
    },
    Figure {
        label: "burst delivery rate, msg/s",
        better: Better::Higher,
        value: |r| r.burst.map(|b| b.delivery_rate),
        show: count,
    },
    Figure {
        label: "last message latency",
        better: Better::Lower,
        value: |r| r.burst.map(|b| b.last_message_latency_ms * 1e3),
        show: micros,
    },
    Figure {
        label: "largest backlog",
        better: Better::Lower,
        value: |r| r.burst.map(|b| b.max_backlog as f64),
        show: count,
    },
    Figure {
        label: "connected",
        better: Better::Higher,
        value: |r| conn(r).map(|c| c.connected as f64),
        show: count,
    },
    Figure {
        label: "failed connections",
        better: Better::Lower,
        value: |r| conn(r).map(|c| c.failed as f64),
        show: count,
    },
    Figure {
        label: "connects/s",
        better: Better::Higher,
        value: |r| conn(r).map(|c| c.connects_per_second),
        show: count,
    },
    Figure {
        label: "broker RSS per connection",
        better: Better::Lower,
        value: |r| conn(r).and_then(|c| c.broker_rss_per_connection_bytes),
        show: |v| format!("{} B", count(v)),
    },
    Figure {
        label: "bench RSS, all connected",
        better: Better::Neither,
        value: |r| conn(r).map(|c| c.bench_rss_connected_bytes as f64),
        show: mib,
    },
];

/// The whole document.
pub fn render(doc: &Document<'_>) -> String {
    let suite = doc.suite;
    let mut out = String::new();
    let subject = suite.brokers.first().map_or("the first broker", |b| b.name.as_str());
    let _ = writeln!(
        out,
        "<!-- Written by `{}`: edit {} and run it again rather than editing this file. -->\n",
        doc.command_line,
        suite.path.display()
    );
    let _ = writeln!(out, "# {}\n", suite.title);
    if !suite.intro.trim().is_empty() {
        let _ = writeln!(out, "{}\n", suite.intro.trim());
    }

    let m = doc.machine;
    let _ = writeln!(out, "## Machine\n\n| | |\n|---|---|");
    for (key, value) in [
        ("CPU", &m.cpu),
        ("logical CPUs", &m.cores),
        ("memory", &m.memory),
        ("kernel", &m.kernel),
        ("date", &m.date),
    ] {
        let _ = writeln!(out, "| {key} | {} |", cell(value));
    }
    let _ = writeln!(
        out,
        "\nEvery broker runs on this machine alongside the load generator, one broker at a \
         time, started afresh for each run. In the tables, ↑ marks a figure where higher is \
         better and ↓ one where lower is better; the last column is {subject} against the best \
         of the others, {subject} ÷ best for ↑ and best ÷ {subject} for ↓, so above 1× always \
         means {subject} is ahead. Rows without an arrow are context, such as the load \
         generator's own CPU, which shows it was not the bottleneck. — means the ratio does not \
         exist (a zero, or a failed run).\n"
    );

    let _ = writeln!(out, "## Versions\n\n| | version |\n|---|---|");
    for (broker, version) in suite.brokers.iter().zip(doc.versions) {
        let _ = writeln!(out, "| {} | {} |", cell(&broker.name), cell(version));
    }
    let _ = writeln!(out, "| ferry bench | {} |\n", env!("CARGO_PKG_VERSION"));

    let _ = writeln!(out, "## How to reproduce\n\n```sh\n{}\n```\n", doc.command_line);
    let _ = writeln!(
        out,
        "For each run the suite starts each broker as below, waits until it accepts \
         connections, runs the scenario against it and stops it with SIGTERM. `ferry` is the \
         binary running the suite and `<data dir>` a fresh temporary directory.\n"
    );
    for broker in &suite.brokers {
        let config_name = format!("{}.conf", slug(&broker.name));
        let values = Placeholders {
            ferry: "ferry",
            config: &config_name,
            port: broker.port,
            dir: "<data dir>",
        };
        let command: Vec<String> =
            broker.command.iter().map(|arg| substitute(arg, &values)).collect();
        let words: Vec<&str> = command.iter().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "**{}**, MQTT on 127.0.0.1:{}:\n\n```sh\n{}\n```\n",
            broker.name,
            broker.port,
            shell_line(&words)
        );
        if let Some(config) = &broker.config {
            let text = substitute(config, &values);
            let _ = writeln!(out, "`{config_name}`:\n\n```\n{}\n```\n", text.trim_end());
        }
    }

    for result in doc.results {
        render_run(&mut out, doc, result);
    }
    out
}

fn render_run(out: &mut String, doc: &Document<'_>, result: &RunResult) {
    let brokers = &doc.suite.brokers;
    let _ = writeln!(out, "## {}\n\n```sh", result.run.name);
    for broker in brokers {
        let args = result.run.args_for(broker.port, "<pid>");
        let words: Vec<&str> =
            ["ferry", "bench"].into_iter().chain(args.iter().map(String::as_str)).collect();
        let _ = writeln!(out, "{}   # {}", shell_line(&words), broker.name);
    }
    let _ = writeln!(out, "```\n");

    let reports: Vec<Option<&Report>> = result
        .cells
        .iter()
        .map(|c| match &c.outcome {
            Outcome::Report(report) => Some(report.as_ref()),
            Outcome::Error(_) => None,
        })
        .collect();
    let rows = table_rows(&reports);
    if !rows.is_empty() {
        let subject = result.cells.first().filter(|_| result.cells.len() > 1);
        let _ = write!(out, "| |");
        for c in &result.cells {
            let _ = write!(out, " {} |", cell(&c.broker));
        }
        if let Some(subject) = subject {
            let _ = write!(out, " {} vs best other |", cell(&subject.broker));
        }
        let _ = writeln!(
            out,
            "\n|---|{}",
            "--:|".repeat(result.cells.len() + usize::from(subject.is_some()))
        );
        for (label, texts, ratio) in rows {
            let _ = write!(out, "| {label} |");
            for text in texts {
                let _ = write!(out, " {text} |");
            }
            if subject.is_some() {
                let _ = write!(out, " {ratio} |");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out);
    }

    if let Some(from) =
        reports.iter().flatten().find(|r| latency(r).is_some()).map(|r| r.latency_from)
    {
        let _ = writeln!(
            out,
            "Latency is end to end, from each message's {from} to its first arrival.\n"
        );
    }
    if let Some(from) =
        reports.iter().flatten().find(|r| ack_latency(r).is_some()).map(|r| r.latency_from)
    {
        let _ = writeln!(
            out,
            "Ack latency is the publisher's wait, from each message's {from} to its PUBACK \
             (QoS 1) or PUBREC (QoS 2).\n"
        );
    }
    if reports.iter().flatten().any(|r| flow(r).is_some_and(|r| r.syscalls.is_some())) {
        let _ = writeln!(
            out,
            "System calls are counted by `perf stat` on the kernel's syscall tracepoints, in a \
             second run of the same command with `--syscalls` against a fresh broker: counting \
             slows every system call the broker makes, so the other figures come from the first \
             run, without it.\n"
        );
    }
    for (c, report) in result.cells.iter().zip(&reports) {
        let Some(report) = report.and_then(flow) else { continue };
        if let Some(Syscalls::Unavailable { reason }) = &report.syscalls {
            let _ = writeln!(out, "{}: system calls not counted ({}).\n", c.broker, reason.trim());
        }
        let exited = report.broker.map_or(0, |u| u.context_switches.threads_exited);
        if exited > 0 {
            let _ = writeln!(
                out,
                "{}: {exited} thread{} exited during the run; {} context switches after the \
                 start are missing from its figure.\n",
                c.broker,
                if exited == 1 { "" } else { "s" },
                if exited == 1 { "its" } else { "their" },
            );
        }
    }
    for c in &result.cells {
        if let Outcome::Error(error) = &c.outcome {
            let _ =
                writeln!(out, "**{} failed:**\n\n```text\n{}\n```\n", c.broker, error.trim_end());
        }
    }
    for kind in plots::kinds(result) {
        let _ = writeln!(
            out,
            "![{}]({}/{})\n",
            kind.caption(&result.run.name),
            doc.plot_link,
            kind.file_name(&result.run.name)
        );
    }
    if !result.run.notes.trim().is_empty() {
        let _ = writeln!(out, "{}\n", result.run.notes.trim());
    }
}

/// The rows of a run's table, one per figure that applies to some report
/// (`None` for a failed broker): label with its arrow, a text per broker,
/// and the ratio.
fn table_rows(reports: &[Option<&Report>]) -> Vec<(String, Vec<String>, String)> {
    let mut rows = Vec::new();
    for figure in &FIGURES {
        let values: Vec<Option<f64>> =
            reports.iter().map(|report| report.and_then(figure.value)).collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let arrow = match figure.better {
            Better::Higher => " ↑",
            Better::Lower => " ↓",
            Better::Neither => "",
        };
        let texts = values
            .iter()
            .zip(reports)
            .map(|(value, report)| match (value, report) {
                (Some(value), _) => (figure.show)(*value),
                (None, None) if rows.is_empty() => "failed".into(),
                (None, _) => "—".into(),
            })
            .collect();
        rows.push((format!("{}{arrow}", figure.label), texts, ratio(figure.better, &values)));
    }
    rows
}

/// The first value (the subject) against the best of the others, turned
/// so that above 1 means the subject is ahead; "—" where that has no
/// meaning (no direction, a missing value, a zero).
fn ratio(better: Better, values: &[Option<f64>]) -> String {
    let Some((subject, others)) = values.split_first() else {
        return "—".into();
    };
    let others = others.iter().flatten().copied();
    let ratio = match (better, *subject) {
        (Better::Higher, Some(subject)) => others.reduce(f64::max).map(|best| subject / best),
        (Better::Lower, Some(subject)) => others.reduce(f64::min).map(|best| best / subject),
        _ => None,
    };
    match ratio {
        Some(r) if r.is_finite() && r > 0.0 => format!("{r:.1}×"),
        _ => "—".into(),
    }
}

/// `words` as one shell command line, quoting what the shell would not
/// take literally (`bench/#`, `$share/…`, spaces).
pub fn shell_line(words: &[&str]) -> String {
    let plain = |w: &str| {
        !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
    };
    // `<pid>` stands for a value the reader fills in: left as it is.
    let placeholder =
        |w: &str| w.strip_prefix('<').and_then(|w| w.strip_suffix('>')).is_some_and(plain);
    let quoted = words.iter().map(|&w| {
        if plain(w) || placeholder(w) {
            w.to_owned()
        } else {
            format!("'{}'", w.replace('\'', r"'\''"))
        }
    });
    quoted.collect::<Vec<_>>().join(" ")
}

/// Text made safe for a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// A whole number with thousands separators: 1,234,567.
fn count(value: f64) -> String {
    if !value.is_finite() {
        return "—".into();
    }
    let digits = format!("{:.0}", value.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value.round() < 0.0 {
        out.push('-');
    }
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A delivery percentage; rounded down, so that only a complete delivery reads 100%.
fn percent(value: f64) -> String {
    if value == 100.0 {
        "100%".into()
    } else {
        format!("{:.3}%", (value * 1e3).floor() / 1e3)
    }
}

/// A latency in microseconds, in the unit that keeps it readable.
fn micros(us: f64) -> String {
    match us {
        us if us < 10.0 => format!("{us:.1} µs"),
        us if us < 1_000.0 => format!("{us:.0} µs"),
        us if us < 10_000.0 => format!("{:.2} ms", us / 1e3),
        us if us < 100_000.0 => format!("{:.1} ms", us / 1e3),
        us if us < 1_000_000.0 => format!("{:.0} ms", us / 1e3),
        us => format!("{:.2} s", us / 1e6),
    }
}

/// A count per message: 2 decimals, enough for a fraction of a call.
fn per_message(value: f64) -> String {
    format!("{value:.2}")
}

fn cpu_micros(us: f64) -> String {
    format!("{us:.2} µs")
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1_048_576.0)
}

#[cfg(test)]
mod tests {
    use super::super::suite::{Broker, Run};
    use super::super::Cell;
    use super::*;
    use crate::histogram::CdfPoint;
    use crate::procstat::{Sample, SwitchCounts, SwitchDelta};
    use crate::report::{BurstFigures, Connections, Delivery, Throughput, Usage};
    use crate::syscalls::SyscallCounts;
    use crate::timeline::Tick;
    use crate::tracker::Counts;
    use std::path::PathBuf;

    fn broker(name: &str, port: u16) -> Broker {
        Broker {
            name: name.into(),
            command: vec!["{ferry}".into(), "serve".into(), "--config".into(), "{config}".into()],
            config: Some("mqtt = \"127.0.0.1:{port}\"\ndata_dir = \"{dir}\"\n".into()),
            port,
            version: None,
        }
    }

    fn suite(brokers: Vec<Broker>) -> Suite {
        Suite {
            path: PathBuf::from("bench/suite.toml"),
            title: "Ferry vs others".into(),
            intro: "Why we measure.".into(),
            brokers,
            runs: Vec::new(),
        }
    }

    /// A pubsub report that received `per_second` msg/s at p50 `p50_us`,
    /// with a context switch per message at the broker and half one at the
    /// bench.
    fn report(per_second: f64, p50_us: f64, lost: u64) -> Report {
        let usage = |cpu_seconds, switches: u64| {
            Usage::between(
                Sample { cpu_seconds: 0.0, rss_bytes: 1 << 20 },
                Sample { cpu_seconds, rss_bytes: 10 << 20 },
                SwitchDelta {
                    counts: SwitchCounts { voluntary: switches, involuntary: 0 },
                    ..SwitchDelta::default()
                },
                1.0,
                per_second as u64,
            )
        };
        let sent = per_second as u64;
        let counts = Counts { sent, received: sent - lost, lost, ..Counts::default() };
        Report {
            scenario: "pubsub",
            parameters: serde_json::json!({}),
            connections: Connections::new(101, 0.1),
            disconnections: Connections::new(101, 0.01),
            publish: Throughput::new(sent, 16, 1.0),
            receive: Throughput::new(sent - lost, 16, 1.0),
            delivery: Delivery::new(counts, sent),
            latency: LatencySummary {
                count: sent,
                p50_us,
                max_us: p50_us * 10.0,
                ..LatencySummary::default()
            },
            latency_from: "send time",
            latency_cdf: vec![CdfPoint { percentile: 50.0, latency_us: p50_us }],
            ack_latency: None,
            timeline: vec![Tick { seconds: 0.5, sent, received: sent - lost }],
            broker: Some(usage(0.5, per_second as u64)),
            bench: usage(0.1, per_second as u64 / 2),
            syscalls: None,
            per_subscriber: None,
            burst: None,
            conn: None,
        }
    }

    fn result(name: &str, outcomes: Vec<(&str, Outcome)>) -> RunResult {
        RunResult {
            run: Run {
                name: name.into(),
                args: vec!["pubsub".into(), "--filter".into(), "bench/#".into()],
                notes: "Closed loop.".into(),
                syscalls: true,
            },
            cells: outcomes
                .into_iter()
                .map(|(broker, outcome)| Cell { broker: broker.into(), outcome })
                .collect(),
        }
    }

    fn render_with(suite: &Suite, results: &[RunResult]) -> String {
        let machine = Machine {
            cpu: "AMD EPYC".into(),
            cores: "2".into(),
            memory: "24.0 GiB".into(),
            kernel: "Linux 6.18".into(),
            date: "2026-11-22 10:00 UTC".into(),
        };
        let versions: Vec<String> =
            suite.brokers.iter().map(|b| format!("{} 1.0", b.name)).collect();
        render(&Document {
            suite,
            command_line: "ferry bench compare --suite bench/suite.toml",
            machine: &machine,
            versions: &versions,
            results,
            plot_link: "bench",
        })
    }

    fn row<'a>(doc: &'a str, label: &str) -> Vec<&'a str> {
        let line = doc
            .lines()
            .find(|line| line.starts_with(&format!("| {label} ")))
            .unwrap_or_else(|| panic!("no row {label:?} in\n{doc}"));
        line.trim_matches('|').split('|').map(str::trim).collect()
    }

    #[test]
    fn compare_document_has_a_column_per_broker_and_the_ratio() {
        let suite =
            suite(vec![broker("Ferry", 1898), broker("Mosquitto", 1897), broker("Other", 1896)]);
        let results = [result(
            "pubsub QoS 0",
            vec![
                ("Ferry", Outcome::Report(Box::new(report(800_000.0, 400.0, 0)))),
                ("Mosquitto", Outcome::Report(Box::new(report(200_000.0, 2_000.0, 0)))),
                ("Other", Outcome::Report(Box::new(report(100_000.0, 1_000.0, 0)))),
            ],
        )];
        let doc = render_with(&suite, &results);
        assert!(doc.contains("# Ferry vs others\n\nWhy we measure."), "{doc}");
        assert!(doc.contains("| | Ferry | Mosquitto | Other | Ferry vs best other |"), "{doc}");
        assert!(doc.contains("| Mosquitto | Mosquitto 1.0 |"), "{doc}");
        assert!(doc.contains("| logical CPUs | 2 |"), "{doc}");
        assert!(doc.contains("ferry serve --config ferry.conf"), "{doc}");
        assert!(doc.contains("mqtt = \"127.0.0.1:1897\"\ndata_dir = \"<data dir>\""), "{doc}");
        assert!(
            doc.contains(
                "ferry bench pubsub --filter 'bench/#' --broker mqtt://127.0.0.1:1897 --broker-pid <pid>   # Mosquitto"
            ),
            "{doc}"
        );
        assert_eq!(
            row(&doc, "received msg/s ↑"),
            ["received msg/s ↑", "800,000", "200,000", "100,000", "4.0×"]
        );
        // Lower is better: the best other (1 ms) over Ferry (400 µs).
        assert_eq!(
            row(&doc, "latency p50 ↓"),
            ["latency p50 ↓", "400 µs", "2.00 ms", "1.00 ms", "2.5×"]
        );
        assert_eq!(
            row(&doc, "latency max ↓"),
            ["latency max ↓", "4.00 ms", "20.0 ms", "10.0 ms", "2.5×"]
        );
        assert_eq!(row(&doc, "delivered ↑")[1..], ["100%", "100%", "100%", "1.0×"]);
        assert_eq!(row(&doc, "lost ↓")[1..], ["0", "0", "0", "—"]);
        assert_eq!(row(&doc, "bench CPU, % of a core")[1..], ["10%", "10%", "10%", "—"]);
        assert_eq!(
            row(&doc, "broker RSS at end ↓")[1..],
            ["10.0 MiB", "10.0 MiB", "10.0 MiB", "1.0×"]
        );
        assert!(!doc.contains("| connected"), "no conn rows for pubsub: {doc}");
        assert!(!doc.contains("ack latency") && !doc.contains("Ack latency"), "QoS 0: {doc}");
        assert!(doc.contains("from each message's send time"), "{doc}");
        assert!(
            doc.contains("![pubsub QoS 0: latency by percentile](bench/pubsub-qos-0-latency.svg)"),
            "{doc}"
        );
        assert!(doc.contains("](bench/pubsub-qos-0-rate.svg)"), "{doc}");
        assert!(doc.contains("Closed loop.\n"), "{doc}");
        assert!(!doc.contains("NaN") && !doc.contains("inf"), "{doc}");
    }

    #[test]
    fn compare_context_switch_and_syscall_rows() {
        let suite = suite(vec![broker("Ferry", 1898), broker("Mosquitto", 1897)]);
        let counted = Syscalls::Counted(SyscallFigures::new(
            SyscallCounts {
                total: 4_000,
                send: 1_000,
                recv: 1_500,
                epoll_wait: 1_000,
                epoll_ctl: 100,
                futex: 250,
            },
            1_000,
        ));
        let ferry = Report { syscalls: Some(counted), ..report(1_000.0, 400.0, 0) };
        let mut mosquitto = Report {
            syscalls: Some(Syscalls::Unavailable { reason: "perf is not installed".into() }),
            ..report(1_000.0, 400.0, 0)
        };
        if let Some(broker) = &mut mosquitto.broker {
            broker.context_switches_per_message = 0.25;
            broker.context_switches.threads_exited = 2;
        }
        let results = [result(
            "pubsub QoS 1",
            vec![
                ("Ferry", Outcome::Report(Box::new(ferry))),
                ("Mosquitto", Outcome::Report(Box::new(mosquitto))),
            ],
        )];
        let doc = render_with(&suite, &results);
        assert_eq!(
            row(&doc, "broker context switches per delivered message ↓")[1..],
            ["1.00", "0.25", "0.2×"]
        );
        assert_eq!(row(&doc, "broker syscalls per delivered message ↓")[1..], ["4.00", "—", "—"]);
        assert_eq!(row(&doc, "of which send, write")[1..], ["1.00", "—", "—"]);
        assert_eq!(row(&doc, "of which recv, read")[1..], ["1.50", "—", "—"]);
        assert_eq!(row(&doc, "of which epoll_wait")[1..], ["1.00", "—", "—"]);
        assert_eq!(row(&doc, "of which epoll_ctl")[1..], ["0.10", "—", "—"]);
        assert_eq!(row(&doc, "of which futex")[1..], ["0.25", "—", "—"]);
        assert_eq!(
            row(&doc, "bench context switches per delivered message")[1..],
            ["0.50", "0.50", "—"]
        );
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| ")).collect();
        let at = |label: &str| rows.iter().position(|l| l.starts_with(label)).unwrap();
        assert_eq!(at("| broker context switches"), at("| broker CPU per delivered") + 1, "{doc}");
        assert_eq!(at("| of which futex"), at("| broker syscalls") + 5, "{doc}");
        assert!(
            doc.contains("Mosquitto: system calls not counted (perf is not installed).\n"),
            "{doc}"
        );
        assert!(
            doc.contains("Mosquitto: 2 threads exited during the run; their context switches"),
            "{doc}"
        );
        assert!(!doc.contains("Ferry: system calls"), "{doc}");
        assert!(doc.contains("in a second run of the same command with `--syscalls`"), "{doc}");

        // Without --syscalls, no syscall rows at all.
        let plain = [result(
            "pubsub QoS 0",
            vec![("Ferry", Outcome::Report(Box::new(report(1_000.0, 400.0, 0))))],
        )];
        let doc = render_with(&suite, &plain);
        assert!(!doc.contains("| broker syscalls") && !doc.contains("of which"), "{doc}");
        assert!(!doc.contains("not counted") && !doc.contains("second run"), "{doc}");
        assert!(
            doc.contains("| broker context switches per delivered message ↓ | 1.00 |"),
            "{doc}"
        );
    }

    #[test]
    fn compare_ack_latency_rows_when_a_broker_has_them() {
        let suite = suite(vec![broker("Ferry", 1898), broker("Mosquitto", 1897)]);
        let acked = |p50_us, p99_us| Report {
            ack_latency: Some(LatencySummary {
                count: 1_000,
                p50_us,
                p99_us,
                ..LatencySummary::default()
            }),
            ..report(1_000.0, 400.0, 0)
        };
        let results = [result(
            "pubsub QoS 1",
            vec![
                ("Ferry", Outcome::Report(Box::new(acked(150.0, 4_000.0)))),
                ("Mosquitto", Outcome::Report(Box::new(acked(300.0, 2_000.0)))),
            ],
        )];
        let doc = render_with(&suite, &results);
        assert_eq!(row(&doc, "ack latency p50 ↓")[1..], ["150 µs", "300 µs", "2.0×"]);
        assert_eq!(row(&doc, "ack latency p99 ↓")[1..], ["4.00 ms", "2.00 ms", "0.5×"]);
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| ")).collect();
        let at = |label: &str| rows.iter().position(|l| l.starts_with(label)).unwrap();
        assert_eq!(at("| ack latency p50"), at("| latency max") + 1, "{doc}");
        assert!(
            doc.contains("Ack latency is the publisher's wait, from each message's send time to its PUBACK (QoS 1) or PUBREC (QoS 2).\n"),
            "{doc}"
        );

        // A broker without it (here, one that failed) shows a dash.
        let results = [result(
            "pubsub QoS 1",
            vec![
                ("Ferry", Outcome::Report(Box::new(acked(150.0, 4_000.0)))),
                ("Mosquitto", Outcome::Error("refused".into())),
            ],
        )];
        let doc = render_with(&suite, &results);
        assert_eq!(row(&doc, "ack latency p50 ↓")[1..], ["150 µs", "—", "—"]);
    }

    #[test]
    fn compare_ratio_direction_and_missing_values() {
        assert_eq!(ratio(Better::Higher, &[Some(4.0), Some(1.0), Some(2.0)]), "2.0×");
        assert_eq!(ratio(Better::Lower, &[Some(4.0), Some(1.0), Some(2.0)]), "0.2×");
        assert_eq!(ratio(Better::Lower, &[Some(1.0), Some(8.0), None]), "8.0×");
        assert_eq!(ratio(Better::Lower, &[Some(0.0), Some(3.0)]), "—", "no division by zero");
        assert_eq!(ratio(Better::Higher, &[Some(3.0), Some(0.0)]), "—");
        assert_eq!(ratio(Better::Higher, &[Some(0.0), Some(0.0)]), "—");
        assert_eq!(ratio(Better::Higher, &[None, Some(3.0)]), "—");
        assert_eq!(ratio(Better::Higher, &[Some(3.0), None]), "—");
        assert_eq!(ratio(Better::Lower, &[Some(-3.0), Some(2.0)]), "—");
        assert_eq!(ratio(Better::Neither, &[Some(3.0), Some(1.0)]), "—");
        assert_eq!(ratio(Better::Higher, &[]), "—");
    }

    #[test]
    fn compare_failed_cell_shows_the_error() {
        let suite = suite(vec![broker("Ferry", 1898), broker("Mosquitto", 1897)]);
        let results = [result(
            "pubsub QoS 1",
            vec![
                ("Ferry", Outcome::Report(Box::new(report(1_000.0, 50.0, 0)))),
                ("Mosquitto", Outcome::Error("broker Mosquitto: exited during the run".into())),
            ],
        )];
        let doc = render_with(&suite, &results);
        assert_eq!(row(&doc, "connections/s ↑")[1..], ["1,010", "failed", "—"]);
        assert_eq!(row(&doc, "received msg/s ↑")[1..], ["1,000", "—", "—"]);
        assert!(
            doc.contains(
                "**Mosquitto failed:**\n\n```text\nbroker Mosquitto: exited during the run\n```"
            ),
            "{doc}"
        );
        // The chart still shows the broker that has data.
        assert!(doc.contains("pubsub-qos-1-latency.svg"), "{doc}");

        let all_failed = [result("conn", vec![("Ferry", Outcome::Error("refused".into()))])];
        let doc = render_with(&suite, &all_failed);
        assert!(!doc.contains(".svg"), "no chart without data: {doc}");
        assert!(!doc.contains("vs best other"), "one broker, no ratio: {doc}");
    }

    #[test]
    fn compare_conn_rows_replace_message_rows() {
        let suite = suite(vec![broker("Ferry", 1898), broker("Mosquitto", 1897)]);
        let conn_report = |per_connection, rate| Report {
            scenario: "conn",
            latency_cdf: Vec::new(),
            timeline: Vec::new(),
            conn: Some(ConnFigures {
                attempted: 19_000,
                connected: 19_000,
                failed: 0,
                first_error: None,
                connect_seconds: 1.0,
                connects_per_second: rate,
                listen_overflows: None,
                source_addresses: 1,
                broker_rss_before_bytes: Some(1 << 20),
                broker_rss_connected_bytes: Some(40 << 20),
                broker_rss_per_connection_bytes: Some(per_connection),
                bench_rss_connected_bytes: 30 << 20,
                disconnect_seconds: 0.2,
            }),
            ..report(0.0, 0.0, 0)
        };
        let results = [result(
            "conn",
            vec![
                ("Ferry", Outcome::Report(Box::new(conn_report(1_970.0, 22_494.0)))),
                ("Mosquitto", Outcome::Report(Box::new(conn_report(752.0, 709.0)))),
            ],
        )];
        let doc = render_with(&suite, &results);
        assert_eq!(row(&doc, "connected ↑")[1..], ["19,000", "19,000", "1.0×"]);
        assert_eq!(row(&doc, "connects/s ↑")[1..], ["22,494", "709", "31.7×"]);
        assert_eq!(row(&doc, "broker RSS per connection ↓")[1..], ["1,970 B", "752 B", "0.4×"]);
        assert_eq!(row(&doc, "bench RSS, all connected")[1..], ["30.0 MiB", "30.0 MiB", "—"]);
        assert!(!doc.contains("received msg/s"), "{doc}");
        assert!(!doc.contains("latency"), "{doc}");
        assert!(!doc.contains(".svg"), "{doc}");
    }

    #[test]
    fn compare_burst_rows() {
        let suite = suite(vec![broker("Ferry", 1898), broker("Mosquitto", 1897)]);
        let burst = |last_ms| Report {
            scenario: "burst",
            burst: Some(BurstFigures {
                target_rate: 2_000.0,
                source_rate: 2_000.0,
                delivery_rate: 1_990.0,
                last_message_latency_ms: last_ms,
                backlog_at_burst_end: 10,
                max_backlog: 12,
                drain: None,
            }),
            ..report(20_000.0, 300.0, 0)
        };
        let results = [result(
            "burst",
            vec![
                ("Ferry", Outcome::Report(Box::new(burst(2.0)))),
                ("Mosquitto", Outcome::Report(Box::new(burst(9.0)))),
            ],
        )];
        let doc = render_with(&suite, &results);
        assert_eq!(row(&doc, "last message latency ↓")[1..], ["2.00 ms", "9.00 ms", "4.5×"]);
        assert_eq!(row(&doc, "largest backlog ↓")[1..], ["12", "12", "1.0×"]);
        assert_eq!(row(&doc, "received msg/s ↑")[1..], ["20,000", "20,000", "1.0×"]);
    }

    #[test]
    fn compare_number_formats() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(999.4), "999");
        assert_eq!(count(1_000.0), "1,000");
        assert_eq!(count(1_234_567.8), "1,234,568");
        assert_eq!(count(-2_048.0), "-2,048");
        assert_eq!(count(f64::NAN), "—");
        assert_eq!(micros(3.26), "3.3 µs");
        assert_eq!(micros(414.0), "414 µs");
        assert_eq!(micros(1_340.0), "1.34 ms");
        assert_eq!(micros(12_345.0), "12.3 ms");
        assert_eq!(micros(414_000.0), "414 ms");
        assert_eq!(micros(9_260_000.0), "9.26 s");
        assert_eq!(percent(100.0), "100%");
        assert_eq!(percent(99.9985), "99.998%");
        assert_eq!(percent(99.99999), "99.999%", "never rounded up to a complete delivery");
        assert_eq!(mib(10.0 * 1_048_576.0), "10.0 MiB");
        assert_eq!(
            shell_line(&["pubsub", "--filter", "bench/#", "--broker-pid", "<pid>"]),
            "pubsub --filter 'bench/#' --broker-pid <pid>"
        );
        assert_eq!(shell_line(&["it's", ""]), r"'it'\''s' ''");
    }
}
