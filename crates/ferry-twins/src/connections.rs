//! Ditto's connections (`/api/2/connections`): twin events pushed to
//! services outside, managed over HTTP and kept across restarts.
//!
//! The `http-push` type with targets on twin events (`push.rs`), and the
//! `kafka` type with such targets and with sources of Ditto protocol
//! commands (`kafka.rs`); `model.rs` says what is refused. Connections are stored in one JSON file in the
//! data directory, replaced whole and fsynced on every change: there are
//! few of them (at most `MAX_CONNECTIONS`), and they change by hand.
//! Each open connection runs in tasks of its own (`push.rs`); changing a
//! connection restarts it, with its figures from zero.
//!
//! Who may manage them: Ditto puts the connectivity API behind its devops
//! authentication. Ferry lets the subjects listed in `[twins]
//! connection_subjects` in (by default `nginx:ditto`, the subject of a
//! caller without credentials on a loopback listener of Ferry with no
//! users; see the binary's `twins.rs`).

mod enforcement;
mod errors;
mod feed;
mod inbound;
#[cfg(feature = "kafka")]
mod kafka;
mod live;
pub mod model;
mod mqtt;
mod outgoing;
mod pipeline;
mod placeholder;
mod places;
mod progress;
mod push;
mod source;
mod stats;
mod template;
mod tls;
mod uri;
mod window;

use crate::error::DittoError;
use crate::service::{Caller, Twins};
use feed::Feed;
use model::{ConnectionSpec, Transport};
use places::Places;
use progress::Progress;
use serde_json::Value;
use stats::ConnectionStats;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Mutex;
use tokio::task::AbortHandle;

/// Connections one Ferry keeps: each runs tasks and reads every twin
/// event, and they are listed whole by `GET /api/2/connections`.
pub const MAX_CONNECTIONS: usize = 100;

/// Where the connections' places in the event journal are kept, beside
/// the connections' own file (`places.rs`).
const PLACES_FILE: &str = "twin-connection-places.json";

pub struct Connections {
    twins: Arc<Twins>,
    file: PathBuf,
    places: Arc<Places>,
    managers: Vec<String>,
    host: Host,
    /// By id, in order (a list is sorted by id).
    running: Mutex<BTreeMap<String, Running>>,
}

/// What the connections run on.
struct Host {
    /// This Ferry among the members of a Kafka consumer group
    /// (`member_name`).
    #[cfg_attr(
        not(feature = "kafka"),
        expect(dead_code, reason = "only Kafka consumers are named by it")
    )]
    member: Arc<str>,
    /// Where `mqtt` connections to this Ferry publish.
    broker: std::sync::Weak<ferry_broker::Broker>,
    /// The ports of this Ferry's MQTT listeners: an `mqtt` connection to
    /// a loopback address on one of them is to this Ferry.
    own_mqtt_ports: Vec<u16>,
}

struct Running {
    spec: Arc<ConnectionSpec>,
    stats: Arc<ConnectionStats>,
    tasks: Vec<AbortHandle>,
    /// Its place in the event journal, while it is open with targets.
    progress: Option<Arc<Progress>>,
    /// The labels its targets issue, while it is open.
    declaration: Option<crate::acks::Declaration>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // First: what the aborted tasks drop was not sent.
        if let Some(progress) = &self.progress {
            progress.stop();
        }
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// One target's counts since its connection (re)started.
#[derive(Debug, Clone)]
pub struct TargetFigures {
    pub connection: String,
    pub address: String,
    pub open: bool,
    pub dispatched: u64,
    pub filtered: u64,
    pub published: u64,
    pub failed: u64,
    pub dropped: u64,
}

/// One source's counts since its connection (re)started.
#[derive(Debug, Clone)]
pub struct SourceFigures {
    pub connection: String,
    /// Its topics, joined with `,`.
    pub addresses: String,
    pub consumed: u64,
    pub applied: u64,
    pub failed: u64,
}

/// How a PUT landed.
pub enum Put {
    Created(Value),
    Modified,
}

/// A connections file that cannot be read at start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionsError {
    #[error("cannot read {file}: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    #[error("{file}: {message}")]
    Invalid { file: PathBuf, message: String },
    #[error(transparent)]
    Places(#[from] places::PlacesError),
}

impl Connections {
    /// Loads the connections stored in `file` and starts the open ones;
    /// `managers` are the subjects that may manage them, `own_mqtt_ports`
    /// the ports of this Ferry's MQTT listeners.
    pub fn open(
        twins: Arc<Twins>,
        file: PathBuf,
        managers: Vec<String>,
        broker: std::sync::Weak<ferry_broker::Broker>,
        own_mqtt_ports: Vec<u16>,
    ) -> Result<Connections, ConnectionsError> {
        let stored: Vec<Value> = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                ConnectionsError::Invalid { file: file.clone(), message: error.to_string() }
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(ConnectionsError::Read { file, source }),
        };
        let host = Host { member: member_name(&file).into(), broker, own_mqtt_ports };
        let places = Arc::new(Places::open(file.with_file_name(PLACES_FILE))?);
        tokio::spawn(places.clone().run(twins.closing()));
        let mut running = BTreeMap::new();
        for json in stored {
            let id = json.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            let spec =
                ConnectionSpec::parse(&id, json).map_err(|error| ConnectionsError::Invalid {
                    file: file.clone(),
                    message: format!("connection '{id}': {}", error.message),
                })?;
            running.insert(id, start(&twins, spec, &host, &places));
        }
        if !running.is_empty() {
            tracing::info!(connections = running.len(), "twin connections loaded");
        }
        Ok(Connections { twins, file, places, managers, host, running: Mutex::new(running) })
    }

    /// For a shutdown: stops the connections and stores where each stands
    /// in the event journal, so that a restart sends what they had not.
    pub async fn shut_down(&self) {
        let running = std::mem::take(&mut *self.running.lock().await);
        let places = self.places.clone();
        let stopped = tokio::task::spawn_blocking(move || places.stop()).await;
        if let Ok(Err(error)) = stopped {
            tracing::warn!(%error, "cannot store the twin connections' places");
        }
        drop(running);
    }

    /// Whether `caller` may manage connections: Ditto's 401 without one,
    /// 403 for anyone not listed.
    pub fn check_manager(&self, caller: Option<&Caller>) -> Result<(), DittoError> {
        let caller = caller.ok_or_else(DittoError::unauthenticated)?;
        if caller.subjects.iter().any(|subject| self.managers.contains(subject)) {
            Ok(())
        } else {
            Err(DittoError::connections_forbidden())
        }
    }

    pub async fn list(&self) -> Vec<Value> {
        self.running.lock().await.values().map(|running| running.spec.json.clone()).collect()
    }

    pub async fn ids(&self) -> Vec<String> {
        self.running.lock().await.keys().cloned().collect()
    }

    pub async fn retrieve(&self, id: &str) -> Result<Value, DittoError> {
        let running = self.running.lock().await;
        let connection = running.get(id).ok_or_else(|| DittoError::connection_not_found(id))?;
        Ok(connection.spec.json.clone())
    }

    /// POST: a new connection with a generated id (a v4 UUID, as Ditto's).
    pub async fn create(&self, json: Value) -> Result<Value, DittoError> {
        let id = crate::id::random_uuid();
        match self.put(&id, json).await? {
            Put::Created(json) => Ok(json),
            Put::Modified => Err(DittoError::connection_conflict(&id)),
        }
    }

    /// PUT: creates or replaces the connection `id` (and restarts it).
    pub async fn put(&self, id: &str, json: Value) -> Result<Put, DittoError> {
        let spec = ConnectionSpec::parse(id, json)?;
        let mut running = self.running.lock().await;
        let created = !running.contains_key(id);
        if created && running.len() >= MAX_CONNECTIONS {
            return Err(DittoError::connection_invalid(format!(
                "Ferry keeps at most {MAX_CONNECTIONS} connections."
            )));
        }
        let stored = spec.json.clone();
        // The replacement declares the same labels: the old one lets go first.
        if let Some(previous) = running.get_mut(id) {
            previous.declaration = None;
        }
        let started = start(&self.twins, spec, &self.host, &self.places);
        let previous = running.insert(id.to_owned(), started);
        if let Err(error) = self.save(&running, id) {
            match previous {
                Some(mut previous) => {
                    drop(running.remove(id));
                    if previous.spec.open {
                        previous.declaration =
                            declare(&self.twins, &previous.spec, &previous.stats);
                    }
                    if let Some(progress) = &previous.progress {
                        self.places.restore(id, progress.clone());
                    }
                    running.insert(id.to_owned(), previous)
                }
                None => running.remove(id),
            };
            return Err(error);
        }
        tracing::info!(connection = id, created, "twin connection stored");
        Ok(if created { Put::Created(stored) } else { Put::Modified })
    }

    pub async fn delete(&self, id: &str) -> Result<(), DittoError> {
        let mut running = self.running.lock().await;
        let removed = running.remove(id).ok_or_else(|| DittoError::connection_not_found(id))?;
        if let Err(error) = self.save(&running, id) {
            running.insert(id.to_owned(), removed);
            return Err(error);
        }
        self.places.forget(id);
        tracing::info!(connection = id, "twin connection deleted");
        Ok(())
    }

    pub async fn status(&self, id: &str) -> Result<Value, DittoError> {
        let running = self.running.lock().await;
        let connection = running.get(id).ok_or_else(|| DittoError::connection_not_found(id))?;
        Ok(connection.stats.status(&connection.spec, !connection.tasks.is_empty()))
    }

    pub async fn metrics(&self, id: &str) -> Result<Value, DittoError> {
        let running = self.running.lock().await;
        let connection = running.get(id).ok_or_else(|| DittoError::connection_not_found(id))?;
        Ok(connection.stats.metrics(&connection.spec))
    }

    /// Every target's counts, for Prometheus: `(connection, address,
    /// figures)`, with whether its connection runs.
    pub async fn figures(&self) -> Vec<TargetFigures> {
        let running = self.running.lock().await;
        let mut all = Vec::new();
        for (id, connection) in running.iter() {
            for (target, stats) in connection.spec.targets.iter().zip(&connection.stats.targets) {
                all.push(TargetFigures {
                    connection: id.clone(),
                    address: target.address.clone(),
                    open: !connection.tasks.is_empty(),
                    dispatched: stats.dispatched.get(),
                    filtered: stats.filtered.get(),
                    published: stats.published.get(),
                    failed: stats.failed.get(),
                    dropped: stats.dropped.get(),
                });
            }
        }
        all
    }

    /// Every source's counts, for Prometheus.
    pub async fn source_figures(&self) -> Vec<SourceFigures> {
        let running = self.running.lock().await;
        let mut all = Vec::new();
        for (id, connection) in running.iter() {
            let sources = connection.spec.source_addresses();
            for (addresses, stats) in sources.into_iter().zip(&connection.stats.sources) {
                all.push(SourceFigures {
                    connection: id.clone(),
                    addresses: addresses.join(","),
                    consumed: stats.consumed.get(),
                    applied: stats.applied.get(),
                    failed: stats.failed.get(),
                });
            }
        }
        all
    }

    /// `POST …/command`: Ditto's `connectivity.commands:…` in the body.
    /// Open and close change `connectionStatus` and are stored.
    pub async fn command(&self, id: &str, command: &str) -> Result<(), DittoError> {
        let status = match command.trim() {
            "connectivity.commands:openConnection" => "open",
            "connectivity.commands:closeConnection" => "closed",
            "connectivity.commands:resetConnectionMetrics" => {
                let running = self.running.lock().await;
                let connection =
                    running.get(id).ok_or_else(|| DittoError::connection_not_found(id))?;
                connection.stats.reset();
                return Ok(());
            }
            other => return Err(DittoError::connection_command_invalid(other)),
        };
        let mut json = self.retrieve(id).await?;
        json["connectionStatus"] = Value::String(status.to_owned());
        self.put(id, json).await.map(|_| ())
    }

    /// Replaces the file with the connections in `running`: written to a
    /// temporary file, fsynced, renamed over the old one, and the
    /// directory fsynced, so a crash leaves the old set or the new.
    fn save(&self, running: &BTreeMap<String, Running>, id: &str) -> Result<(), DittoError> {
        let all: Vec<&Value> = running.values().map(|running| &running.spec.json).collect();
        let write = || -> std::io::Result<()> {
            let temporary = self.file.with_extension("json.tmp");
            let mut file = std::fs::File::create(&temporary)?;
            file.write_all(&serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.file)?;
            if let Some(directory) = self.file.parent() {
                std::fs::File::open(directory)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|error| {
            tracing::error!(file = %self.file.display(), %error, "cannot store the twin connections");
            DittoError::connection_unavailable(id)
        })
    }
}

/// Declares the labels the connection's targets issue and its sources'
/// devices send back (it takes every event, so it is never answered for
/// with weak acknowledgements of a declarer without events; `outgoing.rs`
/// gives those for events no target sends). A label another subscriber holds leaves the
/// connection running without it, as Ditto rejects such a connection's
/// acknowledgements; its status says so.
fn declare(
    twins: &Arc<Twins>,
    spec: &ConnectionSpec,
    stats: &ConnectionStats,
) -> Option<crate::acks::Declaration> {
    let labels = spec.declared_acks();
    if labels.is_empty() {
        return None;
    }
    match twins.ack_hub().declare(labels) {
        Ok(declaration) => {
            declaration.set_streaming(true);
            Some(declaration)
        }
        Err(error) => {
            tracing::warn!(connection = %spec.id, error = %error.message, "a connection's issued acknowledgement labels are taken");
            stats.set_failure(format!("issued acknowledgement labels: {}", error.message));
            None
        }
    }
}

/// A name for this Ferry that stays the same across its restarts and
/// differs between two Ferrys: a hash of the host's name and the data
/// directory that holds `file`. Kafka sources name their consumers
/// (`client.id`) with it, so a consumer group's description tells which
/// Ferry each member is.
fn member_name(file: &std::path::Path) -> String {
    use std::hash::{Hash, Hasher};
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let directory = file.parent().and_then(|dir| dir.canonicalize().ok());
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (host.trim(), directory).hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// Starts `spec`'s tasks (none when it is closed), its targets' feed
/// going on from where the run it replaces, or the last one before a
/// restart, left off in the event journal.
fn start(twins: &Arc<Twins>, spec: ConnectionSpec, host: &Host, places: &Places) -> Running {
    let spec = Arc::new(spec);
    let stats = Arc::new(ConnectionStats::new(spec.targets.len(), spec.source_addresses().len()));
    let declaration = if spec.open { declare(twins, &spec, &stats) } else { None };
    let progress = (spec.open && !spec.targets.is_empty()).then(|| places.start(&spec.id));
    if progress.is_none() {
        places.forget(&spec.id);
    }
    let feed = progress.clone().map(|progress| Feed::open(twins, progress));
    let tasks = match &spec.transport {
        _ if !spec.open => Vec::new(),
        Transport::HttpPush(http) => {
            push::start(twins.clone(), spec.clone(), http.clone(), stats.clone(), feed)
        }
        #[cfg(feature = "kafka")]
        Transport::Kafka(kafka) => kafka::start(
            twins.clone(),
            spec.clone(),
            kafka.clone(),
            stats.clone(),
            host.member.clone(),
            feed,
        ),
        Transport::Mqtt(mqtt) => mqtt::start(
            twins.clone(),
            spec.clone(),
            mqtt.clone(),
            stats.clone(),
            host.broker.clone(),
            &host.own_mqtt_ports,
            feed,
        ),
    };
    Running { spec, stats, tasks, progress, declaration }
}
