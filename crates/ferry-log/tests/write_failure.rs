//! A write that fails (here: past the file-size limit, as a full disk
//! would) loses exactly the records appended since the last flush or sync:
//! the caller is told, later appends are refused until it has been, what
//! was stored before stays, and the log goes on once writes succeed again.
//!
//! A test binary of its own: the file-size limit is per process, and it
//! would fail the writes of any test running beside it.

use ferry_log::{Config, Log};

/// Sets the soft file-size limit of this process.
fn limit_file_size(bytes: u64) {
    let limit = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads the struct, which lives across the call; the
    // hard limit stays infinite, so the soft one can be raised again.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &limit) }, 0);
}

#[test]
fn a_failed_write_loses_only_what_was_not_yet_stored() {
    // A write past the limit raises SIGXFSZ, which by default ends the
    // process; ignored, the write fails with EFBIG instead.
    // SAFETY: SIG_IGN is a valid disposition, and no handler code runs.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let dir = tempfile::tempdir().unwrap();
    let config = Config { segment_bytes: 1 << 20, max_record_bytes: 64 << 10 };
    let (mut log, _) = Log::open(dir.path(), config).unwrap();
    let record = |i: u8| vec![i; 10_000];

    let stored = [log.append(&record(1)).unwrap(), log.append(&record(2)).unwrap()];
    log.sync().unwrap();

    limit_file_size(64 << 10);
    // Four more fit in the write buffer; the sync has to write them past
    // the limit and fails.
    for i in 3..=8 {
        log.append(&record(i)).unwrap();
    }
    assert!(log.sync().is_err(), "a sync whose write failed reports it");
    assert_eq!(log.end(), stored[1] + 8 + 10_000, "cut back to the last stored record");

    // A record bigger than the write buffer's room makes appends write
    // on their own; when that fails, later appends are refused until a
    // flush or sync has reported the loss.
    let big = vec![9u8; 60 << 10];
    let mut failed = false;
    for _ in 0..40 {
        if log.append(&big).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "appends that write past the limit fail");
    assert!(log.append(&record(10)).is_err(), "refused until the loss is reported");
    assert!(log.flush().is_err(), "the flush reports the loss");

    limit_file_size(libc::RLIM_INFINITY);
    let after = log.append(&record(11)).unwrap();
    log.sync().unwrap();
    drop(log);

    let (mut log, recovery) = Log::open(dir.path(), config).unwrap();
    assert_eq!(recovery.truncated_bytes, 0);
    let start = log.start();
    let records = log.read(start, usize::MAX).unwrap();
    let offsets: Vec<u64> = records.iter().map(|(offset, _)| *offset).collect();
    assert_eq!(offsets, [stored[0], stored[1], after], "exactly what was stored");
    assert_eq!(records[2].1, record(11));
}
