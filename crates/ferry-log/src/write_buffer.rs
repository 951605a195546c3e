//! The log's write buffer: records on their way to the active segment,
//! held as whole blocks aligned in memory and in the file, as direct I/O
//! (`O_DIRECT`) needs.
//!
//! Direct I/O writes from this buffer to the disk without a copy into the
//! page cache; profiling put that copy, the pages it allocates and their
//! write-back at a fifth of the durable path's CPU. Its price is that
//! writes start and end on block boundaries: the last block of a write is
//! padded with zeros, and the records that only partly fill it stay at the
//! front of the buffer, to be written again with what follows them.

/// Alignment and granularity of writes: a multiple of the logical block
/// size of every disk Linux supports (512 or 4096 bytes).
pub const BLOCK: usize = 4096;

#[derive(Debug)]
pub struct WriteBuffer {
    /// `capacity + BLOCK` bytes, never resized, so that a region of
    /// `capacity` bytes starting `start` bytes in is block-aligned.
    memory: Vec<u8>,
    start: usize,
    capacity: usize,
    /// File position of the region's first byte, a multiple of `BLOCK`.
    position: u64,
    /// Bytes held, from `position` on.
    len: usize,
    /// Of which the file already has: the part of the last block written
    /// before, which goes out again with whatever follows it.
    written: usize,
}

impl WriteBuffer {
    /// A buffer of `capacity` bytes (rounded up to whole blocks) for a
    /// segment whose data ends at file position `end`; `tail` is the part
    /// of the file's last block before `end` (`end % BLOCK` bytes).
    pub fn new(capacity: usize, end: u64, tail: &[u8]) -> WriteBuffer {
        let capacity = capacity.div_ceil(BLOCK).max(1) * BLOCK;
        let memory = vec![0; capacity + BLOCK];
        let start = memory.as_ptr().align_offset(BLOCK);
        let mut buffer = WriteBuffer { memory, start, capacity, position: 0, len: 0, written: 0 };
        buffer.reset(end, tail);
        buffer
    }

    /// Starts again at file position `end`, discarding what was held;
    /// `tail` is as for [`WriteBuffer::new`].
    pub fn reset(&mut self, end: u64, tail: &[u8]) {
        let in_block = (end % BLOCK as u64) as usize;
        assert_eq!(tail.len(), in_block, "the tail is the part of the last block before the end");
        self.position = end - in_block as u64;
        self.region()[..in_block].copy_from_slice(tail);
        self.len = in_block;
        self.written = in_block;
    }

    /// The file position just past the last byte held.
    pub fn end(&self) -> u64 {
        self.position + self.len as u64
    }

    /// Bytes held that the file does not have yet.
    pub fn unwritten(&self) -> usize {
        self.len - self.written
    }

    pub fn is_full(&self) -> bool {
        self.len == self.capacity
    }

    /// Copies as much of `bytes` as there is room for; returns how much.
    pub fn push(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.capacity - self.len);
        let at = self.len;
        self.region()[at..at + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        n
    }

    /// What to write, and where: every block held, the last one padded
    /// with zeros. Aligned in memory, in length and in file position.
    pub fn blocks(&mut self) -> (u64, &[u8]) {
        let padded = self.len.div_ceil(BLOCK) * BLOCK;
        let (len, position) = (self.len, self.position);
        let region = self.region();
        region[len..padded].fill(0);
        (position, &region[..padded])
    }

    /// The part of the last block held, which a write of [`blocks`]
    /// left in the file before [`WriteBuffer::end`].
    ///
    /// [`blocks`]: WriteBuffer::blocks
    pub fn tail(&self) -> &[u8] {
        let whole = self.len / BLOCK * BLOCK;
        &self.memory[self.start + whole..self.start + self.len]
    }

    /// After [`blocks`](WriteBuffer::blocks) were written: keeps only the
    /// last, partly filled block, which the next write rewrites.
    pub fn written_out(&mut self) {
        let whole = self.len / BLOCK * BLOCK;
        let kept = self.len - whole;
        let region = self.region();
        region.copy_within(whole..whole + kept, 0);
        self.position += whole as u64;
        self.len = kept;
        self.written = kept;
    }

    fn region(&mut self) -> &mut [u8] {
        &mut self.memory[self.start..self.start + self.capacity]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_padded_and_the_partial_one_is_written_again() {
        let header = [7u8; 24];
        let mut buffer = WriteBuffer::new(3 * BLOCK, 0, &[]);
        assert_eq!(buffer.push(&header), 24);
        let record = vec![1u8; 5000];
        assert_eq!(buffer.push(&record), 5000);
        assert_eq!(buffer.end(), 5024);
        assert_eq!(buffer.unwritten(), 5024);
        {
            let (position, blocks) = buffer.blocks();
            assert_eq!(position, 0);
            assert_eq!(blocks.len(), 2 * BLOCK);
            assert_eq!(blocks.as_ptr() as usize % BLOCK, 0, "aligned in memory");
            assert_eq!(&blocks[..24], &header);
            assert!(blocks[5024..].iter().all(|&b| b == 0), "padded with zeros");
        }
        assert_eq!(buffer.tail(), &record[5000 - (5024 - BLOCK)..]);
        buffer.written_out();
        assert_eq!(buffer.end(), 5024);
        assert_eq!(buffer.unwritten(), 0);
        buffer.push(&[2; 10]);
        let (position, blocks) = buffer.blocks();
        assert_eq!(position, BLOCK as u64, "the partial block is written again");
        assert_eq!(blocks.len(), BLOCK);
        assert_eq!(&blocks[..5024 - BLOCK], &record[..5024 - BLOCK]);
        assert_eq!(&blocks[5024 - BLOCK..5034 - BLOCK], &[2; 10]);
    }

    #[test]
    fn a_full_buffer_takes_nothing_more_and_empties_whole() {
        let mut buffer = WriteBuffer::new(BLOCK, 0, &[]);
        assert_eq!(buffer.push(&[1; BLOCK + 100]), BLOCK);
        assert!(buffer.is_full());
        assert_eq!(buffer.push(&[1]), 0);
        buffer.written_out();
        assert_eq!((buffer.end(), buffer.tail().len()), (BLOCK as u64, 0));
        assert_eq!(buffer.push(&[1; 100]), 100);
    }

    #[test]
    fn reset_resumes_inside_a_block() {
        let mut buffer = WriteBuffer::new(BLOCK, 10, &[9; 10]);
        buffer.push(&[1; 6]);
        buffer.reset(2 * BLOCK as u64 + 3, &[5; 3]);
        assert_eq!((buffer.end(), buffer.unwritten()), (2 * BLOCK as u64 + 3, 0));
        buffer.push(&[4]);
        let (position, blocks) = buffer.blocks();
        assert_eq!(position, 2 * BLOCK as u64);
        assert_eq!(&blocks[..4], &[5, 5, 5, 4]);
    }
}
