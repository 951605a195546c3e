//! Consumer cursors: how far each named consumer has read, in one small
//! file replaced atomically (write a temporary file, sync it, rename it
//! over the old one, sync the directory), so a crash leaves either the old
//! cursors or the new ones, never a mix.
//!
//! Format: `FERRYCUR`, version (u32), count (u32), then per cursor the name
//! length (u16), the name and the offset (u64), and a CRC32C of all of it;
//! little-endian throughout.

use crate::LogError;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

pub const FILE: &str = "cursors";
const TEMPORARY: &str = "cursors.tmp";
const MAGIC: &[u8; 8] = b"FERRYCUR";
const VERSION: u32 = 1;

/// Longest cursor name: names are consumer ids, not payloads.
pub const MAX_NAME_BYTES: usize = 255;

/// Reads the cursors in `dir`; none if the file does not exist yet.
pub fn load(dir: &Path) -> Result<BTreeMap<String, u64>, LogError> {
    let path = dir.join(FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(error) => return Err(LogError::Io { path, source: error }),
    };
    let corrupt = |position: usize, reason: &str| LogError::Corrupt {
        path: path.clone(),
        position: position as u64,
        reason: reason.to_owned(),
    };
    let Some((body, crc)) = bytes.split_last_chunk::<4>() else {
        return Err(corrupt(0, "too short"));
    };
    if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
        return Err(corrupt(body.len(), "CRC mismatch"));
    }
    let mut reader = Reader { bytes: body, position: 0 };
    if reader.take(8) != Some(MAGIC.as_slice()) {
        return Err(corrupt(0, "not a Ferry cursor file"));
    }
    let version = reader.u32().ok_or_else(|| corrupt(8, "truncated"))?;
    if version != VERSION {
        return Err(corrupt(8, &format!("cursor format {version}, this Ferry reads {VERSION}")));
    }
    let count = reader.u32().ok_or_else(|| corrupt(12, "truncated"))?;
    let mut cursors = BTreeMap::new();
    for _ in 0..count {
        let at = reader.position;
        let name_len = reader.u16().ok_or_else(|| corrupt(at, "truncated"))?;
        let name = reader.take(usize::from(name_len)).ok_or_else(|| corrupt(at, "truncated"))?;
        let name = std::str::from_utf8(name).map_err(|_| corrupt(at, "name is not UTF-8"))?;
        let offset = reader.u64().ok_or_else(|| corrupt(at, "truncated"))?;
        cursors.insert(name.to_owned(), offset);
    }
    if reader.position != body.len() {
        return Err(corrupt(reader.position, "bytes after the last cursor"));
    }
    Ok(cursors)
}

/// Replaces the cursors in `dir` with `cursors`, durably.
pub fn save(dir: &Path, cursors: &BTreeMap<String, u64>) -> Result<(), LogError> {
    let mut bytes = Vec::with_capacity(16 + cursors.len() * 32);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&(cursors.len() as u32).to_le_bytes());
    for (name, offset) in cursors {
        // Names are checked against MAX_NAME_BYTES when set.
        bytes.extend_from_slice(&(name.len() as u16).to_le_bytes());
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(&offset.to_le_bytes());
    }
    bytes.extend_from_slice(&crc32c::crc32c(&bytes).to_le_bytes());

    let temporary = dir.join(TEMPORARY);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temporary)
        .map_err(LogError::io(&temporary))?;
    file.write_all(&bytes).map_err(LogError::io(&temporary))?;
    file.sync_all().map_err(LogError::io(&temporary))?;
    let path = dir.join(FILE);
    std::fs::rename(&temporary, &path).map_err(LogError::io(&path))?;
    sync_dir(dir)
}

/// Makes the entries of `dir` (new, renamed, removed files) durable.
pub fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(LogError::io(dir))
}

struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.position..self.position.checked_add(n)?)?;
        self.position += n;
        Some(slice)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        Some(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_cursors_load_back_and_a_missing_file_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_empty());
        let cursors = BTreeMap::from([("a".to_owned(), 24), ("sub/β".to_owned(), u64::MAX)]);
        save(dir.path(), &cursors).unwrap();
        assert_eq!(load(dir.path()).unwrap(), cursors);
        save(dir.path(), &BTreeMap::new()).unwrap();
        assert!(load(dir.path()).unwrap().is_empty(), "replaced, not merged");
    }

    #[test]
    fn a_damaged_file_is_refused_not_guessed() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &BTreeMap::from([("a".to_owned(), 24)])).unwrap();
        let path = dir.path().join(FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let error = load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("CRC mismatch"), "{error}");
    }
}
