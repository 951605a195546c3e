//! The log's writer thread and its fsync policy: group commit.
//!
//! Appends are sent to one thread that owns the [`Log`]. It takes every
//! append waiting in its queue, writes them, makes them as safe as the
//! policy says with one `fdatasync` for the lot, and only then tells each
//! sender its record is stored. A sender (the broker, about to send PUBACK)
//! therefore never acknowledges a message the policy does not yet cover,
//! and a burst of appends costs one sync, not one each.
//!
//! Answers run on the writer thread, in the order the appends were made,
//! and may append again (a stored message, say, whose delivery to a full
//! queue dropped an older one). Such an append cannot wait for room in the
//! queue the thread itself empties, so it goes on a side list that joins
//! the next batch. After every batch the owner's `after_store` hook gets
//! the log, with every answer given: the moment its view of the log is
//! exactly the log's, for checkpoints and cursors. It also runs every
//! `IDLE_TICK` while nothing comes, so that work it put off (a checkpoint
//! due once a second, say) is not held up by the log going quiet.

use crate::{Log, LogError};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

/// How safe a record is before its append is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Synced: survives a power cut. Appends that arrive while a sync runs
    /// share the next one.
    Always,
    /// Synced, but the writer waits for others to share the sync while
    /// appends keep coming: until none has come for [`QUIET`], and at most
    /// this long after the first unsynced append. Fewer syncs under a
    /// steady stream, at most this much added latency, and no wait for
    /// appends that cannot come (senders that each wait for their last
    /// answer before the next).
    Batch(Duration),
    /// Flushed to the operating system only: survives the process being
    /// killed, not a power cut.
    Never,
}

/// A stored record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub offset: u64,
    /// Whether it was synced (always, except with [`Durability::Never`]).
    pub synced: bool,
}

/// Called once an append is stored, or failed.
pub type Done = Box<dyn FnOnce(Result<Stored, StoreError>) + Send>;

/// Why an append was not stored. The log is unchanged by it, and later
/// appends are tried afresh (a disk that was full may have room again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Log(String),
    #[error("the log writer has stopped")]
    Stopped,
}

/// Appends waiting for the writer, at most: a sender that outruns the disk
/// blocks here instead of queueing without bound.
pub const QUEUE_DEPTH: usize = 16_384;

/// Appends covered by one sync at most: under a stream that never lets the
/// queue empty (or the batch window end), a sync still comes this often,
/// and the answers waiting for it stay bounded.
pub const MAX_BATCH: usize = 4_096;

/// How long the writer naps inside a batch window before it looks at its
/// queue again; a nap that brings no append ends the batch early.
/// Devices that each wait for their PUBACK before the next message send
/// nothing more until the batch is answered, and waiting out a 2 ms
/// window for them cut durable throughput at one message in flight to a
/// quarter of in-memory (docs/benchmarks.md, "The batch window at one
/// message in flight"). Short enough not to hold them up, long enough
/// (the kernel's 50 µs timer slack makes a nap 50-100 µs) for a stream
/// arriving at more than ~20,000 appends a second to keep sharing syncs.
pub const QUIET: Duration = Duration::from_micros(50);

/// How often `after_store` runs while the log is idle.
pub const IDLE_TICK: Duration = Duration::from_secs(1);

/// Buckets of the sync-latency histogram: bucket `i` counts syncs that
/// took under 2^i µs, the last one everything slower (over ~0.5 s).
pub const SYNC_BUCKETS: usize = 20;

/// What the writer has done, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub appended: u64,
    pub syncs: u64,
    /// The longest single `fdatasync`.
    pub max_sync: Duration,
    pub total_sync: Duration,
    pub failed: u64,
    /// Syncs by duration, in [`SYNC_BUCKETS`] powers of two of µs.
    pub sync_histogram: [u64; SYNC_BUCKETS],
}

impl WriterStats {
    /// The upper bound of the bucket holding quantile `q` (0–1) of syncs.
    pub fn sync_quantile(&self, q: f64) -> Option<Duration> {
        let rank = (q.clamp(0.0, 1.0) * self.syncs as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, count) in self.sync_histogram.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(Duration::from_micros(1 << bucket));
            }
        }
        None
    }
}

/// The writer's counters, read by any thread without asking the writer
/// (which may be in the middle of an fsync).
#[derive(Default)]
struct Counters {
    appended: AtomicU64,
    syncs: AtomicU64,
    total_sync_ns: AtomicU64,
    max_sync_ns: AtomicU64,
    failed: AtomicU64,
    sync_histogram: [AtomicU64; SYNC_BUCKETS],
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn record_sync(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        Counters::add(&self.syncs, 1);
        Counters::add(&self.total_sync_ns, nanos);
        self.max_sync_ns.fetch_max(nanos, Ordering::Relaxed);
        let micros = nanos / 1000;
        let bucket = (u64::BITS - micros.leading_zeros()) as usize;
        Counters::add(&self.sync_histogram[bucket.min(SYNC_BUCKETS - 1)], 1);
    }

    fn read(&self) -> WriterStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WriterStats {
            appended: get(&self.appended),
            syncs: get(&self.syncs),
            max_sync: Duration::from_nanos(get(&self.max_sync_ns)),
            total_sync: Duration::from_nanos(get(&self.total_sync_ns)),
            failed: get(&self.failed),
            sync_histogram: std::array::from_fn(|bucket| get(&self.sync_histogram[bucket])),
        }
    }
}

/// A record's payload as its producer holds it: what it encoded, and a
/// body it already had, stored after it.
struct Parts {
    head: Vec<u8>,
    tail: Bytes,
}

enum Request {
    Append(Parts, Done),
    Close,
}

/// Appends made by answers, on the writer thread itself.
type SideList = Arc<Mutex<Vec<(Parts, Done)>>>;

/// Called on the writer thread after each stored batch.
pub type AfterStore = Box<dyn FnMut(&mut Log) + Send>;

/// The sending side; clone it for every producer.
#[derive(Clone)]
pub struct Writer {
    requests: SyncSender<Request>,
    side: SideList,
    thread: ThreadId,
    counters: Arc<Counters>,
}

/// The thread; joining it returns the log.
pub struct WriterThread {
    handle: JoinHandle<Log>,
}

/// Starts the writer thread for `log` with `durability`; `after_store`
/// runs after every stored batch, and every `IDLE_TICK` while idle.
pub fn spawn(
    log: Log,
    durability: Durability,
    after_store: impl FnMut(&mut Log) + Send + 'static,
) -> (Writer, WriterThread) {
    let (requests, queue) = mpsc::sync_channel(QUEUE_DEPTH);
    let side = SideList::default();
    let thread_side = side.clone();
    let after_store: AfterStore = Box::new(after_store);
    let counters = Arc::new(Counters::default());
    let thread_counters = counters.clone();
    let handle = std::thread::Builder::new()
        .name("ferry-log-writer".into())
        .spawn(move || run(log, durability, queue, &thread_side, &thread_counters, after_store))
        .unwrap_or_else(|error| panic!("cannot start the log writer thread: {error}"));
    let thread = handle.thread().id();
    (Writer { requests, side, thread, counters }, WriterThread { handle })
}

impl Writer {
    /// Queues `payload`; `done` is called once it is stored as the policy
    /// says, or failed. Blocks while the queue is full, except when called
    /// from an answer on the writer thread.
    /// `Bytes`, so that a producer that built its record in a `BytesMut`
    /// hands it over without a copy.
    pub fn append(&self, payload: Bytes, done: Done) {
        self.append_parts(Vec::new(), payload, done);
    }

    /// Queues the record whose payload is `head` then `tail`, as
    /// [`Writer::append`] does: a producer adds a body it holds (a
    /// message's payload) to what it encoded without copying it.
    pub fn append_parts(&self, head: Vec<u8>, tail: Bytes, done: Done) {
        let parts = Parts { head, tail };
        if std::thread::current().id() == self.thread {
            self.side.lock().unwrap_or_else(PoisonError::into_inner).push((parts, done));
            return;
        }
        if let Err(mpsc::SendError(Request::Append(_, done))) =
            self.requests.send(Request::Append(parts, done))
        {
            done(Err(StoreError::Stopped));
        }
    }

    /// Stores what was appended so far and stops the thread; later appends
    /// are answered [`StoreError::Stopped`].
    pub fn close(&self) {
        let _ = self.requests.send(Request::Close);
    }

    /// What the writer has done so far.
    pub fn stats(&self) -> WriterStats {
        self.counters.read()
    }
}

impl WriterThread {
    /// Waits for the writer to finish (every [`Writer`] dropped, every
    /// append answered) and returns the log.
    pub fn join(self) -> Log {
        match self.handle.join() {
            Ok(log) => log,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

fn run(
    mut log: Log,
    durability: Durability,
    queue: Receiver<Request>,
    side: &SideList,
    stats: &Counters,
    mut after_store: AfterStore,
) -> Log {
    let mut waiting: Vec<(u64, Done)> = Vec::new();
    // When the oldest append in `waiting` arrived (batch policy).
    let mut since: Option<Instant> = None;
    // How many appends were waiting when the writer last napped in a batch
    // window: the same number after the nap means none came.
    let mut before_nap: Option<usize> = None;
    loop {
        take_side(&mut log, side, &mut waiting, &mut since, stats);
        let next = match (durability, since) {
            _ if waiting.len() >= MAX_BATCH => None,
            (Durability::Batch(window), Some(first)) if !waiting.is_empty() => {
                match queue.try_recv() {
                    Ok(request) => Some(request),
                    Err(TryRecvError::Empty) => {
                        let left = window.saturating_sub(first.elapsed());
                        if left.is_zero() || before_nap == Some(waiting.len()) {
                            None
                        } else {
                            // Nap rather than wait on the queue: a waiting
                            // receiver is woken by every send, a context
                            // switch per record under a steady stream.
                            before_nap = Some(waiting.len());
                            std::thread::sleep(left.min(QUIET));
                            continue;
                        }
                    }
                    Err(TryRecvError::Disconnected) => {
                        finish(&mut log, durability, side, &mut waiting, stats);
                        after_store(&mut log);
                        return log;
                    }
                }
            }
            _ if !waiting.is_empty() => queue.try_recv().ok(),
            _ => match queue.recv_timeout(IDLE_TICK) {
                Ok(request) => Some(request),
                Err(RecvTimeoutError::Timeout) => {
                    after_store(&mut log);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    finish(&mut log, durability, side, &mut waiting, stats);
                    after_store(&mut log);
                    return log;
                }
            },
        };
        match next {
            Some(Request::Append(parts, done)) => {
                take_append(&mut log, parts, done, &mut waiting, &mut since, stats);
                continue;
            }
            Some(Request::Close) => {
                finish(&mut log, durability, side, &mut waiting, stats);
                after_store(&mut log);
                return log;
            }
            None => {}
        }
        // The queue is empty (or the batch window is over): store the lot.
        store(&mut log, durability, &mut waiting, stats);
        since = None;
        before_nap = None;
        after_store(&mut log);
    }
}

/// Stores what is waiting and whatever its answers append, until they
/// append nothing more: every append made before the end is answered.
fn finish(
    log: &mut Log,
    durability: Durability,
    side: &SideList,
    waiting: &mut Vec<(u64, Done)>,
    stats: &Counters,
) {
    let mut since = None;
    loop {
        store(log, durability, waiting, stats);
        if !take_side(log, side, waiting, &mut since, stats) {
            return;
        }
    }
}

/// Moves the appends answers made into the batch; false if there were none.
fn take_side(
    log: &mut Log,
    side: &SideList,
    waiting: &mut Vec<(u64, Done)>,
    since: &mut Option<Instant>,
    stats: &Counters,
) -> bool {
    let from_answers = std::mem::take(&mut *side.lock().unwrap_or_else(PoisonError::into_inner));
    let any = !from_answers.is_empty();
    for (parts, done) in from_answers {
        take_append(log, parts, done, waiting, since, stats);
    }
    any
}

/// Appends one record to the batch being gathered, or answers its failure.
fn take_append(
    log: &mut Log,
    parts: Parts,
    done: Done,
    waiting: &mut Vec<(u64, Done)>,
    since: &mut Option<Instant>,
    stats: &Counters,
) {
    match log.append_parts(&[&parts.head, &parts.tail]) {
        Ok(offset) => {
            since.get_or_insert_with(Instant::now);
            waiting.push((offset, done));
        }
        Err(error) => {
            Counters::add(&stats.failed, 1);
            done(Err(StoreError::Log(error.to_string())));
        }
    }
}

/// Makes the waiting appends as safe as the policy says, with one flush or
/// sync, and answers each.
fn store(log: &mut Log, durability: Durability, waiting: &mut Vec<(u64, Done)>, stats: &Counters) {
    if waiting.is_empty() {
        return;
    }
    let synced = durability != Durability::Never;
    let result: Result<(), LogError> = if synced {
        let started = Instant::now();
        let result = log.sync().map(drop);
        stats.record_sync(started.elapsed());
        result
    } else {
        log.flush()
    };
    match result {
        Ok(()) => {
            Counters::add(&stats.appended, waiting.len() as u64);
            for (offset, done) in waiting.drain(..) {
                done(Ok(Stored { offset, synced }));
            }
        }
        Err(error) => {
            tracing::error!(%error, records = waiting.len(), "durable log: could not store records");
            Counters::add(&stats.failed, waiting.len() as u64);
            let message = error.to_string();
            for (_, done) in waiting.drain(..) {
                done(Err(StoreError::Log(message.clone())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;
    use std::sync::mpsc::Sender;

    fn done_into(results: &Sender<Result<Stored, StoreError>>) -> Done {
        let results = results.clone();
        Box::new(move |result| {
            let _ = results.send(result);
        })
    }

    /// Appends `n` records from `threads` producers and returns every answer.
    fn append_all(writer: &Writer, threads: usize, n: usize) -> Vec<Result<Stored, StoreError>> {
        let (results, answers) = mpsc::channel();
        std::thread::scope(|scope| {
            for t in 0..threads {
                let writer = writer.clone();
                let results = results.clone();
                scope.spawn(move || {
                    for i in 0..n / threads {
                        writer.append(format!("{t}/{i}").into(), done_into(&results));
                    }
                });
            }
        });
        drop(results);
        answers.iter().collect()
    }

    #[test]
    fn every_policy_stores_every_append_and_says_how_safe() {
        for durability in
            [Durability::Always, Durability::Batch(Duration::from_millis(5)), Durability::Never]
        {
            let dir = tempfile::tempdir().unwrap();
            let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
            let (writer, thread) = spawn(log, durability, |_| {});
            let answers = append_all(&writer, 4, 1_000);
            let stats = writer.stats();
            drop(writer);
            let mut log = thread.join();

            assert_eq!(answers.len(), 1_000, "{durability:?}");
            let mut offsets: Vec<u64> =
                answers.iter().map(|a| a.as_ref().unwrap().offset).collect();
            offsets.sort_unstable();
            offsets.dedup();
            assert_eq!(offsets.len(), 1_000, "one offset per record");
            let synced = durability != Durability::Never;
            assert!(answers.iter().all(|a| a.as_ref().unwrap().synced == synced), "{durability:?}");
            assert_eq!(stats.appended, 1_000);
            assert_eq!(stats.syncs == 0, !synced, "{durability:?}: {stats:?}");
            if synced {
                assert_eq!(log.durable_end(), log.end(), "acknowledged means synced");
            }
            let start = log.start();
            assert_eq!(log.read(start, usize::MAX).unwrap().len(), 1_000);
        }
    }

    #[test]
    fn a_batch_window_shares_one_sync_among_many_appends() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
        let (writer, thread) = spawn(log, Durability::Batch(Duration::from_millis(50)), |_| {});
        let answers = append_all(&writer, 1, 1_000);
        assert!(answers.iter().all(Result::is_ok));
        let stats = writer.stats();
        assert!(stats.syncs <= 100, "1,000 appends in a burst took {} syncs", stats.syncs);
        assert!(stats.max_sync <= stats.total_sync);
        assert_eq!(stats.sync_histogram.iter().sum::<u64>(), stats.syncs);
        let p99 = stats.sync_quantile(0.99).unwrap();
        assert!(p99 >= stats.sync_quantile(0.5).unwrap());
        assert!(p99 <= stats.max_sync * 2, "{p99:?} vs max {:?}", stats.max_sync);
        drop(writer);
        thread.join();
    }

    #[test]
    fn a_batch_ends_when_appends_stop_coming() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
        let (writer, thread) = spawn(log, Durability::Batch(Duration::from_secs(3600)), |_| {});
        // One record in flight, as a device waiting for its PUBACK: nothing
        // else can come, so waiting out the hour-long window would be all
        // the writer did.
        let (results, answers) = mpsc::channel();
        for i in 0..20 {
            writer.append(format!("{i}").into(), done_into(&results));
            let answer = answers.recv_timeout(Duration::from_secs(60));
            assert!(answer.is_ok_and(|stored| stored.is_ok_and(|s| s.synced)), "record {i}");
        }
        assert_eq!(writer.stats().syncs, 20);
        drop(writer);
        thread.join();
    }

    #[test]
    fn a_stream_that_never_pauses_is_still_synced_every_max_batch() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
        let (writer, thread) = spawn(log, Durability::Batch(Duration::from_secs(3600)), |_| {});
        // Exactly three batches: each is answered as soon as it is full,
        // long before the window ends.
        let n = 3 * MAX_BATCH;
        let answers = append_all(&writer, 1, n);
        assert_eq!(answers.len(), n);
        assert!(writer.stats().syncs >= 3);
        drop(writer);
        thread.join();
    }

    #[test]
    fn a_record_in_parts_is_stored_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
        let (writer, thread) = spawn(log, Durability::Always, |_| {});
        let (results, answers) = mpsc::channel();
        writer.append_parts(b"head|".to_vec(), "tail".into(), done_into(&results));
        writer.append_parts(b"alone".to_vec(), Bytes::new(), done_into(&results));
        drop(results);
        assert!(answers.iter().all(|answer| answer.is_ok()));
        drop(writer);
        let mut log = thread.join();
        let start = log.start();
        let stored: Vec<Vec<u8>> =
            log.read(start, usize::MAX).unwrap().into_iter().map(|(_, p)| p.to_vec()).collect();
        assert_eq!(stored, [b"head|tail".to_vec(), b"alone".to_vec()]);
    }

    #[test]
    fn a_refused_append_is_answered_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config { segment_bytes: 1 << 20, max_record_bytes: 16 };
        let (log, _) = Log::open(dir.path(), config).unwrap();
        let (writer, thread) = spawn(log, Durability::Always, |_| {});
        let (results, answers) = mpsc::channel();
        writer.append(vec![0; 17].into(), done_into(&results));
        writer.append(vec![1; 16].into(), done_into(&results));
        drop(results);
        let answers: Vec<_> = answers.iter().collect();
        assert!(matches!(&answers[0], Err(StoreError::Log(m)) if m.contains("16-byte limit")));
        assert!(answers[1].as_ref().is_ok_and(|stored| stored.synced));
        assert_eq!(writer.stats().failed, 1);
        drop(writer);
        thread.join();
    }

    #[test]
    fn an_answer_may_append_again_without_waiting_for_its_own_queue() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
        let ends = Arc::new(Mutex::new(Vec::new()));
        let seen = ends.clone();
        let (writer, thread) = spawn(log, Durability::Never, move |log: &mut Log| {
            seen.lock().unwrap().push(log.end())
        });
        let (results, answers) = mpsc::channel();
        // Every answer appends a follow-up record from the writer thread:
        // with more of them than the queue holds, a blocking send there
        // would deadlock.
        for i in 0..QUEUE_DEPTH + 10 {
            let again = writer.clone();
            let results = results.clone();
            writer.append(
                format!("first {i}").into(),
                Box::new(move |first| {
                    assert!(first.is_ok());
                    again.append(format!("again {i}").into(), done_into(&results));
                }),
            );
        }
        drop(results);
        writer.close();
        let answers: Vec<_> = answers.iter().collect();
        let mut log = thread.join();
        assert_eq!(answers.len(), QUEUE_DEPTH + 10);
        assert!(answers.iter().all(Result::is_ok));
        let start = log.start();
        assert_eq!(log.read(start, usize::MAX).unwrap().len(), 2 * (QUEUE_DEPTH + 10));
        assert_eq!(ends.lock().unwrap().last(), Some(&log.end()), "the hook saw the final log");
        writer.append(
            Bytes::from_static(b"late"),
            Box::new(|late| assert_eq!(late, Err(StoreError::Stopped))),
        );
    }

    #[test]
    fn the_hook_runs_while_the_log_is_idle() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
        let (calls, called) = mpsc::channel();
        let (writer, thread) = spawn(log, Durability::Always, move |_: &mut Log| {
            let _ = calls.send(Instant::now());
        });
        let started = Instant::now();
        // Nothing was appended: only the idle tick can call it.
        let first = called.recv_timeout(10 * IDLE_TICK).expect("the hook never ran while idle");
        assert!(first - started >= IDLE_TICK / 2, "called before the tick");
        writer.close();
        thread.join();
    }
}
