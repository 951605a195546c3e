//! `ferry-log`: Ferry's durable log — an append-only sequence of records
//! in fixed-size segment files, with named consumer cursors, written by us
//! because it is the core that durability rests on.
//!
//! # On disk
//!
//! A log is a directory of segment files, `{base:020}.seg`, and a `cursors`
//! file. A segment starts with a 24-byte header (`FERRYLOG`, format version,
//! base offset) followed by records, each `crc32c | length | payload`
//! (`record`). A record's *offset* is its segment's base plus its position
//! in the file; the next segment's base is the previous one's base plus its
//! length, so offsets only grow and a cursor is just the offset of the next
//! record to read. The `cursors` file (`cursors`) holds each consumer's
//! offset and is replaced atomically.
//!
//! # Writing and syncing
//!
//! [`Log::append`] buffers the record and returns its offset;
//! [`Log::flush`] writes buffered records to the file, by direct I/O where
//! the file system allows it (`write_buffer` says why and how), so they
//! survive the process being killed; [`Log::sync`] also `fdatasync`s them
//! (they then survive a power cut) and moves [`Log::durable_end`]. When to
//! sync is a policy: one sync covers every record appended before it, and
//! [`writer`] is the thread that applies it — it gathers the appends
//! waiting for it, stores them with one flush or sync as
//! [`writer::Durability`] says (`Always`, `Batch(window)`, `Never`), and only
//! then answers each (group commit). A segment is sealed, synced, when the next record would take
//! it past [`Config::segment_bytes`], and the next segment is created and
//! its directory entry synced before anything is written to it.
//!
//! # Recovery
//!
//! [`Log::open`] checks every segment's header and that the segments
//! follow each other without gaps, then scans only the last segment: sealed
//! ones were synced before the next was begun. The scan stops at the first
//! record that is torn (fewer bytes than it announces) or damaged (CRC
//! mismatch), truncates the file there durably and logs how many bytes it
//! dropped, unless they were only the zeros that pad a direct write.
//! Recovery therefore reads at most one segment, whatever the
//! backlog.
//!
//! # Space
//!
//! [`Log::reclaim`] deletes whole sealed segments that every cursor has
//! passed (after syncing the cursors, so a crash cannot leave a cursor
//! pointing into a deleted segment).
//!
//! # Limits
//!
//! Segments are at most [`MAX_SEGMENT_BYTES`] (1 GiB): recovery scans one,
//! and its time is the bound on startup. Records are at most
//! [`Config::max_record_bytes`], which must fit in a segment. The write
//! buffer holds at most [`WRITE_BUFFER_BYTES`] before it is flushed, so
//! appends never grow memory without bound.

mod cursors;
mod error;
mod reader;
mod record;
mod segment;
mod write_buffer;
pub mod writer;

pub use error::LogError;
pub use reader::Reader;

use segment::Segment;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use write_buffer::WriteBuffer;

/// The largest segment: recovery scans one segment, so this bounds startup
/// time (1 GiB at the ~2 GB/s this disk reads is half a second).
pub const MAX_SEGMENT_BYTES: u64 = 1 << 30;

/// Appended bytes held in memory before they are written to the file even
/// without a flush: enough to batch thousands of small records per write.
pub const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// How a log is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Segment size at which a new segment is begun.
    pub segment_bytes: u64,
    /// Largest payload accepted.
    pub max_record_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config { segment_bytes: 64 << 20, max_record_bytes: 16 << 20 }
    }
}

impl Config {
    fn check(&self) -> Result<(), LogError> {
        if self.segment_bytes > MAX_SEGMENT_BYTES {
            return Err(LogError::Config(format!(
                "segment_bytes {} is over the {MAX_SEGMENT_BYTES}-byte limit",
                self.segment_bytes
            )));
        }
        let largest = segment::HEADER_LEN + (record::HEADER_LEN + self.max_record_bytes) as u64;
        if self.max_record_bytes > u32::MAX as usize || largest > self.segment_bytes {
            return Err(LogError::Config(format!(
                "a record of max_record_bytes {} does not fit in a segment of {} bytes",
                self.max_record_bytes, self.segment_bytes
            )));
        }
        Ok(())
    }
}

/// The offset just after the record at `offset` with this payload: where a
/// consumer that has read it goes on, and what its cursor is set to.
pub fn next_offset(offset: u64, payload: &[u8]) -> u64 {
    offset + (record::HEADER_LEN + payload.len()) as u64
}

/// What [`Log::open`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Segment files in the log.
    pub segments: usize,
    /// Records found intact in the last segment.
    pub tail_records: u64,
    /// Bytes of a torn or damaged tail cut off the last segment.
    pub truncated_bytes: u64,
    /// Wall time of the whole open.
    pub elapsed: Duration,
}

/// A log open for appending and reading. Not thread-safe: one owner calls
/// it, typically a thread of its own, since every call may block on disk.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    config: Config,
    /// Sealed segments, oldest first: (base, length).
    sealed: VecDeque<(u64, u64)>,
    active: Segment,
    /// Records appended but not yet written to `active`, in whole blocks.
    buffer: WriteBuffer,
    durable_end: u64,
    /// What the owner was last told is stored (by `flush` or `sync`): a
    /// failed write cuts the log back to it.
    kept: Kept,
    /// Records appended since `kept` were lost to a failed write, and the
    /// owner has not been told yet: appends are refused until it is.
    lost: bool,
    cursors: BTreeMap<String, u64>,
}

/// A point the log can be cut back to: its end, and the bytes of the
/// segment's last block before it, which the next write rewrites.
#[derive(Debug)]
struct Kept {
    end: u64,
    tail: Vec<u8>,
}

impl Log {
    /// Opens the log in `dir`, creating it if needed, and recovers it.
    pub fn open(dir: &Path, config: Config) -> Result<(Log, Recovery), LogError> {
        let started = Instant::now();
        config.check()?;
        std::fs::create_dir_all(dir).map_err(LogError::io(dir))?;
        let bases = reader::segment_bases(dir)?;

        let mut recovery = Recovery::default();
        let Some((&last, older)) = bases.split_last() else {
            let active = Segment::create(dir, 0)?;
            active.sync()?;
            cursors::sync_dir(dir)?;
            let durable_end = active.end();
            let log = Log::assemble(dir, config, VecDeque::new(), active, durable_end)?;
            recovery.segments = 1;
            recovery.elapsed = started.elapsed();
            return Ok((log, recovery));
        };
        let mut sealed = VecDeque::with_capacity(older.len());
        let mut expected_base = None;
        for &base in older {
            let segment = Segment::open(dir, base)?;
            check_follows(&segment, expected_base)?;
            expected_base = Some(segment.end());
            sealed.push_back((base, segment.len));
        }
        let mut active = open_last(dir, last)?;
        check_follows(&active, expected_base)?;
        let mut tail_records = 0;
        let end = segment::scan(
            &active.path,
            segment::HEADER_LEN,
            active.len,
            config.max_record_bytes,
            |_, _| {
                tail_records += 1;
                true
            },
        )?;
        if end.valid_len < active.len {
            let dropped = active.len - end.valid_len;
            if active.zeros_at(end.valid_len, dropped)? {
                // The zeros that pad a direct write's last block: nothing
                // was written there (no record is all zeros).
                tracing::debug!(segment = %active.path.display(), padding = dropped, "durable log: cut the padding off the last segment");
            } else {
                tracing::warn!(
                    segment = %active.path.display(),
                    at = end.valid_len,
                    dropped_bytes = dropped,
                    reason = end.damaged.unwrap_or("torn record"),
                    "durable log: cut a torn or damaged tail off the last segment"
                );
                recovery.truncated_bytes = dropped;
            }
            active.truncate(end.valid_len)?;
        }
        recovery.segments = sealed.len() + 1;
        recovery.tail_records = tail_records;
        let durable_end = active.end();
        let log = Log::assemble(dir, config, sealed, active, durable_end)?;
        recovery.elapsed = started.elapsed();
        Ok((log, recovery))
    }

    fn assemble(
        dir: &Path,
        config: Config,
        sealed: VecDeque<(u64, u64)>,
        active: Segment,
        durable_end: u64,
    ) -> Result<Log, LogError> {
        let end = active.end();
        let in_block = active.len % write_buffer::BLOCK as u64;
        let tail = active.read_at(active.len - in_block, in_block as usize)?;
        Ok(Log {
            dir: dir.to_owned(),
            config,
            sealed,
            buffer: WriteBuffer::new(WRITE_BUFFER_BYTES, active.len, &tail),
            active,
            durable_end,
            kept: Kept { end, tail },
            lost: false,
            cursors: cursors::load(dir)?,
        })
    }

    /// Appends a record and returns its offset. It is in memory until the
    /// next [`Log::flush`] or [`Log::sync`] (or a full write buffer).
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, LogError> {
        self.append_parts(&[payload])
    }

    /// Appends a record whose payload is `parts` one after the other, as
    /// [`Log::append`] does their concatenation: a producer that holds a
    /// large body (a message) beside what it encoded stores both without
    /// first copying them together.
    pub fn append_parts(&mut self, parts: &[&[u8]]) -> Result<u64, LogError> {
        if self.lost {
            return Err(self.lost_error());
        }
        let len = parts.iter().map(|part| part.len()).sum::<usize>();
        if len > self.config.max_record_bytes {
            return Err(LogError::RecordTooLarge { len, max: self.config.max_record_bytes });
        }
        let size = (record::HEADER_LEN + len) as u64;
        let used = self.end() - self.active.base;
        if used + size > self.config.segment_bytes && used > segment::HEADER_LEN {
            self.roll()?;
        }
        let offset = self.end();
        self.put(&record::header(parts))?;
        for part in parts {
            self.put(part)?;
        }
        Ok(offset)
    }

    /// Copies `bytes` into the write buffer, writing it out whenever it is
    /// full. A failed write loses every record since `kept`.
    fn put(&mut self, mut bytes: &[u8]) -> Result<(), LogError> {
        while !bytes.is_empty() {
            if self.buffer.is_full() {
                self.write_out().inspect_err(|_| self.lost = true)?;
            }
            let taken = self.buffer.push(bytes);
            bytes = &bytes[taken..];
        }
        Ok(())
    }

    /// Writes the buffer's blocks to the active segment. If that fails, the
    /// log is cut back to `kept`.
    fn write_out(&mut self) -> Result<(), LogError> {
        if self.buffer.unwritten() == 0 {
            return Ok(());
        }
        let (position, blocks) = self.buffer.blocks();
        if let Err(error) = self.active.write_blocks(position, blocks) {
            self.cut_back();
            return Err(error);
        }
        self.active.len = self.buffer.end();
        self.buffer.written_out();
        Ok(())
    }

    /// Seals the active segment (durably) and begins the next one.
    fn roll(&mut self) -> Result<(), LogError> {
        // A failed sync loses the records since `kept`; a failure after it
        // (beginning the next segment) loses nothing, and this append
        // alone fails.
        self.sync_kept().inspect_err(|_| self.lost = true)?;
        // The padding of the last write goes: a sealed segment's length is
        // where the next one begins.
        let len = self.active.len;
        self.active.truncate(len)?;
        let next = Segment::create(&self.dir, self.active.end())?;
        next.sync()?;
        cursors::sync_dir(&self.dir)?;
        let sealed = std::mem::replace(&mut self.active, next);
        self.sealed.push_back((sealed.base, sealed.len));
        let header = segment::header(self.active.base);
        self.buffer.reset(self.active.len, &header);
        self.kept = Kept { end: self.active.end(), tail: header.to_vec() };
        self.durable_end = self.active.end();
        Ok(())
    }

    /// Writes appended records to the file: from here on they survive the
    /// process dying, not yet the machine.
    ///
    /// If the write fails (disk full, EIO), or an earlier one did, the
    /// records appended since the last flush or sync are lost: the file is
    /// cut back to where they began, so a partly written record never sits
    /// in front of later ones, and what was stored before is untouched.
    pub fn flush(&mut self) -> Result<(), LogError> {
        if std::mem::take(&mut self.lost) {
            return Err(self.lost_error());
        }
        self.write_out()?;
        self.keep();
        Ok(())
    }

    /// Flushes and `fdatasync`s: every record appended so far survives a
    /// power cut. Returns the new [`Log::durable_end`]. Fails as
    /// [`Log::flush`] does, and if `fdatasync` fails: what it was to cover
    /// cannot be trusted to be on disk, so the file is cut back to where
    /// the records since the last flush or sync began, and they are gone.
    pub fn sync(&mut self) -> Result<u64, LogError> {
        if std::mem::take(&mut self.lost) {
            return Err(self.lost_error());
        }
        self.sync_kept()?;
        Ok(self.durable_end)
    }

    fn sync_kept(&mut self) -> Result<(), LogError> {
        self.write_out()?;
        if self.durable_end < self.end() {
            if let Err(error) = self.active.sync() {
                self.cut_back();
                return Err(error);
            }
            self.durable_end = self.end();
        }
        self.keep();
        Ok(())
    }

    /// Everything appended so far is what the owner is told is stored.
    fn keep(&mut self) {
        if self.kept.end != self.end() {
            self.kept = Kept { end: self.end(), tail: self.buffer.tail().to_vec() };
        }
    }

    /// After a failed write or sync: the file ends at `kept` again, or the
    /// failure to get there is logged (the next open cuts the tail anyway).
    fn cut_back(&mut self) {
        let end = self.kept.end;
        if end < self.active.base {
            // Kept in a sealed segment: the failure came while beginning
            // the next one, which has nothing in it yet.
            return;
        }
        if let Err(error) = self.active.truncate(end - self.active.base) {
            tracing::error!(%error, "durable log: cannot cut back a failed write; recovery will");
        }
        self.buffer.reset(end - self.active.base, &self.kept.tail);
    }

    fn lost_error(&self) -> LogError {
        LogError::Io {
            path: self.active.path.clone(),
            source: std::io::Error::other(
                "an earlier write failed: the records appended since the last flush are lost",
            ),
        }
    }

    /// Records before this offset are synced.
    pub fn durable_end(&self) -> u64 {
        self.durable_end
    }

    /// The offset the next record will get.
    pub fn end(&self) -> u64 {
        self.active.base + self.buffer.end()
    }

    /// The offset of the oldest record still held (or of the next one, if
    /// the log holds none).
    pub fn start(&self) -> u64 {
        self.sealed.front().map_or(self.active.base, |&(base, _)| base) + segment::HEADER_LEN
    }

    /// Bytes on disk, headers included.
    pub fn size_bytes(&self) -> u64 {
        self.sealed.iter().map(|&(_, len)| len).sum::<u64>() + self.active.len
    }

    /// A reader of single records by offset, with its own file handles.
    pub fn reader(&self) -> Reader {
        Reader::new(&self.dir, self.config.max_record_bytes)
    }

    /// Segment files, the active one included.
    pub fn segments(&self) -> usize {
        self.sealed.len() + 1
    }

    /// Bytes an unprivileged writer may still use on the log's file system.
    pub fn available_bytes(&self) -> Result<u64, LogError> {
        available_bytes(&self.dir)
    }

    /// Up to `max_records` records from offset `from` on, each with its
    /// offset; the offset after the last one returned is where to go on.
    /// `from` is an offset [`Log::append`] returned, one after a record, or
    /// [`Log::start`].
    pub fn read(&mut self, from: u64, max_records: usize) -> Result<Vec<(u64, Vec<u8>)>, LogError> {
        self.flush()?;
        let mut records = Vec::new();
        if from < self.start() || from > self.end() {
            return Err(LogError::BadOffset { offset: from, reason: "outside the log" });
        }
        let segments = self.sealed.iter().copied().chain([(self.active.base, self.active.len)]);
        for (base, len) in segments {
            let end = base + len;
            if end <= from || records.len() >= max_records {
                continue;
            }
            let position = from.max(base + segment::HEADER_LEN) - base;
            let path = self.dir.join(segment::file_name(base));
            let want = max_records - records.len();
            let scanned = segment::scan(
                &path,
                position,
                len,
                self.config.max_record_bytes,
                |at, payload| {
                    records.push((base + at, payload.to_vec()));
                    records.len() < max_records
                },
            )?;
            if records.len() < max_records && scanned.valid_len < len {
                return Err(LogError::Corrupt {
                    path,
                    position: scanned.valid_len,
                    reason: format!(
                        "{} where {want} more records were expected",
                        scanned.damaged.unwrap_or("not a record boundary")
                    ),
                });
            }
        }
        Ok(records)
    }

    /// Where consumer `name` is: the offset of the next record it reads.
    pub fn cursor(&self, name: &str) -> Option<u64> {
        self.cursors.get(name).copied()
    }

    /// Moves consumer `name` to `offset`, which must be held by the log
    /// (in memory until [`Log::save_cursors`]).
    pub fn set_cursor(&mut self, name: &str, offset: u64) -> Result<(), LogError> {
        if name.len() > cursors::MAX_NAME_BYTES {
            return Err(LogError::Config(format!(
                "cursor name of {} bytes is over the {}-byte limit",
                name.len(),
                cursors::MAX_NAME_BYTES
            )));
        }
        if offset > self.end() {
            return Err(LogError::BadOffset { offset, reason: "past the end of the log" });
        }
        if offset < self.start() {
            return Err(LogError::BadOffset { offset, reason: "before the oldest record held" });
        }
        self.cursors.insert(name.to_owned(), offset);
        Ok(())
    }

    /// Forgets consumer `name`; it no longer holds segments back.
    pub fn remove_cursor(&mut self, name: &str) {
        self.cursors.remove(name);
    }

    /// Writes every cursor to disk, atomically and durably.
    pub fn save_cursors(&mut self) -> Result<(), LogError> {
        cursors::save(&self.dir, &self.cursors)
    }

    /// Deletes the sealed segments every cursor has passed, after saving
    /// the cursors; returns the bytes freed. With no cursor, nothing is
    /// deleted: nobody has said the records were consumed.
    pub fn reclaim(&mut self) -> Result<u64, LogError> {
        let Some(&lowest) = self.cursors.values().min() else { return Ok(0) };
        let mut doomed = Vec::new();
        while let Some(&(base, len)) = self.sealed.front() {
            if base + len > lowest {
                break;
            }
            self.sealed.pop_front();
            doomed.push((base, len));
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        self.save_cursors()?;
        let mut freed = 0;
        for (base, len) in doomed {
            let path = self.dir.join(segment::file_name(base));
            std::fs::remove_file(&path).map_err(LogError::io(&path))?;
            freed += len;
        }
        cursors::sync_dir(&self.dir)?;
        Ok(freed)
    }
}

impl Drop for Log {
    /// Hands buffered records to the operating system, as a `BufWriter`
    /// does: a log dropped on the way out loses nothing. (One that dies with
    /// its process loses what was not flushed, which is why owners sync
    /// before they acknowledge.)
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            tracing::error!(%error, "durable log: appended records lost at close");
        }
        if let Err(error) = self.active.trim_padding() {
            tracing::warn!(%error, "durable log: the last segment keeps its padding");
        }
    }
}

/// Bytes an unprivileged writer may still use on the file system of `dir`.
pub fn available_bytes(dir: &Path) -> Result<u64, LogError> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| LogError::Config(format!("{} contains a NUL byte", dir.display())))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and outlives the call; `stat` points
    // to memory the size and alignment of `statvfs`, which the call fills.
    let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(LogError::io(dir)(std::io::Error::last_os_error()));
    }
    // SAFETY: statvfs returned 0, so it initialised every field of `stat`.
    let stat = unsafe { stat.assume_init() };
    // The fields are 32-bit on some targets.
    #[allow(clippy::useless_conversion)]
    Ok(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

/// Opens the last segment; one cut short while it was being created (no
/// complete header, so no records) is created again.
fn open_last(dir: &Path, base: u64) -> Result<Segment, LogError> {
    let path = dir.join(segment::file_name(base));
    let len = std::fs::metadata(&path).map_err(LogError::io(&path))?.len();
    if len < segment::HEADER_LEN {
        tracing::warn!(segment = %path.display(), "durable log: recreating a segment cut short while it was created");
        std::fs::remove_file(&path).map_err(LogError::io(&path))?;
        let segment = Segment::create(dir, base)?;
        segment.sync()?;
        cursors::sync_dir(dir)?;
        return Ok(segment);
    }
    Segment::open(dir, base)
}

/// A segment must begin where the one before it ended.
fn check_follows(segment: &Segment, expected_base: Option<u64>) -> Result<(), LogError> {
    match expected_base {
        Some(expected) if expected != segment.base => Err(LogError::Corrupt {
            path: segment.path.clone(),
            position: 0,
            reason: format!(
                "begins at offset {} but the segment before it ends at {expected}",
                segment.base
            ),
        }),
        _ => Ok(()),
    }
}
