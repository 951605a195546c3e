//! One segment file: `{base:020}.seg`, a header, then records back to back.
//!
//! A record's offset in the log is the segment's base plus its position in
//! the file, so offsets grow across segments without gaps: the next
//! segment's base is this one's base plus its length.

use crate::record::{self, Decoded};
use crate::LogError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// `FERRYLOG`, the format version, and the segment's base offset.
pub const HEADER_LEN: u64 = 24;
const MAGIC: &[u8; 8] = b"FERRYLOG";
const VERSION: u32 = 1;

/// Bytes read per system call when scanning: large enough that a scan is
/// bound by the disk, small enough to keep in memory per reader.
const SCAN_CHUNK: usize = 1 << 20;

/// The file name of the segment starting at `base`; zero-padded so that
/// names sort in offset order.
pub fn file_name(base: u64) -> String {
    format!("{base:020}.seg")
}

/// The base offset a segment file name stands for.
pub fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// A segment open for appending.
#[derive(Debug)]
pub struct Segment {
    pub base: u64,
    pub path: PathBuf,
    file: File,
    /// The same file opened for direct I/O, which records are written
    /// through (`write_buffer` says why); none where the file system
    /// refuses direct I/O (tmpfs), and then `file` is used.
    direct: Option<File>,
    /// Bytes of records in the file, header included. The file may be
    /// longer: the zeros that pad the last block of a direct write.
    pub len: u64,
}

impl Segment {
    /// Creates the segment starting at `base`, with its header written.
    pub fn create(dir: &Path, base: u64) -> Result<Segment, LogError> {
        let path = dir.join(file_name(base));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(LogError::io(&path))?;
        file.write_all_at(&header(base), 0).map_err(LogError::io(&path))?;
        let direct = open_direct(&path)?;
        Ok(Segment { base, path, file, direct, len: HEADER_LEN })
    }

    /// Opens an existing segment and checks its header.
    pub fn open(dir: &Path, base: u64) -> Result<Segment, LogError> {
        let path = dir.join(file_name(base));
        let mut file =
            OpenOptions::new().read(true).write(true).open(&path).map_err(LogError::io(&path))?;
        let len = file.metadata().map_err(LogError::io(&path))?.len();
        let mut header = [0u8; HEADER_LEN as usize];
        let corrupt = |reason: &str| LogError::Corrupt {
            path: path.clone(),
            position: 0,
            reason: reason.to_owned(),
        };
        if len < HEADER_LEN {
            return Err(corrupt("shorter than a segment header"));
        }
        file.read_exact(&mut header).map_err(LogError::io(&path))?;
        if &header[..8] != MAGIC {
            return Err(corrupt("not a Ferry log segment"));
        }
        let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if version != VERSION {
            return Err(corrupt(&format!("segment format {version}, this Ferry reads {VERSION}")));
        }
        let mut stored = [0u8; 8];
        stored.copy_from_slice(&header[16..24]);
        if u64::from_le_bytes(stored) != base {
            return Err(corrupt("base offset in the header does not match the file name"));
        }
        let direct = open_direct(&path)?;
        Ok(Segment { base, path, file, direct, len })
    }

    /// The offset just past the last byte of this segment.
    pub fn end(&self) -> u64 {
        self.base + self.len
    }

    /// Writes whole blocks from the write buffer at file position
    /// `position`: directly to the disk where the file system allows it.
    pub fn write_blocks(&mut self, position: u64, blocks: &[u8]) -> Result<(), LogError> {
        let file = self.direct.as_ref().unwrap_or(&self.file);
        file.write_all_at(blocks, position).map_err(LogError::io(&self.path))
    }

    /// The `len` bytes of the file from `position` on.
    pub fn read_at(&self, position: u64, len: usize) -> Result<Vec<u8>, LogError> {
        let mut bytes = vec![0; len];
        self.file.read_exact_at(&mut bytes, position).map_err(LogError::io(&self.path))?;
        Ok(bytes)
    }

    /// Whether the `len` bytes of the file from `position` on are all
    /// zeros; read a chunk at a time, since a damaged tail can be long.
    pub fn zeros_at(&self, position: u64, len: u64) -> Result<bool, LogError> {
        let mut chunk = vec![0; SCAN_CHUNK.min(len as usize)];
        let mut at = position;
        while at < position + len {
            let want = chunk.len().min((position + len - at) as usize);
            let part = &mut chunk[..want];
            self.file.read_exact_at(part, at).map_err(LogError::io(&self.path))?;
            if part.iter().any(|&byte| byte != 0) {
                return Ok(false);
            }
            at += want as u64;
        }
        Ok(true)
    }

    /// Makes what was written durable (data, and the file length).
    pub fn sync(&self) -> Result<(), LogError> {
        self.file.sync_data().map_err(LogError::io(&self.path))
    }

    /// Cuts the zeros that pad the last write off the file, so that a log
    /// closed in order ends where its records do. Not synced: recovery
    /// knows padding when it sees it.
    pub fn trim_padding(&self) -> Result<(), LogError> {
        self.file.set_len(self.len).map_err(LogError::io(&self.path))
    }

    /// Cuts the file to `len` bytes, durably.
    pub fn truncate(&mut self, len: u64) -> Result<(), LogError> {
        self.file.set_len(len).map_err(LogError::io(&self.path))?;
        self.file.sync_all().map_err(LogError::io(&self.path))?;
        self.len = len;
        Ok(())
    }
}

/// A segment's header.
pub fn header(base: u64) -> [u8; HEADER_LEN as usize] {
    let mut header = [0u8; HEADER_LEN as usize];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[16..24].copy_from_slice(&base.to_le_bytes());
    header
}

/// The file at `path` opened for direct writes, or none if its file
/// system does not do direct I/O (EINVAL, as tmpfs answers).
fn open_direct(path: &Path) -> Result<Option<File>, LogError> {
    match OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path) {
        Ok(file) => Ok(Some(file)),
        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(error) => Err(LogError::io(path)(error)),
    }
}

/// Where a scan stopped.
#[derive(Debug, PartialEq, Eq)]
pub struct ScanEnd {
    /// File position just past the last intact record.
    pub valid_len: u64,
    /// Why the scan stopped before `until`, if it did: the bytes from
    /// `valid_len` on are not an intact record.
    pub damaged: Option<&'static str>,
}

/// Calls `visit(position, payload)` for each intact record of the file at
/// `path` from `from` (a record boundary) up to `until`, until it returns
/// false, and says where the records visited end.
pub fn scan(
    path: &Path,
    from: u64,
    until: u64,
    max_payload: usize,
    mut visit: impl FnMut(u64, &[u8]) -> bool,
) -> Result<ScanEnd, LogError> {
    let mut file = File::open(path).map_err(LogError::io(path))?;
    file.seek(SeekFrom::Start(from)).map_err(LogError::io(path))?;
    let mut buf: Vec<u8> = Vec::with_capacity(SCAN_CHUNK);
    let mut consumed = 0usize;
    let mut position = from;
    let mut eof = false;
    loop {
        match record::decode(&buf[consumed..], max_payload) {
            Decoded::Record { payload, size } if position + size as u64 <= until => {
                let more = visit(position, payload);
                consumed += size;
                position += size as u64;
                if !more {
                    return Ok(ScanEnd { valid_len: position, damaged: None });
                }
            }
            Decoded::Record { .. } => return Ok(ScanEnd { valid_len: position, damaged: None }),
            Decoded::Invalid(reason) => {
                return Ok(ScanEnd { valid_len: position, damaged: Some(reason) })
            }
            Decoded::Incomplete if eof || position >= until => {
                let damaged = (position < until && consumed < buf.len()).then_some("torn record");
                return Ok(ScanEnd { valid_len: position, damaged });
            }
            Decoded::Incomplete => {
                buf.drain(..consumed);
                consumed = 0;
                let want = (until - position).min(SCAN_CHUNK as u64) as usize;
                let start = buf.len();
                buf.resize(start + want.max(record::HEADER_LEN), 0);
                let read = file.read(&mut buf[start..]).map_err(LogError::io(path))?;
                buf.truncate(start + read);
                eof = read == 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_offset_and_parse_back() {
        assert_eq!(file_name(42), "00000000000000000042.seg");
        assert_eq!(parse_name(&file_name(u64::MAX)), Some(u64::MAX));
        assert!(file_name(9) < file_name(10));
        for bad in ["42.seg", "0000000000000000004x.seg", "00000000000000000042.log", "cursors"] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_header_from_elsewhere_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        Segment::create(dir.path(), 24).unwrap();
        std::fs::rename(dir.path().join(file_name(24)), dir.path().join(file_name(48))).unwrap();
        let error = Segment::open(dir.path(), 48).unwrap_err().to_string();
        assert!(error.contains("does not match the file name"), "{error}");
        std::fs::write(dir.path().join(file_name(0)), b"not a log at all, but long").unwrap();
        let error = Segment::open(dir.path(), 0).unwrap_err().to_string();
        assert!(error.contains("not a Ferry log segment"), "{error}");
    }
}
