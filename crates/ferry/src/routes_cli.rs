//! `ferry routes list` and `ferry routes purge NAME`: the endpoint queues in
//! a data directory, looked at or emptied while Ferry is stopped (the data
//! directory is locked while it runs). A removed endpoint's queue is kept
//! until its messages expire or it is purged here.

use crate::config::Config;
use anyhow::Context;
use ferry_broker::routing::LOWEST_PRIORITY;
use ferry_broker::Broker;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct RoutesArgs {
    #[command(subcommand)]
    command: RoutesCommand,
    /// The configuration file Ferry runs with (for its data_dir and
    /// durability settings).
    #[arg(long, env = "FERRY_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// The data directory, if not the configuration's.
    #[arg(long, env = "FERRY_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
enum RoutesCommand {
    /// Every endpoint queue in the data directory: messages by priority
    /// and log bytes.
    List,
    /// Drops every message queued for the endpoint NAME, so its log space
    /// can be freed.
    Purge { endpoint: String },
}

/// Offsets taken off the queue per record: bounds a record's size.
const PURGE_CHUNK: usize = 16_384;

pub fn run(args: RoutesArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(data_dir) = args.data_dir {
        config.data_dir = data_dir;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let broker = Broker::open(config.broker.clone(), &config.durability, &config.data_dir)
            .with_context(|| {
                format!("cannot open the durable state in {}", config.data_dir.display())
            })?;
        let result = match args.command {
            RoutesCommand::List => {
                list(&broker);
                Ok(())
            }
            RoutesCommand::Purge { endpoint } => purge(&broker, &endpoint).await,
        };
        broker.close_store();
        result
    })
}

fn list(broker: &std::sync::Arc<Broker>) {
    println!("{:<24} {:>12} {:>14}  by priority (0..9)", "endpoint", "messages", "bytes");
    for name in broker.queued_endpoints() {
        let Some(queue) = broker.endpoint_queue(&name) else { continue };
        let backlog = queue.backlog();
        let total: usize = backlog.iter().sum();
        let by_priority: Vec<String> = backlog.iter().map(ToString::to_string).collect();
        println!("{name:<24} {total:>12} {:>14}  {}", queue.bytes(), by_priority.join(" "));
    }
}

async fn purge(broker: &std::sync::Arc<Broker>, endpoint: &str) -> anyhow::Result<()> {
    let mut queue = broker.endpoint_queue(endpoint).context("durability is off: no queues")?;
    let mut bytes = queue.bytes();
    let mut purged = 0;
    for priority in 0..=LOWEST_PRIORITY {
        loop {
            let offsets = queue.take(priority, PURGE_CHUNK);
            if offsets.is_empty() {
                break;
            }
            purged += offsets.len();
            // The byte count rides on the first record: the sizes of the
            // records are not read, only their total is known.
            queue.done(offsets, std::mem::take(&mut bytes));
        }
    }
    queue.settled().await;
    println!("endpoint {endpoint:?}: {purged} messages purged");
    Ok(())
}
