//! A connection's place on a core (`cores.rs`): counted there until it
//! drops, however the connection ends (cancellation at shutdown
//! included). Apart from the cores, which also open the connections'
//! parking lots, so that a connection's admission need not know them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub(crate) struct Seat(Arc<AtomicUsize>);

impl Seat {
    /// One more connection counted in `count`, until the seat drops.
    pub(crate) fn taken(count: &Arc<AtomicUsize>) -> Seat {
        count.fetch_add(1, Ordering::Relaxed);
        Seat(count.clone())
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
