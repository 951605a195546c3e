//! `ferry bench compare`: a suite of scenarios run against several brokers,
//! one after the other on the same machine with the same load generator,
//! written up as one Markdown document with SVG charts.
//!
//! The suite file (`suite`) names the brokers, how to start each, and the
//! runs. For every run, every broker is started afresh (`broker`), loaded
//! by the scenario in this process with its pid for CPU and memory, and
//! stopped. The document (`markdown`) is a pure function of the suite, the
//! machine (`machine`), the versions and the results, with one table per
//! run whose last column compares the first broker, the subject, with the
//! best of the others; `plots` draws the charts it links. What was written
//! by hand into an earlier version of the document is kept (`carry_over`).

mod broker;
mod carry_over;
mod machine;
mod markdown;
mod plots;
mod suite;

use crate::args::{CompareArgs, DEFAULT_OUTPUT};
use crate::report::Syscalls;
use crate::{BenchError, Report};
use broker::RunningBroker;
use machine::Machine;
use serde::Serialize;
use std::path::{Path, PathBuf};
use suite::{Broker, Run, Suite};

/// The command that reproduces the document `args` write.
fn command_line(args: &CompareArgs) -> String {
    let mut words = vec!["ferry", "bench", "compare", "--suite"];
    let suite = args.suite.to_string_lossy();
    words.push(&suite);
    for only in &args.only {
        words.extend(["--only", only]);
    }
    let output = args.output.to_string_lossy();
    if output != DEFAULT_OUTPUT {
        words.extend(["--output", &output]);
    }
    let plots = args.plots.as_ref().map(|dir| dir.to_string_lossy());
    if let Some(plots) = &plots {
        words.extend(["--plots", plots]);
    }
    markdown::shell_line(&words)
}

/// One run against every broker.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    #[serde(flatten)]
    pub run: Run,
    /// In broker order.
    pub cells: Vec<Cell>,
}

/// One run against one broker.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub broker: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A report, or why there is none; a failed cell does not stop the suite.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Report(Box<Report>),
    Error(String),
}

/// Runs the suite, printing each report as it completes, then writes the
/// document, its charts and (with --json) every report. An error before
/// the first run if the suite is invalid or a port is taken; after writing
/// everything if a run failed against some broker.
pub async fn run(args: CompareArgs) -> Result<(), BenchError> {
    let suite = Suite::load(&args.suite)?;
    let runs = suite.selected_runs(&args.only)?;
    for broker in &suite.brokers {
        broker::ensure_port_free(broker)?;
    }
    let ferry = std::env::current_exe().map_err(BenchError::CurrentExe)?;
    let ferry = ferry.to_string_lossy();
    let scratch = Scratch::create()?;

    let machine = Machine::detect();
    let mut versions = Vec::with_capacity(suite.brokers.len());
    for (b, broker) in suite.brokers.iter().enumerate() {
        versions.push(version_of(broker, &ferry, &scratch.0.join(format!("version-{b}"))).await);
    }

    let mut results = Vec::with_capacity(runs.len());
    for (r, run) in runs.iter().enumerate() {
        let mut cells = Vec::with_capacity(suite.brokers.len());
        for (b, broker) in suite.brokers.iter().enumerate() {
            println!("=== {} — {}", run.name, broker.name);
            let outcome =
                run_once(run, broker, &ferry, &scratch.0.join(format!("{r}-{b}"))).await?;
            match &outcome {
                Outcome::Report(report) => print!("{report}"),
                Outcome::Error(error) => println!("failed: {error}"),
            }
            cells.push(Cell { broker: broker.name.clone(), outcome });
        }
        results.push(RunResult { run: (*run).clone(), cells });
    }

    let document_dir = match args.output.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let plot_dir = args.plots.clone().unwrap_or_else(|| document_dir.join("bench"));
    for dir in [&document_dir, &plot_dir] {
        std::fs::create_dir_all(dir)
            .map_err(|source| BenchError::Output { path: dir.clone(), source })?;
    }
    plots::write_all(&plot_dir, &results)?;
    let command_line = command_line(&args);
    let earlier = match std::fs::read_to_string(&args.output) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => return Err(BenchError::Output { path: args.output.clone(), source }),
    };
    let mut text = markdown::render(&markdown::Document {
        suite: &suite,
        command_line: &command_line,
        machine: &machine,
        versions: &versions,
        results: &results,
        plot_link: &relative_link(&document_dir, &plot_dir)?,
    });
    let carried = carry_over::hand_written(&earlier, &suite);
    if !carried.is_empty() {
        if !text.ends_with("\n\n") {
            text.push('\n');
        }
        text.push_str(&carried);
    }
    write(&args.output, text)?;
    println!("wrote {} (charts in {})", args.output.display(), plot_dir.display());
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results).map_err(|error| BenchError::Output {
            path: path.clone(),
            source: std::io::Error::other(error),
        })?;
        write(path, json + "\n")?;
    }

    let total = results.len() * suite.brokers.len();
    let failed = results
        .iter()
        .flat_map(|result| &result.cells)
        .filter(|cell| matches!(cell.outcome, Outcome::Error(_)))
        .count();
    if failed > 0 {
        return Err(BenchError::RunsFailed { failed, total, output: args.output });
    }
    Ok(())
}

/// Starts `broker` in `dir`, runs `run` against it and stops it; then,
/// for a run that carries messages, does it all again with `--syscalls` and
/// takes the broker's system calls from that second run. Counting them
/// slows every system call the broker makes (by 0.2 to 0.4 µs each on the
/// machine this was written on), which would weigh on its CPU, rate and
/// latency figures, so those come from the first run, untouched. A broker
/// that will not start ends the suite (the next would fail the same way);
/// a failed scenario, or a broker that dies under load, is a failed cell.
async fn run_once(
    run: &Run,
    broker: &Broker,
    ferry: &str,
    dir: &Path,
) -> Result<Outcome, BenchError> {
    let outcome = run_scenario(run, broker, ferry, &dir.join("measured"), false).await?;
    let Outcome::Report(mut report) = outcome else {
        return Ok(outcome);
    };
    if run.syscalls {
        let counted = run_scenario(run, broker, ferry, &dir.join("syscalls"), true).await?;
        report.syscalls = Some(match counted {
            Outcome::Report(counted) => counted.syscalls.unwrap_or(Syscalls::Unavailable {
                reason: "the counting run reported none".into(),
            }),
            Outcome::Error(error) => {
                Syscalls::Unavailable { reason: format!("the counting run failed: {error}") }
            }
        });
    }
    Ok(Outcome::Report(report))
}

/// Starts `broker` in `dir`, runs `run` against it (with `--syscalls` if
/// `count_syscalls`) and stops it.
async fn run_scenario(
    run: &Run,
    broker: &Broker,
    ferry: &str,
    dir: &Path,
    count_syscalls: bool,
) -> Result<Outcome, BenchError> {
    let running = RunningBroker::start(broker, ferry, dir).await?;
    let outcome = match run.scenario(broker.port, running.pid(), count_syscalls) {
        Ok(scenario) => crate::run(scenario).await,
        Err(error) => Err(error),
    };
    Ok(match (outcome, running.stop().await) {
        (Ok(report), Ok(())) => Outcome::Report(Box::new(report)),
        // A broker that died explains whatever the scenario ran into.
        (_, Err(died)) => Outcome::Error(died.to_string()),
        (Err(error), Ok(())) => Outcome::Error(error.to_string()),
    })
}

/// The broker's version line, or what stands in for it in the document.
async fn version_of(broker: &Broker, ferry: &str, dir: &Path) -> String {
    let Some(command) = &broker.version else {
        return "not given".into();
    };
    let dir_text = dir.to_string_lossy();
    let values = suite::Placeholders { ferry, config: "", port: broker.port, dir: &dir_text };
    let argv: Vec<String> = command.iter().map(|arg| suite::substitute(arg, &values)).collect();
    broker::version_line(&argv, dir).await.unwrap_or_else(|why| format!("unknown ({why})"))
}

fn write(path: &Path, text: String) -> Result<(), BenchError> {
    std::fs::write(path, text)
        .map_err(|source| BenchError::Output { path: path.to_owned(), source })
}

/// `to` as a relative link from a document in `from` (both directories,
/// both existing), with `/` separators as Markdown wants.
fn relative_link(from: &Path, to: &Path) -> Result<String, BenchError> {
    let canonical = |path: &Path| {
        path.canonicalize().map_err(|source| BenchError::Output { path: path.to_owned(), source })
    };
    let (from, to) = (canonical(from)?, canonical(to)?);
    let common = from.components().zip(to.components()).take_while(|(a, b)| a == b).count();
    let up = from.components().count() - common;
    let mut parts = vec![String::from(".."); up];
    parts
        .extend(to.components().skip(common).map(|c| c.as_os_str().to_string_lossy().into_owned()));
    Ok(if parts.is_empty() { ".".into() } else { parts.join("/") })
}

/// The temporary directory for the brokers' configs, data and logs,
/// removed when the suite ends however it ends.
struct Scratch(PathBuf);

impl Scratch {
    fn create() -> Result<Scratch, BenchError> {
        let dir = std::env::temp_dir().join(format!("ferry-bench-compare-{}", std::process::id()));
        // A leftover of an earlier process with the same pid is stale.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|source| BenchError::Output { path: dir.clone(), source })?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_relative_links() {
        let root = std::env::temp_dir().join(format!("ferry-compare-links-{}", std::process::id()));
        let docs = root.join("docs");
        let bench = docs.join("bench");
        let elsewhere = root.join("plots");
        for dir in [&bench, &elsewhere] {
            std::fs::create_dir_all(dir).unwrap();
        }
        assert_eq!(relative_link(&docs, &bench).unwrap(), "bench");
        assert_eq!(relative_link(&docs, &elsewhere).unwrap(), "../plots");
        assert_eq!(relative_link(&docs, &docs).unwrap(), ".");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn compare_command_line_reproduces_the_options() {
        let args = CompareArgs {
            suite: "bench/suite.toml".into(),
            output: DEFAULT_OUTPUT.into(),
            plots: None,
            only: vec!["pubsub QoS 0".into()],
            json: Some("all.json".into()),
        };
        assert_eq!(
            command_line(&args),
            "ferry bench compare --suite bench/suite.toml --only 'pubsub QoS 0'"
        );
        let args =
            CompareArgs { output: "out.md".into(), plots: Some("p".into()), only: vec![], ..args };
        assert_eq!(
            command_line(&args),
            "ferry bench compare --suite bench/suite.toml --output out.md --plots p"
        );
    }
}
