//! A session's topic filters: what it must take out of the topic tree when
//! it ends.
//!
//! Boxed, and nothing while empty: a fleet's devices that only publish
//! never subscribe, and an empty set inline cost each of their sessions
//! 32 bytes (24 more than the box's pointer), enough to keep the session
//! out of a smaller allocation class.

use ferry_mqtt::ByteStr;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;

/// Unkeyed hashing: a client's filters only ever collide in its own set (at
/// most `max_subscriptions_per_client`), and a keyed hasher's 16 bytes of
/// keys would cost every session that subscribes.
type Set = HashSet<ByteStr, BuildHasherDefault<DefaultHasher>>;

#[derive(Default)]
pub struct Filters(Option<Box<Set>>);

impl Filters {
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |set| set.len())
    }

    /// Adds `filter`; false if it was there.
    pub fn insert(&mut self, filter: ByteStr) -> bool {
        self.0.get_or_insert_with(Box::default).insert(filter)
    }

    /// Takes `filter` out; false if it was not there.
    pub fn remove(&mut self, filter: &str) -> bool {
        let Some(set) = self.0.as_mut() else { return false };
        let removed = set.remove(filter);
        if set.is_empty() {
            self.0 = None;
        }
        removed
    }

    pub fn iter(&self) -> impl Iterator<Item = &ByteStr> {
        self.0.iter().flat_map(|set| set.iter())
    }
}

impl FromIterator<ByteStr> for Filters {
    fn from_iter<I: IntoIterator<Item = ByteStr>>(filters: I) -> Filters {
        let set: Set = filters.into_iter().collect();
        Filters((!set.is_empty()).then(|| Box::new(set)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_set_gives_its_box_back() {
        let mut filters = Filters::default();
        assert_eq!(filters.len(), 0);
        assert!(filters.insert("a/+".into()));
        assert!(!filters.insert("a/+".into()));
        assert!(filters.insert("b/#".into()));
        assert_eq!(filters.len(), 2);
        assert!(filters.remove("a/+"));
        assert!(!filters.remove("a/+"));
        assert_eq!(filters.len(), 1);
        assert!(filters.remove("b/#"));
        assert!(filters.0.is_none());
        assert_eq!(filters.iter().count(), 0);
    }

    #[test]
    fn collected_from_nothing_is_empty() {
        let filters: Filters = std::iter::empty().collect();
        assert!(filters.0.is_none());
        let filters: Filters = ["x".into(), "y".into()].into_iter().collect();
        let mut all: Vec<&str> = filters.iter().map(|f| &**f).collect();
        all.sort_unstable();
        assert_eq!(all, ["x", "y"]);
    }
}
