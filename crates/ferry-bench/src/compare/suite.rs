//! The suite file: the brokers to compare, the runs to put them through, and
//! the words around the figures. Checked whole before any broker starts, so
//! a typo costs a second, not a half-finished hour of benchmarks.

use crate::args::Scenario;
use crate::BenchError;
use clap::Parser;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A parsed and checked suite.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The file it was read from, as given on the command line.
    pub path: PathBuf,
    pub title: String,
    /// Markdown placed at the top of the document.
    pub intro: String,
    /// In column order; the first is the subject the others are compared with.
    pub brokers: Vec<Broker>,
    pub runs: Vec<Run>,
}

/// How to start one broker and how to name it.
#[derive(Debug, Clone)]
pub struct Broker {
    pub name: String,
    /// Program and arguments, with placeholders (see [`Placeholders`]).
    pub command: Vec<String>,
    /// Text of the file `{config}` names, with placeholders.
    pub config: Option<String>,
    /// Where it listens for MQTT on 127.0.0.1.
    pub port: u16,
    /// A command whose first line of output is the broker's version.
    pub version: Option<Vec<String>>,
}

/// One scenario, run against every broker in turn.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub name: String,
    /// `ferry bench` arguments, without the broker's address and pid.
    pub args: Vec<String>,
    /// Markdown printed under the run's table.
    #[serde(skip)]
    pub notes: String,
    /// Whether the run carries messages (every scenario but `conn`), so
    /// that compare counts the broker's system calls per message in a
    /// second run of it with `--syscalls`.
    #[serde(skip)]
    pub syscalls: bool,
}

/// The values `{ferry}`, `{config}`, `{port}` and `{dir}` stand for.
pub struct Placeholders<'a> {
    pub ferry: &'a str,
    pub config: &'a str,
    pub port: u16,
    pub dir: &'a str,
}

const PLACEHOLDERS: [&str; 4] = ["ferry", "config", "port", "dir"];

/// Flags compare sets itself for every run, or whose output it writes itself.
const RESERVED_FLAGS: [&str; 5] = ["--broker", "--broker-pid", "--syscalls", "--json", "--plots"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    title: String,
    #[serde(default)]
    intro: String,
    #[serde(rename = "broker")]
    brokers: Vec<BrokerEntry>,
    #[serde(rename = "run")]
    runs: Vec<RunEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BrokerEntry {
    name: Spanned<String>,
    command: Spanned<Vec<String>>,
    config: Option<String>,
    port: Spanned<u16>,
    version: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunEntry {
    name: Spanned<String>,
    args: Spanned<Vec<String>>,
    #[serde(default)]
    notes: String,
}

/// A run's arguments as `ferry bench` would take them.
#[derive(Parser)]
#[command(name = "ferry bench")]
struct RunLine {
    #[command(subcommand)]
    scenario: Scenario,
}

impl Suite {
    /// Reads and checks the suite at `path`.
    pub fn load(path: &Path) -> Result<Suite, BenchError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| BenchError::SuiteRead { path: path.to_owned(), source })?;
        Suite::parse(&text, path)
    }

    /// Parses and checks suite text; `path` is only for error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Suite, BenchError> {
        let invalid =
            |span: std::ops::Range<usize>, key: String, message: String| BenchError::Suite {
                path: path.to_owned(),
                line: line_of(text, span.start),
                key,
                message,
            };
        let file: SuiteFile = serde_path_to_error::deserialize(toml::Deserializer::new(text))
            .map_err(|error| {
                let key = error.path().to_string();
                let inner = error.into_inner();
                invalid(inner.span().unwrap_or(0..0), key, inner.message().to_owned())
            })?;
        if file.brokers.is_empty() || file.runs.is_empty() {
            return Err(invalid(0..0, "broker, run".into(), "needs at least one of each".into()));
        }

        let mut brokers: Vec<Broker> = Vec::with_capacity(file.brokers.len());
        for (i, entry) in file.brokers.into_iter().enumerate() {
            let key = |field: &str| format!("broker[{i}].{field}");
            let name = entry.name.get_ref();
            if brokers.iter().any(|b| &b.name == name) {
                return Err(invalid(entry.name.span(), key("name"), format!("{name:?} twice")));
            }
            if entry.command.get_ref().is_empty() {
                return Err(invalid(entry.command.span(), key("command"), "is empty".into()));
            }
            if *entry.port.get_ref() == 0 {
                return Err(invalid(entry.port.span(), key("port"), "must be a fixed port".into()));
            }
            let fields = [
                ("command", entry.command.get_ref().iter().collect::<Vec<_>>()),
                ("version", entry.version.iter().flatten().collect()),
                ("config", entry.config.iter().collect()),
            ];
            for (field, texts) in fields {
                if let Some(unknown) = texts.into_iter().find_map(|text| unknown_placeholder(text))
                {
                    let message = format!("unknown placeholder {{{unknown}}}");
                    return Err(invalid(entry.name.span(), key(field), message));
                }
            }
            if entry.config.is_none()
                && entry.command.get_ref().iter().any(|a| a.contains("{config}"))
            {
                return Err(invalid(
                    entry.command.span(),
                    key("command"),
                    "uses {config} but the broker has no `config`".into(),
                ));
            }
            brokers.push(Broker {
                name: entry.name.into_inner(),
                command: entry.command.into_inner(),
                config: entry.config,
                port: entry.port.into_inner(),
                version: entry.version,
            });
        }

        let mut runs: Vec<Run> = Vec::with_capacity(file.runs.len());
        for (i, entry) in file.runs.into_iter().enumerate() {
            let name = entry.name.get_ref();
            let taken = runs.iter().any(|r| &r.name == name || slug(&r.name) == slug(name));
            if taken || slug(name).is_empty() {
                let message = format!("{name:?} is empty or names another run (plot files use it)");
                return Err(invalid(entry.name.span(), format!("run[{i}].name"), message));
            }
            let scenario = check_args(entry.args.get_ref()).map_err(|message| {
                invalid(
                    entry.args.span(),
                    format!("run[{i}].args"),
                    format!("run {name:?}: {message}"),
                )
            })?;
            runs.push(Run {
                name: entry.name.into_inner(),
                args: entry.args.into_inner(),
                notes: entry.notes,
                syscalls: !matches!(scenario, Scenario::Conn(_)),
            });
        }
        Ok(Suite { path: path.to_owned(), title: file.title, intro: file.intro, brokers, runs })
    }

    /// The runs whose names contain one of `only`, or all of them.
    pub fn selected_runs(&self, only: &[String]) -> Result<Vec<&Run>, BenchError> {
        let runs: Vec<&Run> = self
            .runs
            .iter()
            .filter(|run| only.is_empty() || only.iter().any(|part| run.name.contains(part)))
            .collect();
        if runs.is_empty() {
            let names: Vec<&str> = self.runs.iter().map(|run| run.name.as_str()).collect();
            return Err(BenchError::Options(format!(
                "--only {only:?} matches no run of {}; its runs are {names:?}",
                self.path.display()
            )));
        }
        Ok(runs)
    }
}

impl Run {
    /// The scenario to run against the broker at `port` with process
    /// `pid`; with `--syscalls` if `count_syscalls`.
    pub fn scenario(
        &self,
        port: u16,
        pid: u32,
        count_syscalls: bool,
    ) -> Result<Scenario, BenchError> {
        let mut args = self.args_for(port, &pid.to_string());
        if count_syscalls {
            args.push("--syscalls".into());
        }
        parse_scenario(&args)
            .map_err(|message| BenchError::Options(format!("run {:?}: {message}", self.name)))
    }

    /// The run's arguments with the broker's address and `pid` appended.
    pub fn args_for(&self, port: u16, pid: &str) -> Vec<String> {
        let mut args = self.args.clone();
        args.extend([
            "--broker".into(),
            format!("mqtt://127.0.0.1:{port}"),
            "--broker-pid".into(),
            pid.into(),
        ]);
        args
    }
}

/// The scenario `args` stand for, or why they cannot be a run.
fn check_args(args: &[String]) -> Result<Scenario, String> {
    if args.first().is_some_and(|first| first == "compare") {
        return Err("a run cannot be `compare` itself".into());
    }
    let reserved = args.iter().find(|arg| {
        RESERVED_FLAGS.iter().any(|flag| {
            arg.strip_prefix(flag).is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
        })
    });
    if let Some(flag) = reserved {
        return Err(format!(
            "{flag} is for compare to set: it points each run at each broker and writes the JSON and charts"
        ));
    }
    parse_scenario(args)
}

fn parse_scenario(args: &[String]) -> Result<Scenario, String> {
    let argv = std::iter::once("ferry bench").chain(args.iter().map(String::as_str));
    RunLine::try_parse_from(argv).map(|line| line.scenario).map_err(|error| {
        // clap's rendering ends in usage and help hints meant for a terminal;
        // the first line says what is wrong.
        let text = error.render().to_string();
        let first = text.lines().next().unwrap_or_default();
        first.strip_prefix("error: ").unwrap_or(first).to_owned()
    })
}

/// `text` with every placeholder replaced.
pub fn substitute(text: &str, values: &Placeholders<'_>) -> String {
    text.replace("{ferry}", values.ferry)
        .replace("{config}", values.config)
        .replace("{port}", &values.port.to_string())
        .replace("{dir}", values.dir)
}

/// The first `{word}` in `text` that is not a placeholder. Braces around
/// anything else (`{ a = 1 }` in a TOML config) are left alone.
fn unknown_placeholder(text: &str) -> Option<&str> {
    text.split('{').skip(1).filter_map(|rest| rest.split_once('}').map(|(word, _)| word)).find(
        |word| {
            !word.is_empty()
                && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                && !PLACEHOLDERS.contains(word)
        },
    )
}

/// A file-name-safe form of a run or broker name: `pubsub QoS 0` → `pubsub-qos-0`.
pub fn slug(name: &str) -> String {
    let lower = name.to_lowercase();
    let words = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty());
    words.collect::<Vec<_>>().join("-")
}

/// 1-based line number of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&byte| byte == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
title = "A vs B"
intro = "Two brokers."

[[broker]]
name = "Ferry"
command = ["{ferry}", "serve", "--config", "{config}"]
config = """
data_dir = "{dir}"
[listeners]
mqtt = "127.0.0.1:{port}"
"""
port = 1898
version = ["{ferry}", "--version"]

[[broker]]
name = "Mosquitto"
command = ["/usr/sbin/mosquitto", "-p", "{port}"]
port = 1897

[[run]]
name = "pubsub QoS 0"
args = ["pubsub", "--publishers", "4", "--messages", "100"]
notes = "Small."

[[run]]
name = "conn"
args = ["conn", "--connections", "10"]
"#;

    fn parse(text: &str) -> Result<Suite, BenchError> {
        Suite::parse(text, Path::new("suite.toml"))
    }

    fn error(text: &str) -> String {
        parse(text).expect_err("the suite is refused").to_string()
    }

    #[test]
    fn compare_suite_parses() {
        let suite = parse(GOOD).unwrap();
        assert_eq!(suite.title, "A vs B");
        let names: Vec<&str> = suite.brokers.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["Ferry", "Mosquitto"]);
        assert_eq!(suite.brokers[0].port, 1898);
        assert!(suite.brokers[0].config.as_deref().unwrap().contains("{dir}"));
        assert!(suite.brokers[1].version.is_none());
        assert_eq!(suite.runs.len(), 2);
        assert_eq!(suite.runs[0].notes, "Small.");
        assert_eq!(suite.runs[1].notes, "");

        let scenario = suite.runs[0].scenario(1898, 42, false).unwrap();
        let Scenario::Pubsub(args) = scenario else { panic!("pubsub expected") };
        assert_eq!(args.common.broker, "mqtt://127.0.0.1:1898");
        assert_eq!(args.common.broker_pid, Some(42));
        assert!(!args.common.syscalls);
        assert_eq!(args.publishers, 4);
        let Ok(Scenario::Pubsub(counting)) = suite.runs[0].scenario(1898, 42, true) else {
            panic!("pubsub expected")
        };
        assert!(counting.common.syscalls);
        assert!(suite.runs[0].syscalls, "messages flow: system calls are counted");
        let Scenario::Conn(args) = suite.runs[1].scenario(1897, 7, false).unwrap() else {
            panic!("conn expected")
        };
        assert_eq!((args.broker.as_str(), args.broker_pid), ("mqtt://127.0.0.1:1897", Some(7)));
        assert!(!suite.runs[1].syscalls, "conn carries no messages");
    }

    #[test]
    fn compare_selects_runs_by_name() {
        let suite = parse(GOOD).unwrap();
        assert_eq!(suite.selected_runs(&[]).unwrap().len(), 2);
        let only = suite.selected_runs(&["QoS".into()]).unwrap();
        assert_eq!(only.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["pubsub QoS 0"]);
        let none = suite.selected_runs(&["fanout".into()]).unwrap_err().to_string();
        assert!(none.contains("pubsub QoS 0"), "{none}");
    }

    #[test]
    fn compare_unknown_key_names_line_and_key() {
        let text = GOOD.replace("port = 1897", "port = 1897\nprot = 1");
        let message = error(&text);
        assert!(message.starts_with("suite.toml:20: broker[1]"), "{message}");
        assert!(message.contains("unknown field `prot`"), "{message}");
        let message = error("title = 1\n");
        assert!(message.starts_with("suite.toml:1: title: "), "{message}");
    }

    #[test]
    fn compare_bad_run_args_name_the_run() {
        let text = GOOD.replace("\"--publishers\", \"4\"", "\"--pubishers\", \"4\"");
        let message = error(&text);
        assert!(
            message.starts_with("suite.toml:23: run[0].args: run \"pubsub QoS 0\""),
            "{message}"
        );
        assert!(message.contains("--pubishers"), "{message}");

        for (args, why) in [
            (r#"["pubsub", "--broker", "mqtt://x:1"]"#, "--broker is for compare to set"),
            (r#"["pubsub", "--broker-pid=3"]"#, "--broker-pid=3 is for compare to set"),
            (r#"["conn", "--json", "x.json"]"#, "--json is for compare to set"),
            (r#"["p2p", "--syscalls"]"#, "--syscalls is for compare to set"),
            (r#"["fanout", "--plots", "d"]"#, "--plots is for compare to set"),
            (r#"["compare", "--suite", "x"]"#, "cannot be `compare` itself"),
            (r#"["pubsub", "--qos", "3"]"#, "--qos"),
            (r#"["nonsense"]"#, "nonsense"),
        ] {
            let text = GOOD.replace(r#"["conn", "--connections", "10"]"#, args);
            let message = error(&text);
            assert!(message.contains("run[1].args: run \"conn\": "), "{message}");
            assert!(message.contains(why), "{why} in {message}");
        }
    }

    #[test]
    fn compare_suite_mistakes_are_refused() {
        let twice = GOOD.replace("name = \"Mosquitto\"", "name = \"Ferry\"");
        assert!(error(&twice).starts_with("suite.toml:17: broker[1].name: \"Ferry\" twice"));
        let same_slug = GOOD.replace("name = \"conn\"", "name = \"Pubsub-QoS-0\"");
        assert!(error(&same_slug).contains("run[1].name"), "{}", error(&same_slug));
        let typo = GOOD.replace("\"-p\", \"{port}\"", "\"-p\", \"{prot}\"");
        assert!(
            error(&typo).contains("broker[1].command: unknown placeholder {prot}"),
            "{}",
            error(&typo)
        );
        let typo = GOOD.replace("data_dir = \"{dir}\"", "data_dir = \"{data}\"");
        assert!(
            error(&typo).contains("broker[0].config: unknown placeholder {data}"),
            "{}",
            error(&typo)
        );
        let no_config = GOOD.replace("\"-p\", \"{port}\"", "\"-c\", \"{config}\"");
        assert!(error(&no_config).contains("no `config`"), "{}", error(&no_config));
        let no_runs = GOOD.split("[[run]]").next().unwrap().to_owned();
        assert!(error(&no_runs).contains("run"), "{}", error(&no_runs));
    }

    #[test]
    fn compare_placeholders_are_substituted() {
        let values =
            Placeholders { ferry: "/bin/ferry", config: "/tmp/c", port: 1898, dir: "/tmp/d" };
        assert_eq!(
            substitute("{ferry} serve --config {config} {port} {dir}/x {other}", &values),
            "/bin/ferry serve --config /tmp/c 1898 /tmp/d/x {other}"
        );
        assert_eq!(unknown_placeholder("{ferry} {dir} { a = 1 } {}"), None);
        assert_eq!(unknown_placeholder("listener {prot}"), Some("prot"));
    }

    #[test]
    fn compare_slugs() {
        assert_eq!(slug("pubsub QoS 0"), "pubsub-qos-0");
        assert_eq!(slug("  fanout: 5 → 1000 "), "fanout-5-1000");
        assert_eq!(slug("→"), "");
    }
}
