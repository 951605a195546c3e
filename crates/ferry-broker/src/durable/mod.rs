//! The broker's durable state on `ferry-log`: persistent sessions, their
//! subscriptions and queued messages, QoS 1/2 exchanges, retained messages
//! and delayed wills survive a restart and a `kill -9`.
//!
//! Every change to durable state is a `record` appended to one log in
//! `{data_dir}/log`. A message that must be kept (QoS ≥ 1 for a persistent
//! session, or retained) is routed only once its record is stored as the
//! fsync policy says, and only then acknowledged: whoever saw it, the log
//! has it. The writer thread folds each stored record into the `ledger`;
//! every segment's worth of log it writes the ledger out as a `snapshot`
//! and lets the log before the oldest message still queued go. Recovery
//! loads the newest snapshot and replays the log after it. The design and
//! its guarantees are in docs/durability.md.

mod ledger;
mod offsets;
pub(crate) mod record;
mod snapshot;
mod space;

pub use ledger::{DurableSession, Ledger};
pub use offsets::Offsets;

use crate::clock::WallClock;
use ferry_log::writer::{self, Durability, Writer, WriterStats, WriterThread};
use ferry_log::{Log, LogError};
use parking_lot::Mutex;
use record::{Published, Record, RecordError};
use serde::Deserialize;
use space::Space;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The `[durability]` section of the configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DurabilityConfig {
    /// Off, nothing is written: sessions and retained messages last as long
    /// as the process, as with Mosquitto's `persistence false`.
    pub enabled: bool,
    pub fsync: Fsync,
    /// With `fsync = "batch"`: how long the first record of a batch may wait
    /// for others to share its fsync (less once they stop coming:
    /// `ferry_log::writer::QUIET`).
    pub fsync_batch_ms: u64,
    /// Size of a log segment, and how much log is written between two
    /// snapshots. Recovery reads at most about this much log.
    pub segment_bytes: u64,
    /// Cap on the log's size; 0 for none but `min_free_disk_bytes`. Past
    /// it, messages that must be stored are refused with 0x97.
    pub max_disk_bytes: u64,
    /// Free space to leave on the data directory's file system: below it,
    /// messages that must be stored are refused with 0x97.
    pub min_free_disk_bytes: u64,
}

impl Default for DurabilityConfig {
    fn default() -> Self {
        DurabilityConfig {
            enabled: true,
            fsync: Fsync::Batch,
            fsync_batch_ms: 2,
            segment_bytes: 64 << 20,
            max_disk_bytes: 0,
            min_free_disk_bytes: 256 << 20,
        }
    }
}

/// When an acknowledged message is on disk (docs/durability.md has what
/// each survives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fsync {
    Always,
    Batch,
    Never,
}

impl DurabilityConfig {
    pub fn validate(&self) -> Result<(), crate::config::ConfigError> {
        let fail = |key, message: &str| {
            Err(crate::config::ConfigError {
                section: "durability",
                key,
                message: message.to_string(),
            })
        };
        if self.segment_bytes < 1 << 20 || self.segment_bytes > ferry_log::MAX_SEGMENT_BYTES {
            return fail("segment_bytes", "must be between 1 MiB and 1 GiB");
        }
        if self.fsync_batch_ms > 1000 {
            return fail("fsync_batch_ms", "must be at most 1000");
        }
        // The active segment is never deleted and a sealed one only whole:
        // a cap of a few segments is the least that can ever drain.
        if self.max_disk_bytes != 0 && self.max_disk_bytes < 4 * self.segment_bytes {
            return fail("max_disk_bytes", "must be 0 (no cap) or at least 4 × segment_bytes");
        }
        Ok(())
    }

    fn durability(&self) -> Durability {
        match self.fsync {
            Fsync::Always => Durability::Always,
            Fsync::Batch => Durability::Batch(Duration::from_millis(self.fsync_batch_ms)),
            Fsync::Never => Durability::Never,
        }
    }

    fn log_config(&self) -> ferry_log::Config {
        // Anything that fits in a segment: the record of a large message
        // fanned out to many sessions is the message plus a few bytes each.
        let max_record_bytes = usize::try_from(self.segment_bytes - 64).unwrap_or(usize::MAX);
        ferry_log::Config { segment_bytes: self.segment_bytes, max_record_bytes }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("damaged durable state: {0}")]
    Record(#[from] RecordError),
    #[error("not stored: {0}")]
    Write(#[from] writer::StoreError),
    #[error("{0} is in use by another ferry process")]
    InUse(PathBuf),
}

impl StoreError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io { path: path.to_owned(), source }
    }
}

/// Takes the data directory for this process: two brokers writing one log
/// would destroy it. The lock goes when the process does, however it ends.
fn lock(data_dir: &Path) -> Result<std::fs::File, StoreError> {
    std::fs::create_dir_all(data_dir).map_err(StoreError::io(data_dir))?;
    let path = data_dir.join("lock");
    let file = std::fs::File::create(&path).map_err(StoreError::io(&path))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::InUse(data_dir.to_owned())),
        Err(std::fs::TryLockError::Error(error)) => Err(StoreError::io(&path)(error)),
    }
}

/// The cursor that holds the log back for the broker's own state.
const CURSOR: &str = "broker";

/// The durable state read back at startup, with the log still in hand to
/// read queued messages from, before the writer takes it.
pub struct Recovery {
    pub ledger: Ledger,
    log: Log,
    lock: std::fs::File,
    snapshots: PathBuf,
    log_dir: PathBuf,
    config: DurabilityConfig,
    /// Where the log ended: every delivery stored before this may have
    /// been sent before the restart.
    end: u64,
    /// Log records replayed after the snapshot.
    pub replayed: u64,
    pub elapsed: Duration,
}

/// Opens the durable state in `data_dir`: the newest snapshot, then every
/// record stored after it.
pub fn recover(data_dir: &Path, config: &DurabilityConfig) -> Result<Recovery, StoreError> {
    let started = std::time::Instant::now();
    let lock = lock(data_dir)?;
    let snapshots = data_dir.join("snapshots");
    let log_dir = data_dir.join("log");
    let (mut log, _) = Log::open(&log_dir, config.log_config())?;
    let mut ledger = Ledger::default();
    let mut from = log.start();
    if let Some(offset) = snapshot::load_latest(&snapshots, |record| ledger.apply(0, 0, &record))? {
        from = offset;
    }
    let mut replayed = 0;
    loop {
        let batch = log.read(from, 4096)?;
        let Some((last, payload)) = batch.last() else { break };
        from = ferry_log::next_offset(*last, payload);
        for (offset, payload) in &batch {
            ledger.apply(*offset, payload.len() as u64, &Record::decode(payload)?);
        }
        replayed += batch.len() as u64;
    }
    Ok(Recovery {
        ledger,
        log,
        lock,
        snapshots,
        log_dir,
        config: config.clone(),
        end: from,
        replayed,
        elapsed: started.elapsed(),
    })
}

impl Recovery {
    /// Writes a fresh snapshot (so the next recovery starts here) and starts
    /// the writer thread.
    pub fn start(mut self) -> Result<Store, StoreError> {
        let mut checkpoint = Checkpoint {
            snapshots: self.snapshots,
            every_bytes: self.config.segment_bytes,
            last: 0,
            at: Instant::now(),
            ledger: Arc::new(Mutex::new(self.ledger)),
        };
        checkpoint.write(&mut self.log)?;
        let space = Arc::new(Space::new(
            self.log_dir,
            self.config.max_disk_bytes,
            self.config.min_free_disk_bytes,
        ));
        space.measure(&self.log);
        let ledger = checkpoint.ledger.clone();
        let measured = space.clone();
        let answered = BatchAnswered::default();
        let hook = answered.clone();
        let clock = Arc::new(WallClock::new());
        let wall_clock = clock.clone();
        let after_store = move |log: &mut Log| {
            if let Some(hook) = hook.lock().as_mut() {
                hook();
            }
            wall_clock.refresh();
            measured.measure(log);
            // Full, a snapshot is what frees the segments consumers have
            // passed: take one as soon as they move, not a segment later.
            let due = log.end() - checkpoint.last >= checkpoint.every_bytes
                || (measured.is_full() && checkpoint.at.elapsed() >= Duration::from_secs(1));
            if due {
                match checkpoint.write(log) {
                    Ok(()) => measured.measure(log),
                    Err(error) => {
                        tracing::error!(%error, "durable state: snapshot failed; the log keeps growing until one succeeds")
                    }
                }
            }
        };
        let reader = Mutex::new(self.log.reader());
        let (writer, thread) = writer::spawn(self.log, self.config.durability(), after_store);
        Ok(Store {
            writer,
            reader,
            thread: Mutex::new(Some(thread)),
            ledger,
            space,
            answered,
            recovery: (self.replayed, self.elapsed),
            recovered_end: self.end,
            clock,
            _lock: self.lock,
        })
    }
}

/// Snapshots and the space they free, on the writer thread.
struct Checkpoint {
    snapshots: PathBuf,
    every_bytes: u64,
    /// Log offset and time of the last snapshot.
    last: u64,
    at: Instant,
    ledger: Arc<Mutex<Ledger>>,
}

impl Checkpoint {
    fn write(&mut self, log: &mut Log) -> Result<(), StoreError> {
        let end = log.end();
        let ledger = self.ledger.lock();
        snapshot::write(&self.snapshots, end, ledger.to_records())?;
        self.last = end;
        self.at = Instant::now();
        let keep = ledger.oldest_pending().map_or(end, |oldest| oldest.min(end));
        drop(ledger);
        log.set_cursor(CURSOR, keep)?;
        let freed = log.reclaim()?;
        if freed > 0 {
            tracing::debug!(freed_bytes = freed, "durable log: deleted consumed segments");
        }
        Ok(())
    }
}

/// Run on the writer thread once every answer of a batch has run.
type BatchAnswered = Arc<Mutex<Option<Box<dyn FnMut() + Send>>>>;

/// The running durable state: appends records, and closes at shutdown.
pub struct Store {
    writer: Writer,
    /// Reads queued messages back as sessions drain.
    reader: Mutex<ferry_log::Reader>,
    thread: Mutex<Option<WriterThread>>,
    ledger: Arc<Mutex<Ledger>>,
    space: Arc<Space>,
    answered: BatchAnswered,
    /// Records replayed and time taken at startup.
    recovery: (u64, Duration),
    recovered_end: u64,
    /// Stored times of receipt, refreshed after every batch.
    clock: Arc<WallClock>,
    /// Held for the life of the process.
    _lock: std::fs::File,
}

/// The durable state's figures, for `$SYS` and metrics.
#[derive(Debug, Clone)]
pub struct StoreFigures {
    pub log_bytes: u64,
    pub segments: u64,
    pub free_disk_bytes: u64,
    pub full: bool,
    /// Messages queued for persistent sessions, all together.
    pub queued: usize,
    pub writer: WriterStats,
    pub recovery_records: u64,
    pub recovery_time: Duration,
}

impl Store {
    /// Appends `record`; `done` runs on the writer thread once it is stored
    /// as the fsync policy says (with its offset), or could not be.
    pub fn append(
        &self,
        mut record: Record,
        done: impl FnOnce(Result<u64, StoreError>) + Send + 'static,
    ) {
        let parts = record.encode_parts();
        let size = (parts.head.len() + parts.tail.len()) as u64;
        if let Record::Published(published) = &mut record {
            published.forget_unretained_message();
        }
        let ledger = self.ledger.clone();
        self.writer.append_parts(
            parts.head,
            parts.tail,
            Box::new(move |result| match result {
                Ok(stored) => {
                    ledger.lock().apply(stored.offset, size, &record);
                    done(Ok(stored.offset));
                }
                Err(error) => done(Err(error.into())),
            }),
        );
    }

    /// Runs `hook` on the writer thread after the answers of every batch
    /// (`append`'s `done`s): what they left for later, to do once for the
    /// lot, is done before the writer takes the next batch.
    pub fn on_batch_answered(&self, hook: impl FnMut() + Send + 'static) {
        *self.answered.lock() = Some(Box::new(hook));
    }

    /// The wall-clock time (Unix ms) of `at`, an instant of this process:
    /// when a message to store arrived.
    pub(crate) fn unix_ms_at(&self, at: Instant) -> u64 {
        self.clock.unix_ms_at(at)
    }

    /// Appends a record nobody waits for. Losing one in a crash costs no
    /// acknowledged data: these say a delivery ended, so at worst it is
    /// made again.
    pub fn note(&self, record: Record) {
        self.append(record, |result| {
            if let Err(error) = result {
                tracing::warn!(%error, "durable state: could not record a change");
            }
        });
    }

    /// The message stored at `offset`, where a session has it queued.
    pub fn read_published(&self, offset: u64) -> Result<Published, StoreError> {
        self.read_published_sized(offset).map(|(published, _)| published)
    }

    /// The message stored at `offset` and its record's size in the log.
    pub fn read_published_sized(&self, offset: u64) -> Result<(Published, u64), StoreError> {
        let payload = self.reader.lock().read(offset)?;
        published_sized(offset, &payload)
    }

    /// `read_published_sized` of each of `offsets`, in order, with far fewer
    /// reads of the disk when they lie close together.
    pub fn read_published_many(
        &self,
        offsets: &[u64],
    ) -> Vec<Result<(Published, u64), StoreError>> {
        let payloads = self.reader.lock().read_many(offsets);
        offsets
            .iter()
            .zip(payloads)
            .map(|(&offset, payload)| published_sized(offset, &payload?))
            .collect()
    }

    /// Up to `limit` offsets queued for `endpoint` at `priority`, from
    /// `from` on.
    pub fn endpoint_pending(
        &self,
        endpoint: &str,
        priority: u8,
        from: u64,
        limit: usize,
    ) -> Vec<u64> {
        let ledger = self.ledger.lock();
        let Some(state) = ledger.endpoints.get(endpoint) else { return Vec::new() };
        state.pending[usize::from(priority)].iter_from(from).take(limit).collect()
    }

    /// The messages queued for `endpoint`, by priority.
    pub fn endpoint_backlog(&self, endpoint: &str) -> [usize; crate::routing::PRIORITIES] {
        let ledger = self.ledger.lock();
        let Some(state) = ledger.endpoints.get(endpoint) else {
            return [0; crate::routing::PRIORITIES];
        };
        std::array::from_fn(|priority| state.pending[priority].len())
    }

    /// The log bytes of the records `endpoint` still needs.
    pub fn endpoint_bytes(&self, endpoint: &str) -> u64 {
        self.ledger.lock().endpoints.get(endpoint).map_or(0, |state| state.bytes)
    }

    /// The endpoints that have messages queued.
    pub fn queued_endpoints(&self) -> Vec<String> {
        self.ledger.lock().endpoints.keys().cloned().collect()
    }

    /// Whether a delivery of the message stored at `offset` may have been
    /// sent before the last restart (and so goes out with DUP set, §4.4):
    /// it was stored before the restart.
    pub fn stored_before_restart(&self, offset: u64) -> bool {
        offset < self.recovered_end
    }

    /// Whether new durable work may be taken (the disk limits allow it).
    pub fn has_room(&self) -> bool {
        self.space.has_room()
    }

    pub fn figures(&self) -> StoreFigures {
        StoreFigures {
            log_bytes: self.space.log_bytes(),
            segments: self.space.segments(),
            free_disk_bytes: self.space.free_bytes(),
            full: self.space.is_full(),
            queued: self.ledger.lock().pending_count(),
            writer: self.writer.stats(),
            recovery_records: self.recovery.0,
            recovery_time: self.recovery.1,
        }
    }

    /// For readiness: the log's directory takes a write, and the disk
    /// limits leave room (measured now). The error says which failed.
    pub fn check_ready(&self) -> Result<(), String> {
        self.space
            .probe_writable()
            .map_err(|error| format!("the durable log's directory is not writable: {error}"))?;
        if !self.space.has_room_now() {
            return Err(format!(
                "the durable log is over a disk limit (free {} bytes, log {} bytes)",
                self.space.free_bytes(),
                self.space.log_bytes()
            ));
        }
        Ok(())
    }

    /// Stores everything appended so far and stops the writer.
    pub fn close(&self) {
        self.writer.close();
        if let Some(thread) = self.thread.lock().take() {
            drop(thread.join());
        }
    }
}

/// The `Published` record a queue's offset points at, with its size in the
/// log.
fn published_sized(offset: u64, payload: &[u8]) -> Result<(Published, u64), StoreError> {
    match Record::decode(payload)? {
        Record::Published(published) => Ok((*published, payload.len() as u64)),
        other => Err(RecordError::Invalid {
            field: "queued message",
            reason: format!("offset {offset} holds {other:?}"),
        }
        .into()),
    }
}
