//! What can go wrong with the log, naming the file and the place.

use std::io;
use std::path::PathBuf;
use thiserror::Error;

/// A failed log operation. Nothing already stored is changed by a failed
/// append or sync: the caller may report it and keep reading.
#[derive(Debug, Error)]
pub enum LogError {
    /// A system call on a log file failed (disk full, EIO, permissions).
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// A file is not what the log wrote: a bad header, a gap between
    /// segments, a damaged record where only intact ones may be.
    #[error("{path}: corrupt at byte {position}: {reason}")]
    Corrupt { path: PathBuf, position: u64, reason: String },
    /// A record over the configured limit.
    #[error("record of {len} bytes is over the {max}-byte limit")]
    RecordTooLarge { len: usize, max: usize },
    /// An offset that is not the start of a record the log still holds.
    #[error("offset {offset} is not a record in this log ({reason})")]
    BadOffset { offset: u64, reason: &'static str },
    /// Options that contradict each other or a limit.
    #[error("invalid log configuration: {0}")]
    Config(String),
}

impl LogError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, source }
    }
}
