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

/// The longest stretch of a segment `read_many` reads at once. Records an
/// endpoint reads lie close together, with other records between them;
/// one read of a stretch replaces two per record (header, then record),
/// and a mebibyte keeps the buffer small while covering a 256 KiB batch
/// with what lies between its records.
const SPAN_BYTES: u64 = 1 << 20;

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
        let file = open_segment(&mut self.open, &self.dir, base)?;
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

    /// The payloads of the records at `offsets`, in that order, each as
    /// [`Reader::read`] would give it, read a stretch of the file at a time
    /// (offsets in ascending order close together share one read).
    pub fn read_many(&mut self, offsets: &[u64]) -> Vec<Result<Vec<u8>, LogError>> {
        let mut payloads = Vec::with_capacity(offsets.len());
        let mut rest = offsets;
        while let Some(&first) = rest.first() {
            let run = match self.segment_of(first) {
                Ok(base) => {
                    let segment_end = self.bases.iter().find(|&&b| b > base).copied();
                    rest.iter()
                        .take_while(|&&offset| {
                            offset >= first
                                && offset - first < SPAN_BYTES
                                && segment_end.is_none_or(|end| offset < end)
                        })
                        .count()
                }
                Err(_) => 1,
            };
            let (these, after) = rest.split_at(run);
            if run == 1 {
                payloads.push(self.read(first));
            } else {
                match self.read_span(these) {
                    Ok(read) => payloads.extend(read),
                    Err(error) => {
                        payloads.push(Err(error));
                        // The rest of the run alone, each with its own error.
                        payloads.extend(these[1..].iter().map(|&offset| self.read(offset)));
                    }
                }
            }
            rest = after;
        }
        payloads
    }

    /// Records at `offsets`, ascending and in one segment within
    /// `SPAN_BYTES`, from one read of the stretch they cover (a second one
    /// for the end of the last record).
    fn read_span(&mut self, offsets: &[u64]) -> Result<Vec<Result<Vec<u8>, LogError>>, LogError> {
        let (first, last) = (offsets[0], offsets[offsets.len() - 1]);
        let base = self.segment_of(first)?;
        let file = open_segment(&mut self.open, &self.dir, base)?;
        let path = || self.dir.join(segment::file_name(base));
        let mut span = vec![0u8; (last - first) as usize + record::HEADER_LEN];
        file.read_exact_at(&mut span, first - base).map_err(LogError::io(path()))?;
        let header = &span[span.len() - record::HEADER_LEN..];
        let last_len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if last_len <= self.max_record_bytes {
            let have = span.len();
            span.resize(have + last_len, 0);
            file.read_exact_at(&mut span[have..], last - base + record::HEADER_LEN as u64)
                .map_err(LogError::io(path()))?;
        }
        Ok(offsets
            .iter()
            .map(|&offset| {
                let at = (offset - first) as usize;
                match record::decode(&span[at..], self.max_record_bytes) {
                    record::Decoded::Record { payload, .. } => Ok(payload.to_vec()),
                    record::Decoded::Incomplete => {
                        Err(LogError::BadOffset { offset, reason: "record not written yet" })
                    }
                    record::Decoded::Invalid(reason) => Err(LogError::Corrupt {
                        path: path(),
                        position: offset - base,
                        reason: reason.to_string(),
                    }),
                }
            })
            .collect())
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

/// The open handle of the segment at `base` in `dir`, opened if it is not
/// among `open`.
fn open_segment<'a>(
    open: &'a mut BTreeMap<u64, File>,
    dir: &Path,
    base: u64,
) -> Result<&'a File, LogError> {
    if !open.contains_key(&base) {
        if open.len() >= OPEN_FILES {
            open.pop_first();
        }
        let path = dir.join(segment::file_name(base));
        let file = File::open(&path).map_err(LogError::io(&path))?;
        open.insert(base, file);
    }
    Ok(&open[&base])
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
