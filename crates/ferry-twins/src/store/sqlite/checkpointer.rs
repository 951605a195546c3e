//! WAL checkpoints on their own thread, off the writer's path.
//!
//! SQLite checkpoints on the committing connection by default: every
//! 1,000 pages of WAL, the commit that crosses the mark also copies the
//! pages back into the database file and fsyncs it. Measured on modifies,
//! that was 28% of the writer thread's time, and every caller in those
//! groups waited for it. Here the writer's WAL hook only wakes a second
//! connection on its own thread, which checkpoints in `PASSIVE` mode:
//! beside the writer, never blocking it.
//!
//! SQLite starts the WAL over only when a write transaction begins with
//! every frame already copied back. Under steady writes the writer begins
//! its next transaction the moment it commits, before the checkpointer has
//! copied that commit, so the WAL would only grow. At [`WAL_LIMIT`] the
//! writer therefore checkpoints itself, right after its commit: the
//! checkpointer has copied all but the last few commits by then, so the
//! writer copies little, and its next transaction starts the WAL over.

use super::backend;
use crate::store::StoreError;
use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::Connection;
use std::path::Path;
use std::sync::mpsc;

/// WAL pages at which the checkpointer is woken: SQLite's own
/// autocheckpoint mark.
const CHECKPOINT_AT: i32 = 1_000;

/// WAL pages at which the writer checkpoints itself: 16 MiB at 4 KiB
/// pages, about the most disk the WAL takes beside the database. Four
/// times the wake-up mark, so the writer checkpoints once for every few
/// hundred commits, and then only what the checkpointer has not reached.
const WAL_LIMIT: i32 = 4_096;

/// The WAL file's size when it starts over, at most: twice the limit at
/// SQLite's default page size, which the store keeps.
pub(super) const WAL_FILE_LIMIT: u64 = WAL_LIMIT as u64 * 2 * 4_096;

/// Starts the checkpointer for the database at `path` and hands it the
/// writer's commits.
pub(super) fn start(writer: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let checkpointer =
        super::page_cache::open(path, rusqlite::OpenFlags::default()).map_err(backend)?;
    // A connection learns that the database is in WAL mode when it first
    // reads it; until then a checkpoint on it does nothing.
    checkpointer
        .query_row("PRAGMA journal_mode", [], |row| row.get::<_, String>(0))
        .map_err(backend)?;
    // One wake-up waiting is enough: a checkpoint copies everything
    // committed before it starts.
    let (wake, woken) = mpsc::sync_channel::<()>(1);
    std::thread::Builder::new()
        .name("twins-checkpoint".into())
        .spawn(move || {
            while woken.recv().is_ok() {
                report(checkpointer.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE));
            }
        })
        .map_err(|error| StoreError::Backend(format!("starting the checkpointer: {error}")))?;
    // A WAL that outgrew the limit (while a long read held it) is cut back
    // to twice the limit when it starts over, rather than kept at its most.
    writer.pragma_update(None, "journal_size_limit", WAL_FILE_LIMIT).map_err(backend)?;
    // Replacing the WAL hook also turns SQLite's autocheckpoint off. The
    // hook runs after the commit: an error returned from it would report
    // a committed transaction as failed, so it never returns one.
    writer
        .wal_hook(Some(move |wal: &mut Wal, pages: i32| {
            if pages >= WAL_LIMIT {
                report(wal.checkpoint_v2(CheckpointMode::PASSIVE));
            } else if pages >= CHECKPOINT_AT {
                let _ = wake.try_send(());
            }
            Ok(())
        }))
        .map_err(backend)
}

/// Logs a failed checkpoint. Busy is no failure: the other side was
/// checkpointing at that moment, and the next commit past the mark tries
/// again.
fn report(result: rusqlite::Result<(i32, i32)>) {
    match result {
        Ok(_) => {}
        Err(rusqlite::Error::SqliteFailure(failure, _))
            if failure.code == rusqlite::ErrorCode::DatabaseBusy => {}
        Err(error) => tracing::warn!(%error, "twins store: a WAL checkpoint failed"),
    }
}
