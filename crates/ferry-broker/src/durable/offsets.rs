//! A sorted set of log offsets that costs about 4 bytes an entry: how a
//! session's queued messages are held, in the ledger and in the session,
//! while the messages themselves stay in the log. A million queued
//! messages must add a few megabytes to the broker, not a map entry each.
//!
//! Offsets are kept in chunks of at most `CHUNK`, each a base and sorted
//! 32-bit distances from it. Queues grow at the back and drain from the
//! front, so both are cheap: appending pushes onto the last chunk, and
//! removing a chunk's first entry moves its start instead of shifting the
//! rest. Anything else (an acknowledgement out of order, a delivery put
//! back in front) is a binary search and a shift within one chunk.

use std::fmt;

/// Entries per chunk: small enough that a shift within one is cheap,
/// large enough that a chunk's own 40 bytes are a tenth of a byte an entry.
const CHUNK: usize = 512;

#[derive(Default, Clone)]
pub struct Offsets {
    /// In order, none empty, each one's entries below the next one's.
    chunks: Vec<Chunk>,
    len: usize,
}

#[derive(Clone)]
struct Chunk {
    base: u64,
    /// Entries before `start` were removed from the front.
    start: u32,
    /// Distances from `base`, strictly increasing.
    deltas: Vec<u32>,
}

impl Chunk {
    fn new(offset: u64) -> Chunk {
        Chunk { base: offset, start: 0, deltas: vec![0] }
    }

    fn live(&self) -> &[u32] {
        &self.deltas[self.start as usize..]
    }

    fn first(&self) -> u64 {
        self.base + u64::from(self.live()[0])
    }

    fn last(&self) -> u64 {
        self.base + u64::from(*self.deltas.last().expect("chunks are never empty"))
    }

    fn len(&self) -> usize {
        self.deltas.len() - self.start as usize
    }

    fn delta(&self, offset: u64) -> Option<u32> {
        offset.checked_sub(self.base).and_then(|delta| u32::try_from(delta).ok())
    }

    /// Drops the removed front, before an insert in the middle.
    fn compact(&mut self) {
        self.deltas.drain(..self.start as usize);
        self.start = 0;
    }

    /// Moves the base down to `base`, which every entry must stay within
    /// `u32::MAX` of.
    fn rebase(&mut self, base: u64) {
        let shift = u32::try_from(self.base - base).expect("rebase within range");
        for delta in &mut self.deltas {
            *delta += shift;
        }
        self.base = base;
    }

    /// The upper half, as a chunk of its own.
    fn split(&mut self) -> Chunk {
        self.compact();
        let upper = self.deltas.split_off(self.deltas.len() / 2);
        let mut chunk = Chunk { base: self.base, start: 0, deltas: upper };
        chunk.base += u64::from(chunk.deltas[0]);
        let shift = chunk.deltas[0];
        for delta in &mut chunk.deltas {
            *delta -= shift;
        }
        chunk
    }
}

impl Offsets {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn first(&self) -> Option<u64> {
        self.chunks.first().map(Chunk::first)
    }

    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks
            .iter()
            .flat_map(|chunk| chunk.live().iter().map(|&delta| chunk.base + u64::from(delta)))
    }

    /// The entries from `from` on, in order: a binary search over the
    /// chunks and one within a chunk, so a reader that walks a long queue
    /// a batch at a time does not rescan what it passed.
    pub fn iter_from(&self, from: u64) -> impl Iterator<Item = u64> + '_ {
        let first_chunk = self.chunks.partition_point(|chunk| chunk.last() < from);
        let chunks = &self.chunks[first_chunk..];
        chunks.iter().enumerate().flat_map(move |(index, chunk)| {
            let live = chunk.live();
            let skip = match (index, chunk.delta(from)) {
                (0, Some(delta)) => live.partition_point(|&entry| entry < delta),
                _ => 0,
            };
            live[skip..].iter().map(|&delta| chunk.base + u64::from(delta))
        })
    }

    pub fn contains(&self, offset: u64) -> bool {
        self.position(offset).is_some()
    }

    /// Adds `offset`; false if it was there already.
    pub fn insert(&mut self, offset: u64) -> bool {
        let Some(last) = self.chunks.last_mut() else {
            self.chunks.push(Chunk::new(offset));
            self.len = 1;
            return true;
        };
        if offset > last.last() {
            match last.delta(offset) {
                Some(delta) if last.deltas.len() < CHUNK => last.deltas.push(delta),
                _ => self.chunks.push(Chunk::new(offset)),
            }
            self.len += 1;
            return true;
        }
        self.insert_within(offset)
    }

    /// The rare insert: before the last entry.
    fn insert_within(&mut self, offset: u64) -> bool {
        let index = self.chunk_for(offset).unwrap_or(0);
        let chunk = &mut self.chunks[index];
        if chunk.len() >= CHUNK {
            let upper = chunk.split();
            self.chunks.insert(index + 1, upper);
            return self.insert_within(offset);
        }
        if offset < chunk.base {
            // Before everything: the first chunk takes it if its entries
            // stay within reach of the new base.
            if chunk.last() - offset > u64::from(u32::MAX) {
                self.chunks.insert(0, Chunk::new(offset));
                self.len += 1;
                return true;
            }
            chunk.compact();
            chunk.rebase(offset);
        }
        let Some(delta) = chunk.delta(offset) else {
            // Past this chunk's reach, before the next chunk.
            self.chunks.insert(index + 1, Chunk::new(offset));
            self.len += 1;
            return true;
        };
        match chunk.live().binary_search(&delta) {
            Ok(_) => false,
            Err(position) => {
                if position == 0 && chunk.start > 0 {
                    chunk.start -= 1;
                    chunk.deltas[chunk.start as usize] = delta;
                } else {
                    // Compacting first keeps the removed front from growing
                    // under a run of inserts and front removals.
                    chunk.compact();
                    chunk.deltas.insert(position, delta);
                }
                self.len += 1;
                true
            }
        }
    }

    /// Removes `offset`; false if it was not there.
    pub fn remove(&mut self, offset: u64) -> bool {
        let Some((index, position)) = self.position(offset) else { return false };
        let chunk = &mut self.chunks[index];
        if position == 0 {
            chunk.start += 1;
        } else {
            chunk.deltas.remove(chunk.start as usize + position);
        }
        if chunk.len() == 0 {
            self.chunks.remove(index);
        }
        self.len -= 1;
        true
    }

    pub fn pop_first(&mut self) -> Option<u64> {
        let first = self.first()?;
        self.remove(first);
        Some(first)
    }

    /// The chunk whose range would hold `offset`: the last one starting at
    /// or before it.
    fn chunk_for(&self, offset: u64) -> Option<usize> {
        self.chunks.partition_point(|chunk| chunk.first() <= offset).checked_sub(1)
    }

    /// Chunk index and position among its live entries.
    fn position(&self, offset: u64) -> Option<(usize, usize)> {
        let index = self.chunk_for(offset)?;
        let chunk = &self.chunks[index];
        let delta = chunk.delta(offset)?;
        chunk.live().binary_search(&delta).ok().map(|position| (index, position))
    }
}

impl PartialEq for Offsets {
    fn eq(&self, other: &Offsets) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Offsets {}

impl fmt::Debug for Offsets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl FromIterator<u64> for Offsets {
    fn from_iter<I: IntoIterator<Item = u64>>(offsets: I) -> Offsets {
        let mut set = Offsets::default();
        for offset in offsets {
            set.insert(offset);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Debug, Clone)]
    enum Op {
        Append(u64),
        Insert(u64),
        Remove(u64),
        RemoveNth(usize),
        PopFirst,
    }

    fn op() -> impl Strategy<Value = Op> {
        // Small steps and small values make collisions and in-chunk work
        // common; huge ones cross the 32-bit reach of a chunk.
        let value = prop_oneof![0u64..2_000, 0u64..1 << 34, Just(u64::MAX - 1)];
        prop_oneof![
            4 => (1u64..3_000).prop_map(Op::Append),
            1 => (1u64..1 << 33).prop_map(Op::Append),
            2 => value.prop_map(Op::Insert),
            1 => (0u64..2_000).prop_map(Op::Remove),
            2 => any::<usize>().prop_map(Op::RemoveNth),
            2 => Just(Op::PopFirst),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn behaves_like_a_sorted_set(ops in proptest::collection::vec(op(), 0..3_000)) {
            let mut offsets = Offsets::default();
            let mut model = BTreeSet::<u64>::new();
            for op in ops {
                match op {
                    Op::Append(step) => {
                        let next = model.last().map_or(step, |last| last.saturating_add(step));
                        prop_assert_eq!(offsets.insert(next), model.insert(next));
                    }
                    Op::Insert(offset) => {
                        prop_assert_eq!(offsets.insert(offset), model.insert(offset));
                    }
                    Op::Remove(offset) => {
                        prop_assert_eq!(offsets.remove(offset), model.remove(&offset));
                    }
                    Op::RemoveNth(n) => {
                        if let Some(&offset) = model.iter().nth(n % model.len().max(1)) {
                            prop_assert!(offsets.remove(offset));
                            model.remove(&offset);
                        }
                    }
                    Op::PopFirst => prop_assert_eq!(offsets.pop_first(), model.pop_first()),
                }
                prop_assert_eq!(offsets.len(), model.len());
                prop_assert_eq!(offsets.first(), model.first().copied());
            }
            prop_assert!(offsets.iter().eq(model.iter().copied()));
            for offset in model.iter().take(50) {
                prop_assert!(offsets.contains(*offset));
            }
            for from in model.iter().step_by(97).flat_map(|&o| [o.saturating_sub(1), o, o.saturating_add(1)]) {
                prop_assert!(offsets.iter_from(from).eq(model.range(from..).copied()), "from {}", from);
            }
            prop_assert!(offsets.iter_from(0).eq(model.iter().copied()));
        }
    }

    #[test]
    fn a_million_queued_offsets_cost_about_four_bytes_each() {
        // 1 KiB messages a little over a kilobyte apart, as in a queue.
        let offsets: Offsets = (0..1_000_000u64).map(|n| 4096 + n * 1_060).collect();
        let heap: usize = offsets
            .chunks
            .iter()
            .map(|chunk| std::mem::size_of::<Chunk>() + chunk.deltas.capacity() * 4)
            .sum();
        assert!(heap < 4_200_000, "{heap} bytes");
        assert_eq!(offsets.len(), 1_000_000);
    }

    #[test]
    fn draining_from_the_front_frees_whole_chunks() {
        let mut offsets: Offsets = (1..=2_000u64).collect();
        for expected in 1..=1_536 {
            assert_eq!(offsets.pop_first(), Some(expected));
        }
        assert_eq!(offsets.chunks.len(), 1);
        assert_eq!(offsets.first(), Some(1_537));
    }

    #[test]
    fn entries_put_back_in_front_reuse_the_chunk() {
        let mut offsets: Offsets = (100..110u64).collect();
        for offset in (90..100).rev() {
            assert!(offsets.insert(offset));
        }
        assert_eq!(offsets.chunks.len(), 1);
        assert!(offsets.iter().eq(90..110));
    }
}
