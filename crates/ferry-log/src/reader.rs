//! Reading single records by offset while a writer appends: what a
//! consumer that keeps offsets (a queue of messages left in the log) needs.
//!
//! A `Reader` has its own read-only handles, so it never waits for the
//! writer thread. It may read any record the writer has flushed: a flush
//! writes to the file, directly to the disk or into the page cache, and
//! either way every handle on the file reads what was written.

use crate::{record, segment, LogError};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Open segment files kept at most: a reader serving queues that reach far
/// back does not hold a descriptor for every segment of the log.
const OPEN_FILES: usize = 16;

#[derive(Debug)]
pub struct Reader {
    dir: PathBuf,
    max_record_bytes: usize,
    /// Segment bases found in the directory, refreshed when an offset lies
    /// beyond the last one.
    bases: Vec<u64>,
    open: BTreeMap<u64, File>,
}

impl Reader {
    pub fn new(dir: &Path, max_record_bytes: usize) -> Reader {
        Reader { dir: dir.to_owned(), max_record_bytes, bases: Vec::new(), open: BTreeMap::new() }
    }

    /// The payload of the record at `offset`, which must be one an append
    /// returned, flushed since and not reclaimed.
    pub fn read(&mut self, offset: u64) -> Result<Vec<u8>, LogError> {
        let base = self.segment_of(offset)?;
        if !self.open.contains_key(&base) {
            if self.open.len() >= OPEN_FILES {
                self.open.pop_first();
            }
            let path = self.dir.join(segment::file_name(base));
            let file = File::open(&path).map_err(LogError::io(&path))?;
            self.open.insert(base, file);
        }
        let file = &self.open[&base];
        let position = offset - base;
        let path = || self.dir.join(segment::file_name(base));
        let mut header = [0u8; record::HEADER_LEN];
        file.read_exact_at(&mut header, position).map_err(LogError::io(path()))?;
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if len > self.max_record_bytes {
            return Err(LogError::BadOffset { offset, reason: "not the start of a record" });
        }
        let mut bytes = vec![0u8; record::HEADER_LEN + len];
        file.read_exact_at(&mut bytes, position).map_err(LogError::io(path()))?;
        match record::decode(&bytes, self.max_record_bytes) {
            record::Decoded::Record { payload, .. } => Ok(payload.to_vec()),
            record::Decoded::Incomplete => {
                Err(LogError::BadOffset { offset, reason: "record not written yet" })
            }
            record::Decoded::Invalid(reason) => {
                Err(LogError::Corrupt { path: path(), position, reason: reason.to_string() })
            }
        }
    }

    /// The base of the segment holding `offset`.
    fn segment_of(&mut self, offset: u64) -> Result<u64, LogError> {
        if self.bases.last().is_none_or(|&last| offset >= last) {
            self.bases = segment_bases(&self.dir)?;
        }
        let index = self.bases.partition_point(|&base| base <= offset);
        match index.checked_sub(1).map(|i| self.bases[i]) {
            Some(base) if offset >= base + segment::HEADER_LEN => Ok(base),
            _ => Err(LogError::BadOffset { offset, reason: "in no segment of the log" }),
        }
    }
}

/// The segments in `dir`, by base offset.
pub(crate) fn segment_bases(dir: &Path) -> Result<Vec<u64>, LogError> {
    let mut bases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
        let entry = entry.map_err(LogError::io(dir))?;
        if let Some(base) = entry.file_name().to_str().and_then(segment::parse_name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}
