//! `ferry`: the binary. Parses the command line and the configuration file,
//! then hands over to the crate that does the work. Nothing here is on a
//! hot path.

mod admin;
mod config;
mod console;
mod http;
mod http_auth;
mod logging;
mod metrics;
mod passwd;
mod ready;
mod reload;
mod routes_cli;
mod security;
mod serve;
mod tls_listener;
mod twins;
mod unread_body;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's malloc: durable messages are allocated on
/// connection threads and freed on the log writer's thread, and glibc's
/// arenas serialise such cross-thread frees on a lock (a third of the
/// broker's samples in a durable QoS 1 profile, in malloc and its futex).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Keeps the heap in 4 KiB pages. Why: mimalloc asks for transparent huge
/// pages on its arenas, and the kernel then backs each one touched with a
/// whole 2 MiB, though a fleet's idle connections are a few hundred bytes
/// each, scattered. Measured with 19,000 idle connections: 1,182–1,342
/// bytes of RSS per connection and 30 MiB before any came with huge pages,
/// 990–1,005 bytes and 20 MiB without. The flag is the process's: it holds
/// for memory the allocator took before `main` too, from its next fault.
fn small_pages_only() -> std::io::Result<()> {
    Ok(rustix::thread::disable_transparent_huge_pages(true)?)
}

/// How often each core gives the free pages of its heap back.
const FREE_PAGES_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Gives the free pages of this thread's heap back to the system, every
/// `FREE_PAGES_EVERY`. Why: mimalloc gives them back only while the
/// thread allocates, and a core goes quiet right after a burst of
/// connections or disconnections, keeping the pages their handshakes and
/// goodbyes used. Measured with 19,000 connecting at once: 1.45–1.65 KB of
/// RSS per idle connection without this, 1.2 KB with it; once they all
/// left, 28 MB more than before they came without it, 8–10 MB with it. A
/// collection that finds nothing to give costs a walk of the heap's pages,
/// microseconds.
async fn give_free_pages_back() {
    let mut every = tokio::time::interval(FREE_PAGES_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        // SAFETY: mi_collect takes no pointer and has no precondition; it
        // works on the calling thread's heap, which mimalloc owns.
        unsafe { libmimalloc_sys::mi_collect(false) };
    }
}
use config::Config;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "ferry",
    version,
    about = "MQTT broker, edge store-and-forward and digital twins in one binary"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker.
    ///
    /// With no options it listens on localhost only: MQTT on 1883, MQTT over
    /// WebSocket on 8083 (path /mqtt), HTTP on 8080. Example:
    ///
    ///     ferry serve --config ferry.toml --mqtt 0.0.0.0:1883
    Serve(ServeArgs),
    /// Check a configuration file and exit: 0 if valid, 1 with the file,
    /// line and key of the first problem otherwise.
    ///
    ///     ferry check-config /etc/ferry/ferry.toml
    CheckConfig { file: PathBuf },
    /// Load an MQTT broker (Ferry or any other) and report rates, loss,
    /// latency percentiles and, given its pid, the broker's CPU and memory.
    ///
    ///     ferry bench pubsub --broker mqtt://127.0.0.1:1883 --publishers 100 --messages 1000000 --qos 1
    #[cfg(feature = "bench")]
    Bench(ferry_bench::BenchCommand),
    /// Add a user to a password file, change its password, or remove it
    ///
    /// Passwords are stored as argon2id hashes (docs/security.md). The
    /// password is read from the terminal, twice and not echoed, or, when
    /// stdin is not a terminal, as one line of stdin:
    ///
    ///     ferry passwd /etc/ferry/passwd sensor-1
    ///     printf '%s\n' "$SECRET" | ferry passwd /etc/ferry/passwd sensor-1
    ///     ferry passwd --delete /etc/ferry/passwd sensor-1
    #[command(verbatim_doc_comment)]
    Passwd(passwd::PasswdArgs),
    /// Look at or empty the endpoint queues routes left in a data
    /// directory, while Ferry is stopped:
    ///
    ///     ferry routes list --config /etc/ferry/ferry.toml
    ///     ferry routes purge old-cloud --config /etc/ferry/ferry.toml
    #[command(verbatim_doc_comment)]
    Routes(routes_cli::RoutesArgs),
}

/// Flags override the configuration file; each has a `FERRY_...` variable.
#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file (see docs/configuration.md).
    #[arg(long, env = "FERRY_CONFIG")]
    config: Option<PathBuf>,
    /// MQTT over TCP listener address; "" disables it. Port 0 picks a free port.
    #[arg(long, env = "FERRY_MQTT")]
    mqtt: Option<String>,
    /// MQTT over WebSocket listener address (path /mqtt); "" disables it.
    #[arg(long, env = "FERRY_WS")]
    ws: Option<String>,
    /// HTTP listener address (health, later API, metrics and console); "" disables it.
    #[arg(long, env = "FERRY_HTTP")]
    http: Option<String>,
    /// Directory for Ferry's data.
    #[arg(long, env = "FERRY_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Log filter: error, warn, info, debug, trace, or tracing directives.
    #[arg(long, env = "FERRY_LOG_LEVEL")]
    log_level: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { file } => {
            Config::load(&file)?;
            println!("{}: ok", file.display());
            Ok(())
        }
        #[cfg(feature = "bench")]
        Command::Bench(command) => bench(command),
        Command::Passwd(args) => passwd::run(args),
        Command::Routes(args) => routes_cli::run(args),
        Command::Serve(args) => {
            let small_pages = small_pages_only();
            let mut config = match &args.config {
                Some(path) => Config::load(path)?,
                None => Config::default(),
            };
            if let Some(mqtt) = args.mqtt {
                config.listeners.mqtt = mqtt;
            }
            if let Some(ws) = args.ws {
                config.listeners.ws = ws;
            }
            if let Some(http) = args.http {
                config.listeners.http = http;
            }
            if let Some(data_dir) = args.data_dir {
                config.data_dir = data_dir;
            }
            if let Some(level) = args.log_level {
                config.log.level = level;
            }
            // Again with the flags applied: `--mqtt 0.0.0.0:1883` must meet
            // the same rules as the file would.
            let source = args
                .config
                .clone()
                .unwrap_or_else(|| PathBuf::from("command line (no --config file)"));
            config.validate(&source)?;
            logging::init(&config.log).context("invalid log configuration")?;
            if let Err(error) = small_pages {
                tracing::debug!(%error, "transparent huge pages stay allowed");
            }
            serve::run(config, args.config)
        }
    }
}

/// Runs a benchmark on all cores: one scenario, whose table is printed and
/// whose JSON and charts are written where asked, or a comparison suite,
/// which writes its own report.
#[cfg(feature = "bench")]
fn bench(command: ferry_bench::BenchCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let scenario = match command.action {
        ferry_bench::Action::Scenario(scenario) => scenario,
        ferry_bench::Action::Compare(args) => {
            return Ok(runtime.block_on(ferry_bench::compare::run(args))?);
        }
        ferry_bench::Action::Twins(args) => {
            let json = args.json.clone();
            let report = runtime.block_on(ferry_bench::twins::run(args))?;
            print!("{report}");
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_vec_pretty(&report)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            return Ok(());
        }
    };
    let json = scenario.json_path().map(PathBuf::from);
    let plots = scenario.plots_dir().map(PathBuf::from);
    let report = runtime.block_on(ferry_bench::run(scenario))?;
    print!("{report}");
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(&path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(dir) = plots {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, svg) in report.charts() {
            let path = dir.join(name);
            std::fs::write(&path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(())
}
