//! The log against the file system: appends, reads, reopening, torn and
//! damaged tails, cursors and reclaiming, and a property test against an
//! in-memory model.

use ferry_log::{next_offset, Config, Log, LogError};
use proptest::prelude::*;
use std::io::Write;
use std::path::Path;

/// Small segments, so that a few records span several.
const SMALL: Config = Config { segment_bytes: 256, max_record_bytes: 100 };

fn payload(i: usize) -> Vec<u8> {
    format!("record {i} ").repeat(1 + i % 4).into_bytes()
}

fn all(log: &mut Log) -> Vec<Vec<u8>> {
    let start = log.start();
    log.read(start, usize::MAX).unwrap().into_iter().map(|(_, p)| p).collect()
}

fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files
}

#[test]
fn appends_span_segments_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let expected: Vec<Vec<u8>> = (0..40).map(payload).collect();
    let offsets: Vec<u64> = {
        let (mut log, recovery) = Log::open(dir.path(), SMALL).unwrap();
        assert_eq!(recovery.segments, 1);
        let offsets = expected.iter().map(|p| log.append(p).unwrap()).collect();
        assert!(log.segments() > 5, "small segments roll: {}", log.segments());
        assert_eq!(log.sync().unwrap(), log.end());
        offsets
    };
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets only grow");

    let (mut log, recovery) = Log::open(dir.path(), SMALL).unwrap();
    assert_eq!(recovery.truncated_bytes, 0);
    assert!(recovery.tail_records > 0);
    assert_eq!(all(&mut log), expected);
    // Reading from any returned offset starts at that record, and the
    // offset after one record is the next one's, across segments too.
    let from = log.read(offsets[17], 3).unwrap();
    assert_eq!(from.iter().map(|(o, _)| *o).collect::<Vec<_>>(), offsets[17..20]);
    for (i, pair) in offsets.windows(2).enumerate() {
        let after = next_offset(pair[0], &expected[i]);
        assert_eq!(log.read(after, 1).unwrap()[0].0, pair[1], "after record {i}");
    }
    // Appends after reopening go on where the log ended.
    let next = log.append(b"after").unwrap();
    assert!(next > offsets[39]);
    assert_eq!(log.read(next, 10).unwrap(), vec![(next, b"after".to_vec())]);
}

#[test]
fn a_torn_tail_is_cut_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open(dir.path(), Config::default()).unwrap();
        for i in 0..10 {
            log.append(&payload(i)).unwrap();
        }
        log.sync().unwrap();
    }
    // A record whose header announces 90 bytes, of which 5 reached the disk.
    let last = segment_files(dir.path()).pop().unwrap();
    let mut torn = Vec::new();
    torn.extend_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
    torn.extend_from_slice(&90u32.to_le_bytes());
    torn.extend_from_slice(b"12345");
    let before = std::fs::metadata(&last).unwrap().len();
    std::fs::OpenOptions::new().append(true).open(&last).unwrap().write_all(&torn).unwrap();

    let (mut log, recovery) = Log::open(dir.path(), Config::default()).unwrap();
    assert_eq!(recovery.truncated_bytes, torn.len() as u64);
    assert_eq!(recovery.tail_records, 10);
    assert_eq!(std::fs::metadata(&last).unwrap().len(), before, "cut back to the last record");
    assert_eq!(all(&mut log), (0..10).map(payload).collect::<Vec<_>>());
    let offset = log.append(b"next").unwrap();
    log.sync().unwrap();
    drop(log);
    let (mut log, recovery) = Log::open(dir.path(), Config::default()).unwrap();
    assert_eq!(recovery.truncated_bytes, 0);
    assert_eq!(log.read(offset, 1).unwrap(), vec![(offset, b"next".to_vec())]);
}

#[test]
fn a_damaged_record_in_the_tail_ends_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    let offsets: Vec<u64> = {
        let (mut log, _) = Log::open(dir.path(), Config::default()).unwrap();
        let offsets = (0..6).map(|i| log.append(&payload(i)).unwrap()).collect();
        log.sync().unwrap();
        offsets
    };
    let last = segment_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&last).unwrap();
    // Flip a payload byte of the fourth record: it and everything after go.
    bytes[offsets[3] as usize + 9] ^= 0x40;
    std::fs::write(&last, &bytes).unwrap();

    let (mut log, recovery) = Log::open(dir.path(), Config::default()).unwrap();
    assert_eq!(recovery.tail_records, 3);
    assert_eq!(recovery.truncated_bytes, bytes.len() as u64 - offsets[3]);
    assert_eq!(all(&mut log), (0..3).map(payload).collect::<Vec<_>>());
    assert_eq!(log.end(), offsets[3]);
}

#[test]
fn recovery_scans_only_the_last_segment() {
    // Damage in a sealed segment is not looked for at open (sealed segments
    // were synced before the next began); a read that meets it says so.
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
        for i in 0..40 {
            log.append(&payload(i)).unwrap();
        }
        log.sync().unwrap();
    }
    let first = segment_files(dir.path()).remove(0);
    let mut bytes = std::fs::read(&first).unwrap();
    let at = bytes.len() - 1;
    bytes[at] ^= 1;
    std::fs::write(&first, &bytes).unwrap();

    let (mut log, recovery) = Log::open(dir.path(), SMALL).unwrap();
    assert_eq!(recovery.truncated_bytes, 0);
    let start = log.start();
    let error = log.read(start, usize::MAX).unwrap_err();
    assert!(matches!(error, LogError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains(&first.display().to_string()), "{error}");
}

#[test]
fn a_missing_segment_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
        for i in 0..40 {
            log.append(&payload(i)).unwrap();
        }
    }
    let files = segment_files(dir.path());
    std::fs::remove_file(&files[2]).unwrap();
    let error = Log::open(dir.path(), SMALL).unwrap_err().to_string();
    assert!(error.contains(&files[3].display().to_string()), "{error}");
    assert!(error.contains("segment before it ends"), "{error}");
}

#[test]
fn a_segment_cut_short_while_being_created_is_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let end = {
        let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
        for i in 0..10 {
            log.append(&payload(i)).unwrap();
        }
        log.sync().unwrap();
        log.end()
    };
    // The crash came after the new file's name, before its header.
    let last = segment_files(dir.path()).pop().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    let base: u64 = last.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let next = dir.path().join(format!("{:020}.seg", base + len));
    std::fs::write(&next, b"FERRY").unwrap();

    let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
    assert_eq!(all(&mut log), (0..10).map(payload).collect::<Vec<_>>());
    assert!(log.append(b"x").unwrap() >= end);
}

#[test]
fn cursors_hold_segments_back_until_every_consumer_has_passed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
    let offsets: Vec<u64> = (0..40).map(|i| log.append(&payload(i)).unwrap()).collect();
    let segments = log.segments();
    assert_eq!(log.reclaim().unwrap(), 0, "no consumer said anything was read");

    log.set_cursor("fast", offsets[35]).unwrap();
    log.set_cursor("slow", offsets[2]).unwrap();
    assert_eq!(log.reclaim().unwrap(), 0, "the slow consumer still needs the first segment");
    log.set_cursor("slow", offsets[30]).unwrap();
    let size = log.size_bytes();
    let freed = log.reclaim().unwrap();
    assert!(freed > 0 && log.segments() < segments, "{freed} bytes, {} segments", log.segments());
    assert_eq!(log.size_bytes(), size - freed);
    assert!(log.start() <= offsets[30]);
    let rest = log.read(offsets[30], usize::MAX).unwrap();
    assert_eq!(rest.len(), 10);
    assert!(matches!(log.read(offsets[0], 1), Err(LogError::BadOffset { .. })));
    assert!(log.set_cursor("late", offsets[0]).is_err(), "a reclaimed record cannot be a cursor");
    assert!(log.set_cursor("x", log.end() + 1).is_err(), "a cursor cannot run ahead");
    assert!(log.set_cursor(&"n".repeat(256), 0).is_err(), "names are bounded");
    drop(log);

    let (log, _) = Log::open(dir.path(), SMALL).unwrap();
    assert_eq!(log.cursor("slow"), Some(offsets[30]));
    assert_eq!(log.cursor("fast"), Some(offsets[35]));
    assert!(log.start() <= offsets[30] && log.start() > offsets[0]);
}

#[test]
fn records_over_the_limit_and_bad_configs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
    assert!(matches!(log.append(&[0; 101]), Err(LogError::RecordTooLarge { len: 101, max: 100 })));
    log.append(&[0; 100]).unwrap();
    let too_big = Config { segment_bytes: 100, max_record_bytes: 100 };
    assert!(matches!(Log::open(dir.path(), too_big), Err(LogError::Config(_))));
    let huge = Config { segment_bytes: 2 << 30, max_record_bytes: 100 };
    assert!(matches!(Log::open(dir.path(), huge), Err(LogError::Config(_))));
}

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<u8>),
    Sync,
    Reopen,
    /// The process dies with everything flushed: the last segment keeps
    /// the padding of its last direct write.
    Crash,
    Cursor(usize),
    Reclaim,
    Read(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 0..100).prop_map(Op::Append),
        1 => Just(Op::Sync),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => any::<usize>().prop_map(Op::Cursor),
        1 => Just(Op::Reclaim),
        2 => (any::<usize>(), 1..20usize).prop_map(|(at, n)| Op::Read(at, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the sequence of operations, the log holds exactly the
    /// records appended, in order, from the oldest one a cursor still needs.
    #[test]
    fn the_log_behaves_like_a_list(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
        let mut model: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut cursor: Option<u64> = None;
        for op in ops {
            match op {
                Op::Append(payload) => {
                    let offset = log.append(&payload).unwrap();
                    prop_assert!(model.last().is_none_or(|(last, _)| *last < offset));
                    model.push((offset, payload));
                }
                Op::Sync => {
                    prop_assert_eq!(log.sync().unwrap(), log.end());
                }
                Op::Reopen => {
                    drop(log);
                    let (reopened, recovery) = Log::open(dir.path(), SMALL).unwrap();
                    prop_assert_eq!(recovery.truncated_bytes, 0);
                    log = reopened;
                }
                Op::Crash => {
                    log.flush().unwrap();
                    std::mem::forget(log);
                    let (reopened, recovery) = Log::open(dir.path(), SMALL).unwrap();
                    prop_assert_eq!(recovery.truncated_bytes, 0, "padding is not damage");
                    log = reopened;
                }
                Op::Cursor(at) => {
                    let held: Vec<_> = model.iter().filter(|(o, _)| *o >= log.start()).collect();
                    if let Some((offset, _)) = held.get(at % held.len().max(1)) {
                        log.set_cursor("model", *offset).unwrap();
                        cursor = Some(*offset);
                    }
                }
                Op::Reclaim => {
                    log.reclaim().unwrap();
                    if let Some(cursor) = cursor {
                        prop_assert!(log.start() <= cursor, "a needed record was reclaimed");
                    }
                }
                Op::Read(at, n) => {
                    let held: Vec<_> = model.iter().filter(|(o, _)| *o >= log.start()).collect();
                    if held.is_empty() {
                        continue;
                    }
                    let from = held[at % held.len()].0;
                    let got = log.read(from, n).unwrap();
                    let want: Vec<_> = held.iter().filter(|(o, _)| *o >= from).take(n)
                        .map(|(o, p)| (*o, p.clone())).collect();
                    prop_assert_eq!(got, want);
                }
            }
        }
        let start = log.start();
        let got = log.read(start, usize::MAX).unwrap();
        let want: Vec<_> = model.into_iter().filter(|(o, _)| *o >= start).collect();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn free_space_is_that_of_the_log_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), Config::default()).unwrap();
    let available = log.available_bytes().unwrap();
    assert!(available > 0);
    assert!(ferry_log::available_bytes(dir.path()).unwrap() > 0);
    assert!(ferry_log::available_bytes(&dir.path().join("missing")).is_err());
}

#[test]
fn a_reader_reads_any_flushed_record_by_offset_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
    let mut reader = log.reader();
    let offsets: Vec<u64> = (0..200).map(|i| log.append(&payload(i)).unwrap()).collect();
    log.flush().unwrap();
    assert!(log.segments() > 3, "the records span segments");
    for (i, &offset) in offsets.iter().enumerate().rev() {
        assert_eq!(reader.read(offset).unwrap(), payload(i), "record {i}");
    }
    // Appended after the reader listed the segments: it looks again.
    let later = log.append(b"later").unwrap();
    log.flush().unwrap();
    assert_eq!(reader.read(later).unwrap(), b"later");
    assert!(reader.read(offsets[0] + 1).is_err(), "not the start of a record");
    assert!(reader.read(log.end() + 100).is_err(), "past the end");
}

#[test]
fn a_reader_reads_many_records_as_it_reads_each() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
    let mut reader = log.reader();
    let offsets: Vec<u64> = (0..300).map(|i| log.append(&payload(i)).unwrap()).collect();
    log.flush().unwrap();
    assert!(log.segments() > 3, "the records span segments");
    // Every third record, as a queue's offsets lie among others': runs
    // that cross segment boundaries, and one that is not a record.
    let mut wanted: Vec<u64> = offsets.iter().copied().step_by(3).collect();
    wanted.insert(10, wanted[9] + 1);
    let got = reader.read_many(&wanted);
    assert_eq!(got.len(), wanted.len());
    for (offset, got) in wanted.iter().zip(got) {
        match offsets.iter().position(|o| o == offset) {
            Some(i) => assert_eq!(got.unwrap(), payload(i), "record {i}"),
            None => assert!(got.is_err(), "offset {offset} starts no record"),
        }
    }
    assert!(reader.read_many(&[]).is_empty());
    let past = reader.read_many(&[offsets[299], log.end() + 100]);
    assert_eq!(past[0].as_deref().unwrap(), payload(299));
    assert!(past[1].is_err(), "past the end");
}

/// On a file system without direct I/O (tmpfs) the log writes through the
/// page cache, the same blocks at the same places.
#[test]
fn a_log_on_tmpfs_works_the_same() {
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "Linux mounts tmpfs at /dev/shm");
    let dir = tempfile::tempdir_in(shm).unwrap();
    let expected: Vec<Vec<u8>> = (0..40).map(payload).collect();
    {
        let (mut log, _) = Log::open(dir.path(), SMALL).unwrap();
        for record in &expected[..20] {
            log.append(record).unwrap();
        }
        log.sync().unwrap();
        std::mem::forget(log);
    }
    let (mut log, recovery) = Log::open(dir.path(), SMALL).unwrap();
    assert_eq!(recovery.truncated_bytes, 0);
    for record in &expected[20..] {
        log.append(record).unwrap();
    }
    assert_eq!(all(&mut log), expected);
}

/// A tail of zeros is padding, however long (a file extended but never
/// written, say); zeros that end in anything else are damage, all of it.
#[test]
fn zeros_after_the_last_record_are_padding_and_anything_else_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..10).map(payload).collect();
    {
        let (mut log, _) = Log::open(dir.path(), Config::default()).unwrap();
        for record in &records {
            log.append(record).unwrap();
        }
        log.sync().unwrap();
    }
    let last = segment_files(dir.path()).pop().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
    file.set_len(len + (3 << 20)).unwrap();
    drop(file);
    let (mut log, recovery) = Log::open(dir.path(), Config::default()).unwrap();
    assert_eq!(recovery.truncated_bytes, 0);
    assert_eq!(std::fs::metadata(&last).unwrap().len(), len, "the padding is cut");
    assert_eq!(all(&mut log), records);
    drop(log);

    let mut file = std::fs::OpenOptions::new().append(true).open(&last).unwrap();
    file.set_len(len + (3 << 20)).unwrap();
    file.write_all(b"!").unwrap();
    drop(file);
    let (mut log, recovery) = Log::open(dir.path(), Config::default()).unwrap();
    assert_eq!(recovery.truncated_bytes, (3 << 20) + 1);
    assert_eq!(all(&mut log), records);
}
