//! Snapshots: the ledger written out as records, so that recovery replays
//! a snapshot and the log after it instead of the whole log, and the log
//! before it can be deleted.
//!
//! A snapshot is itself a `ferry-log` log (CRC-checked records, nothing new
//! to get wrong) in a directory named for the log offset it covers,
//! `snapshot-{offset:020}`. It is written under a `.tmp` name, synced, and
//! renamed: a directory with the final name is complete. Recovery takes the
//! one with the highest offset and deletes the rest.

use super::record::Record;
use super::StoreError;
use ferry_log::Log;
use std::path::{Path, PathBuf};

const PREFIX: &str = "snapshot-";
const TMP_SUFFIX: &str = ".tmp";

/// Writes `records` as the snapshot at `offset` and deletes older ones.
pub fn write(
    dir: &Path,
    offset: u64,
    records: impl Iterator<Item = Record>,
) -> Result<(), StoreError> {
    let name = format!("{PREFIX}{offset:020}");
    let done = dir.join(&name);
    if done.exists() {
        // Written at this offset already (a restart with nothing stored
        // since the last): the same log up to the same offset folds into
        // the same state.
        return Ok(());
    }
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(StoreError::io(&tmp))?;
    }
    {
        let (mut log, _) = Log::open(&tmp, config())?;
        for record in records {
            log.append(&record.encode())?;
        }
        log.sync()?;
    }
    std::fs::rename(&tmp, &done).map_err(StoreError::io(&done))?;
    sync_dir(dir)?;
    for (older, path) in list(dir)? {
        if older < offset {
            std::fs::remove_dir_all(&path).map_err(StoreError::io(&path))?;
        }
    }
    Ok(())
}

/// Hands the records of the newest complete snapshot to `apply`, in order,
/// and returns its offset. Leftovers (older snapshots, a `.tmp` cut short
/// by a crash) are deleted.
pub fn load_latest(dir: &Path, mut apply: impl FnMut(Record)) -> Result<Option<u64>, StoreError> {
    std::fs::create_dir_all(dir).map_err(StoreError::io(dir))?;
    for entry in std::fs::read_dir(dir).map_err(StoreError::io(dir))? {
        let path = entry.map_err(StoreError::io(dir))?.path();
        if path.to_string_lossy().ends_with(TMP_SUFFIX) {
            std::fs::remove_dir_all(&path).map_err(StoreError::io(&path))?;
        }
    }
    let mut snapshots = list(dir)?;
    snapshots.sort_unstable();
    let Some((offset, path)) = snapshots.pop() else { return Ok(None) };
    for (_, older) in snapshots {
        std::fs::remove_dir_all(&older).map_err(StoreError::io(&older))?;
    }
    let (mut log, _) = Log::open(&path, config())?;
    let mut from = log.start();
    loop {
        let batch = log.read(from, 4096)?;
        let Some((last, payload)) = batch.last() else { break };
        from = ferry_log::next_offset(*last, payload);
        for (_, payload) in &batch {
            apply(Record::decode(payload)?);
        }
    }
    Ok(Some(offset))
}

fn config() -> ferry_log::Config {
    ferry_log::Config {
        segment_bytes: ferry_log::MAX_SEGMENT_BYTES,
        ..ferry_log::Config::default()
    }
}

/// The complete snapshots in `dir`, by offset.
fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(StoreError::io(dir))? {
        let entry = entry.map_err(StoreError::io(dir))?;
        let name = entry.file_name();
        let offset = name
            .to_str()
            .and_then(|name| name.strip_prefix(PREFIX))
            .and_then(|offset| offset.parse::<u64>().ok());
        if let Some(offset) = offset {
            found.push((offset, entry.path()));
        }
    }
    Ok(found)
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::File::open(dir).and_then(|file| file.sync_all()).map_err(StoreError::io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(n: u64) -> Vec<Record> {
        (0..n).map(|session| Record::SessionEnded { session }).collect()
    }

    #[test]
    fn the_newest_snapshot_wins_and_leftovers_are_cleared() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_latest(dir.path(), |_| ()).unwrap().is_none());
        write(dir.path(), 100, records(3).into_iter()).unwrap();
        write(dir.path(), 500, records(5).into_iter()).unwrap();
        // A snapshot cut short by a crash, before its rename.
        std::fs::create_dir(dir.path().join("snapshot-00000000000000000900.tmp")).unwrap();
        // Again at the same offset (a restart with nothing new): a no-op.
        write(dir.path(), 500, records(5).into_iter()).unwrap();
        let mut loaded = Vec::new();
        let offset = load_latest(dir.path(), |record| loaded.push(record)).unwrap();
        assert_eq!((offset, loaded), (Some(500), records(5)));
        let left: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec!["snapshot-00000000000000000500"]);
    }
}
