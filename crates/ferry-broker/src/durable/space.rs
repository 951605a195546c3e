//! Disk limits of the durable state: a cap on the log's size and a
//! free-space watermark. Past either, the broker refuses new durable work
//! (0x97 Quota exceeded) rather than fill the disk: the IoT Edge article's
//! gateway whose operating system died when its store took the last byte.
//!
//! The writer thread measures after every batch; the publish path only
//! reads a flag. While the flag is up, the path re-measures free space at
//! most once a second itself, since a full broker may write nothing that
//! would let the writer notice that space came back.

use ferry_log::Log;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often free space is measured (a `statvfs`) while there is room.
const CHECK_EVERY: Duration = Duration::from_millis(100);
/// How often a full store re-measures on its own.
const RECHECK_FULL_EVERY: Duration = Duration::from_secs(1);

pub struct Space {
    dir: PathBuf,
    /// 0: no cap but the watermark.
    max_log_bytes: u64,
    min_free_bytes: u64,
    started: Instant,
    log_bytes: AtomicU64,
    segments: AtomicU64,
    free_bytes: AtomicU64,
    full: AtomicBool,
    /// Milliseconds after `started` of the last free-space measurement.
    checked_at_ms: AtomicU64,
}

impl Space {
    pub fn new(dir: PathBuf, max_log_bytes: u64, min_free_bytes: u64) -> Space {
        let space = Space {
            dir,
            max_log_bytes,
            min_free_bytes,
            started: Instant::now(),
            log_bytes: AtomicU64::new(0),
            segments: AtomicU64::new(0),
            free_bytes: AtomicU64::new(u64::MAX),
            full: AtomicBool::new(false),
            checked_at_ms: AtomicU64::new(0),
        };
        space.measure_free();
        space
    }

    /// On the writer thread, after a batch.
    pub fn measure(&self, log: &Log) {
        self.log_bytes.store(log.size_bytes(), Ordering::Relaxed);
        self.segments.store(log.segments() as u64, Ordering::Relaxed);
        if self.since_check() >= CHECK_EVERY {
            self.measure_free();
        }
        self.decide();
    }

    /// Whether new durable work may be taken.
    pub fn has_room(&self) -> bool {
        if self.full.load(Ordering::Relaxed) && self.since_check() >= RECHECK_FULL_EVERY {
            self.measure_free();
            self.decide();
        }
        !self.full.load(Ordering::Relaxed)
    }

    /// For readiness: measures free space now, and says whether there is
    /// room.
    pub fn has_room_now(&self) -> bool {
        self.measure_free();
        self.decide();
        !self.full.load(Ordering::Relaxed)
    }

    /// For readiness: whether a file can be written and synced in the
    /// log's directory (a read-only remount, a full inode table, lost
    /// permissions), as the log's next segment would need.
    pub fn probe_writable(&self) -> std::io::Result<()> {
        use std::io::Write;
        let probe = self.dir.join(".ready-probe");
        let mut file = std::fs::File::create(&probe)?;
        file.write_all(b"ready")?;
        file.sync_data()?;
        std::fs::remove_file(probe)
    }

    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    pub fn log_bytes(&self) -> u64 {
        self.log_bytes.load(Ordering::Relaxed)
    }

    pub fn segments(&self) -> u64 {
        self.segments.load(Ordering::Relaxed)
    }

    pub fn free_bytes(&self) -> u64 {
        self.free_bytes.load(Ordering::Relaxed)
    }

    fn since_check(&self) -> Duration {
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(now_ms.saturating_sub(self.checked_at_ms.load(Ordering::Relaxed)))
    }

    fn measure_free(&self) {
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.checked_at_ms.store(now_ms, Ordering::Relaxed);
        match ferry_log::available_bytes(&self.dir) {
            Ok(free) => self.free_bytes.store(free, Ordering::Relaxed),
            Err(error) => tracing::warn!(%error, "durable log: cannot measure free disk space"),
        }
    }

    fn decide(&self) {
        let over_cap = self.max_log_bytes > 0 && self.log_bytes() >= self.max_log_bytes;
        let low_disk = self.free_bytes() < self.min_free_bytes;
        let full = over_cap || low_disk;
        if self.full.swap(full, Ordering::Relaxed) != full {
            if full {
                tracing::warn!(
                    log_bytes = self.log_bytes(),
                    max_disk_bytes = self.max_log_bytes,
                    free_bytes = self.free_bytes(),
                    min_free_disk_bytes = self.min_free_bytes,
                    "durable log full: refusing messages that must be stored (0x97) until space returns"
                );
            } else {
                tracing::info!(
                    log_bytes = self.log_bytes(),
                    free_bytes = self.free_bytes(),
                    "durable log has room again"
                );
            }
        }
    }
}
