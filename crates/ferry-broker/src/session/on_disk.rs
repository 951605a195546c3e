//! The part of a session's queue that waits in the durable log: where an
//! offline persistent session's messages go, and, until they are all read
//! back, the newer ones too, so that order holds.
//!
//! Log offsets only (`Offsets`, ~4 bytes each): a message is read back when
//! the session is ready for it. Boxed, and nothing while empty: only
//! persistent sessions that are offline or catching up have any, and inline
//! its 40 bytes cost every connected device's session.

use crate::durable::Offsets;
use std::num::NonZeroU64;

#[derive(Default)]
pub struct OnDisk(Option<Box<Waiting>>);

struct Waiting {
    offsets: Offsets,
    /// Topic and payload bytes of `offsets`, as queued since the broker
    /// started. An offset does not say its message's size, so one taken
    /// out unread counts as the average; deliveries restored after a
    /// restart are not in it (they count toward the message bound only).
    bytes: u64,
}

impl OnDisk {
    /// What a restarted broker found waiting in the log.
    pub fn restored(offsets: Offsets) -> OnDisk {
        OnDisk((!offsets.is_empty()).then(|| Box::new(Waiting { offsets, bytes: 0 })))
    }

    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |waiting| waiting.offsets.len())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn bytes(&self) -> u64 {
        self.0.as_ref().map_or(0, |waiting| waiting.bytes)
    }

    /// Adds the delivery stored at `offset`, of `size` topic and payload
    /// bytes.
    pub fn push(&mut self, offset: NonZeroU64, size: u64) {
        let waiting = self
            .0
            .get_or_insert_with(|| Box::new(Waiting { offsets: Offsets::default(), bytes: 0 }));
        waiting.offsets.insert(offset.get());
        waiting.bytes += size;
    }

    /// Takes the oldest delivery out, by its offset.
    pub fn pop_first(&mut self) -> Option<NonZeroU64> {
        let waiting = self.0.as_mut()?;
        let count = waiting.offsets.len() as u64;
        let offset = waiting.offsets.pop_first()?;
        waiting.bytes -= waiting.bytes / count.max(1);
        self.shed();
        NonZeroU64::new(offset)
    }

    /// Takes the delivery at `offset` out, wherever it is; its bytes are
    /// not counted (only restored deliveries, which have none, are taken
    /// out this way).
    pub fn remove(&mut self, offset: u64) -> bool {
        let Some(waiting) = self.0.as_mut() else { return false };
        let removed = waiting.offsets.remove(offset);
        self.shed();
        removed
    }

    pub fn clear(&mut self) {
        self.0 = None;
    }

    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().flat_map(|waiting| waiting.offsets.iter())
    }

    fn shed(&mut self) {
        if self.0.as_ref().is_some_and(|waiting| waiting.offsets.is_empty()) {
            self.0 = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    #[test]
    fn bytes_follow_the_offsets_and_the_box_goes_when_empty() {
        let mut on_disk = OnDisk::default();
        assert!(on_disk.is_empty());
        on_disk.push(offset(10), 100);
        on_disk.push(offset(20), 300);
        assert_eq!((on_disk.len(), on_disk.bytes()), (2, 400));
        // One taken out unread counts as the average.
        assert_eq!(on_disk.pop_first(), Some(offset(10)));
        assert_eq!((on_disk.len(), on_disk.bytes()), (1, 200));
        assert_eq!(on_disk.pop_first(), Some(offset(20)));
        assert_eq!((on_disk.len(), on_disk.bytes()), (0, 0));
        assert!(on_disk.0.is_none());
        assert_eq!(on_disk.pop_first(), None);
    }

    #[test]
    fn restored_offsets_count_no_bytes() {
        let mut on_disk = OnDisk::restored(Offsets::from_iter([5, 7, 9]));
        assert_eq!((on_disk.len(), on_disk.bytes()), (3, 0));
        assert!(on_disk.remove(7));
        assert!(!on_disk.remove(7));
        assert_eq!(on_disk.iter().collect::<Vec<_>>(), [5, 9]);
        assert!(on_disk.remove(5) && on_disk.remove(9));
        assert!(on_disk.0.is_none());
        assert!(OnDisk::restored(Offsets::default()).0.is_none());
    }
}
