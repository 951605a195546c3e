//! The lot's places: what is parked, stored in place, found by a ticket.
//!
//! Why not a map from ticket to a box: for each parked connection that was
//! a heap allocation and a map entry of ~41 bytes, where a place is the
//! parked state and a generation, in chunks. A ticket names a place by
//! index and generation; the generation moves on each time the place is
//! emptied, so a ticket woken late finds nothing rather than whoever is
//! parked there now (unless the place was filled 65,536 times since: a
//! wasted resume, never a lost one).
//!
//! Only the lot's own thread fills and empties places, so the place that
//! `next` names is the one `fill` takes, with nothing between.

/// Places are added this many at a time: a growing lot never moves what
/// is parked, nor holds two copies of it while it grows.
const CHUNK: usize = 256;

/// Where a ticket points: a place and the generation it was given for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Spot {
    pub index: u32,
    pub generation: u16,
}

struct Place<T> {
    generation: u16,
    parked: Option<T>,
}

pub(super) struct Places<T> {
    /// The generation a new place starts at: a lot's own, so that a ticket
    /// of a lot dropped before it (whose number it may have) does not fit
    /// its places either.
    first_generation: u16,
    chunks: Vec<Box<[Place<T>]>>,
    /// Places emptied, to fill again, last emptied first.
    vacant: Vec<u32>,
    /// Places ever filled; those past it were never used.
    used: u32,
    parked: usize,
}

impl<T> Places<T> {
    pub(super) fn new(first_generation: u16) -> Places<T> {
        Places { first_generation, chunks: Vec::new(), vacant: Vec::new(), used: 0, parked: 0 }
    }

    /// The spot the next `fill` takes.
    pub(super) fn next(&self) -> Spot {
        let index = self.vacant.last().copied().unwrap_or(self.used);
        let generation = self.place(index).map_or(self.first_generation, |place| place.generation);
        Spot { index, generation }
    }

    /// Puts `parked` at `spot`, which `next` gave since the last fill.
    pub(super) fn fill(&mut self, spot: Spot, parked: T) {
        debug_assert_eq!(spot, self.next(), "a place filled other than the next");
        if self.vacant.last() == Some(&spot.index) {
            self.vacant.pop();
        } else {
            if spot.index as usize == self.chunks.len() * CHUNK {
                let generation = self.first_generation;
                let chunk = std::iter::repeat_with(|| Place { generation, parked: None });
                self.chunks.push(chunk.take(CHUNK).collect());
            }
            self.used += 1;
        }
        let place = self.place_mut(spot.index).expect("the place was just made");
        place.parked = Some(parked);
        self.parked += 1;
    }

    /// What is parked at `spot`, if it is still the generation there.
    pub(super) fn take(&mut self, spot: Spot) -> Option<T> {
        let place = self.place_mut(spot.index)?;
        if place.generation != spot.generation {
            return None;
        }
        let parked = place.parked.take()?;
        place.generation = place.generation.wrapping_add(1);
        self.vacant.push(spot.index);
        self.parked -= 1;
        Some(parked)
    }

    /// Everything parked, taken out.
    pub(super) fn drain(&mut self) -> Vec<T> {
        let mut taken = Vec::with_capacity(self.parked);
        for index in 0..self.used {
            let generation = self.place(index).map_or(0, |place| place.generation);
            taken.extend(self.take(Spot { index, generation }));
        }
        taken
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.parked
    }

    fn place(&self, index: u32) -> Option<&Place<T>> {
        let index = index as usize;
        self.chunks.get(index / CHUNK).map(|chunk| &chunk[index % CHUNK])
    }

    fn place_mut(&mut self, index: u32) -> Option<&mut Place<T>> {
        let index = index as usize;
        self.chunks.get_mut(index / CHUNK).map(|chunk| &mut chunk[index % CHUNK])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spot_takes_what_was_parked_there_once_and_a_stale_one_nothing() {
        let mut places = Places::new(9);
        let mut spots = Vec::new();
        for n in 0..(CHUNK * 2 + 3) {
            let spot = places.next();
            places.fill(spot, n);
            spots.push(spot);
        }
        assert_eq!(places.len(), CHUNK * 2 + 3);
        assert_eq!(places.take(spots[7]), Some(7));
        assert_eq!(places.take(spots[7]), None);
        // The emptied place is filled again, under a new generation: the
        // old spot finds nothing there.
        let again = places.next();
        assert_eq!(again.index, spots[7].index);
        assert_ne!(again.generation, spots[7].generation);
        places.fill(again, 1_000);
        assert_eq!(places.take(spots[7]), None);
        assert_eq!(places.take(again), Some(1_000));
        // A spot never given finds nothing either.
        assert_eq!(places.take(Spot { index: u32::MAX, generation: 0 }), None);
        let mut rest = places.drain();
        rest.sort_unstable();
        assert_eq!(rest.len(), CHUNK * 2 + 2);
        assert!(!rest.contains(&7));
        assert_eq!(places.len(), 0);
    }
}
