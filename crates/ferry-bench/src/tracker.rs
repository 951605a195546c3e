//! Per-publisher sequence tracking at a subscriber: what arrived, what was
//! lost, what came twice and what came out of order.
//!
//! Every publisher numbers its messages 0, 1, 2, … and the tracker knows in
//! advance how many each will send, so its memory is one bit per expected
//! message and a stray sequence number cannot make it grow.

use serde::Serialize;

/// Delivery accounting for a set of publishers, as seen by one subscriber
/// (or several, after [`Tracker::merge`]).
#[derive(Debug, Clone)]
pub struct Tracker {
    publishers: Vec<Track>,
    /// Messages naming a publisher or sequence number outside the plan.
    unexpected: u64,
}

#[derive(Debug, Clone, Default)]
struct Track {
    /// Messages the publisher will send; sequence numbers are below this.
    expected: u32,
    /// One bit per sequence number received at least once.
    seen: Vec<u64>,
    /// The highest sequence number received so far, for reorder detection.
    highest: Option<u32>,
    unique: u64,
    duplicates: u64,
    out_of_order: u64,
}

/// What one received message was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// First arrival, after every lower sequence number seen so far.
    InOrder,
    /// First arrival, but a higher sequence number from the same publisher
    /// arrived before it.
    OutOfOrder,
    /// Already received.
    Duplicate,
    /// A publisher or sequence number that is not part of the run.
    Unexpected,
}

/// Totals over every publisher, as reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Messages the publishers sent (as told to [`Tracker::counts`]).
    pub sent: u64,
    /// Distinct messages received.
    pub received: u64,
    /// Sent but never received.
    pub lost: u64,
    /// Received more than once (each extra copy counts once).
    pub duplicates: u64,
    /// Received after a higher sequence number of the same publisher.
    pub out_of_order: u64,
    /// Not part of the run: another client's traffic on the same topics.
    pub unexpected: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.sent += other.sent;
        self.received += other.received;
        self.lost += other.lost;
        self.duplicates += other.duplicates;
        self.out_of_order += other.out_of_order;
        self.unexpected += other.unexpected;
    }
}

impl Tracker {
    /// A tracker for publishers `0..expected.len()`, publisher `i` sending
    /// sequence numbers `0..expected[i]`.
    pub fn new(expected: &[u32]) -> Tracker {
        Tracker {
            publishers: expected
                .iter()
                .map(|&n| Track {
                    expected: n,
                    seen: vec![0; (n as usize).div_ceil(64)],
                    ..Track::default()
                })
                .collect(),
            unexpected: 0,
        }
    }

    /// Records one received message.
    pub fn record(&mut self, publisher: u32, seq: u32) -> Arrival {
        let Some(track) = self.publishers.get_mut(publisher as usize) else {
            self.unexpected += 1;
            return Arrival::Unexpected;
        };
        if seq >= track.expected {
            self.unexpected += 1;
            return Arrival::Unexpected;
        }
        let (word, bit) = (seq as usize / 64, 1u64 << (seq % 64));
        if track.seen[word] & bit != 0 {
            track.duplicates += 1;
            return Arrival::Duplicate;
        }
        track.seen[word] |= bit;
        track.unique += 1;
        match track.highest {
            Some(highest) if seq < highest => {
                track.out_of_order += 1;
                Arrival::OutOfOrder
            }
            _ => {
                track.highest = Some(seq);
                Arrival::InOrder
            }
        }
    }

    /// Records a message that is not a benchmark payload at all.
    pub fn record_stranger(&mut self) {
        self.unexpected += 1;
    }

    /// Distinct messages received so far, over all publishers.
    pub fn received(&self) -> u64 {
        self.publishers.iter().map(|t| t.unique).sum()
    }

    /// Adds another tracker's arrivals for the same plan, as when each
    /// subscriber of a scenario tracks its own share of the publishers.
    pub fn merge(&mut self, other: &Tracker) {
        self.unexpected += other.unexpected;
        for (mine, theirs) in self.publishers.iter_mut().zip(&other.publishers) {
            for (a, b) in mine.seen.iter_mut().zip(&theirs.seen) {
                // A message both trackers saw is a duplicate of the merge.
                mine.duplicates += u64::from((*a & *b).count_ones());
                *a |= *b;
            }
            mine.unique = mine.seen.iter().map(|w| u64::from(w.count_ones())).sum();
            mine.duplicates += theirs.duplicates;
            mine.out_of_order += theirs.out_of_order;
            mine.highest = mine.highest.max(theirs.highest);
        }
    }

    /// The totals, given how many messages each publisher actually sent
    /// (fewer than planned when a run is cut short).
    pub fn counts(&self, sent: &[u32]) -> Counts {
        let mut counts = Counts { unexpected: self.unexpected, ..Counts::default() };
        for (i, track) in self.publishers.iter().enumerate() {
            let sent = u64::from(sent.get(i).copied().unwrap_or(0));
            counts.sent += sent;
            counts.received += track.unique;
            counts.lost += sent.saturating_sub(track.unique);
            counts.duplicates += track.duplicates;
            counts.out_of_order += track.out_of_order;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_delivery_counts_nothing_wrong() {
        let mut t = Tracker::new(&[3, 2]);
        for (p, s) in [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)] {
            assert_eq!(t.record(p, s), Arrival::InOrder);
        }
        let c = t.counts(&[3, 2]);
        assert_eq!(c, Counts { sent: 5, received: 5, ..Counts::default() });
    }

    #[test]
    fn gaps_are_lost_messages() {
        let mut t = Tracker::new(&[10]);
        for s in [0, 1, 5, 9] {
            t.record(0, s);
        }
        let c = t.counts(&[10]);
        assert_eq!((c.received, c.lost, c.out_of_order), (4, 6, 0));
    }

    #[test]
    fn duplicates_are_counted_once_each_and_not_as_received() {
        let mut t = Tracker::new(&[4]);
        assert_eq!(t.record(0, 0), Arrival::InOrder);
        assert_eq!(t.record(0, 0), Arrival::Duplicate);
        assert_eq!(t.record(0, 0), Arrival::Duplicate);
        assert_eq!(t.record(0, 1), Arrival::InOrder);
        let c = t.counts(&[2]);
        assert_eq!((c.received, c.duplicates, c.lost), (2, 2, 0));
    }

    #[test]
    fn reordering_is_per_publisher() {
        let mut t = Tracker::new(&[5, 5]);
        t.record(0, 3);
        assert_eq!(t.record(1, 0), Arrival::InOrder, "another publisher's order is its own");
        assert_eq!(t.record(0, 1), Arrival::OutOfOrder);
        assert_eq!(t.record(0, 2), Arrival::OutOfOrder);
        assert_eq!(t.record(0, 4), Arrival::InOrder);
        assert_eq!(t.record(0, 1), Arrival::Duplicate, "a late duplicate is a duplicate");
        let c = t.counts(&[5, 1]);
        assert_eq!((c.received, c.out_of_order, c.duplicates, c.lost), (5, 2, 1, 1));
    }

    #[test]
    fn strangers_do_not_grow_the_tracker() {
        let mut t = Tracker::new(&[2]);
        assert_eq!(t.record(1, 0), Arrival::Unexpected);
        assert_eq!(t.record(0, 2), Arrival::Unexpected);
        assert_eq!(t.record(0, u32::MAX), Arrival::Unexpected);
        let c = t.counts(&[2]);
        assert_eq!((c.unexpected, c.received, c.lost), (3, 0, 2));
    }

    #[test]
    fn sequence_numbers_on_word_boundaries() {
        let mut t = Tracker::new(&[129]);
        for s in [63, 64, 127, 128, 0] {
            t.record(0, s);
        }
        assert_eq!(t.record(0, 64), Arrival::Duplicate);
        assert_eq!(t.counts(&[129]).received, 5);
    }

    #[test]
    fn merge_unions_and_counts_overlap_as_duplicates() {
        let mut a = Tracker::new(&[4, 4]);
        let mut b = Tracker::new(&[4, 4]);
        a.record(0, 0);
        a.record(0, 1);
        b.record(0, 1);
        b.record(1, 0);
        b.record(1, 0);
        a.merge(&b);
        let c = a.counts(&[4, 4]);
        assert_eq!((c.received, c.duplicates, c.lost), (3, 2, 5));
    }

    /// The `fanin` case: a shared subscription deals each publisher's
    /// messages round-robin to three members; each member's share is
    /// incomplete on its own, and their union is exactly the whole.
    #[test]
    fn merge_of_disjoint_shares_is_complete() {
        let plan = [6, 5];
        let mut members = vec![Tracker::new(&plan), Tracker::new(&plan), Tracker::new(&plan)];
        let mut next = 0;
        for (p, &n) in plan.iter().enumerate() {
            for s in 0..n {
                assert_eq!(members[next % 3].record(p as u32, s), Arrival::InOrder);
                next += 1;
            }
        }
        let shares: Vec<u64> = members.iter().map(Tracker::received).collect();
        assert_eq!(shares, vec![4, 4, 3]);
        assert!(members[0].counts(&plan).lost > 0, "one member alone misses messages");

        let mut union = Tracker::new(&plan);
        for member in &members {
            union.merge(member);
        }
        let c = union.counts(&plan);
        assert_eq!(c, Counts { sent: 11, received: 11, ..Counts::default() });

        // Merging a member twice is the broker delivering its share twice.
        union.merge(&members[2]);
        let c = union.counts(&plan);
        assert_eq!((c.received, c.duplicates, c.lost), (11, 3, 0));
    }
}
