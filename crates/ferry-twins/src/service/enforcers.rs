//! Compiled enforcers shared between policies with the same entries.
//!
//! An enforcer depends on a policy's entries alone, not on its id, and
//! fleets are made from templates: Ditto's benchmark gives each of its
//! things a policy of its own with the same one entry, and so does a
//! device's implicit creation. Compiled once per distinct set of entries,
//! the cache of hot policies holds one enforcer for all of them instead
//! of one each (measured: ~1 KB per policy of the benchmark).

use crate::policy::{Enforcer, PolicyEntry};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Weak};

/// The table is swept of enforcers no policy holds any more once it has
/// this many entries, and then again each time it has doubled.
const FIRST_SWEEP: usize = 4_096;

pub(super) struct Enforcers {
    table: Mutex<Table>,
    hasher: RandomState,
}

struct Table {
    /// By a hash of the entries' JSON; equal hashes are told apart by
    /// comparing the enforcers themselves.
    by_entries: HashMap<u64, Vec<Weak<Enforcer>>>,
    len: usize,
    sweep_at: usize,
}

impl Default for Enforcers {
    fn default() -> Enforcers {
        Enforcers {
            table: Mutex::new(Table { by_entries: HashMap::new(), len: 0, sweep_at: FIRST_SWEEP }),
            hasher: RandomState::new(),
        }
    }
}

impl Enforcers {
    /// The enforcer of `entries` (a policy's own and those its imports
    /// bring in): one already compiled from equal entries if a policy still
    /// holds it, else a new one.
    pub(super) fn of<'a>(
        &self,
        entries: impl IntoIterator<Item = &'a PolicyEntry>,
    ) -> Arc<Enforcer> {
        let entries: Vec<&PolicyEntry> = entries.into_iter().collect();
        let compiled = Enforcer::compile_entries(entries.iter().copied());
        let key = self
            .hasher
            .hash_one(entries.iter().map(|entry| entry.to_json().to_string()).collect::<Vec<_>>());
        let mut table = self.table.lock();
        let same = table.by_entries.get(&key).and_then(|candidates| {
            candidates.iter().filter_map(Weak::upgrade).find(|known| **known == *compiled)
        });
        if let Some(known) = same {
            return known;
        }
        table.by_entries.entry(key).or_default().push(Arc::downgrade(&compiled));
        table.len += 1;
        if table.len >= table.sweep_at {
            table.by_entries.retain(|_, candidates| {
                candidates.retain(|candidate| candidate.strong_count() > 0);
                !candidates.is_empty()
            });
            table.len = table.by_entries.values().map(Vec::len).sum();
            table.sweep_at = (table.len * 2).max(FIRST_SWEEP);
        }
        compiled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use serde_json::json;

    fn policy(id: &str, subject: &str) -> Policy {
        let body = json!({"entries": {"DEVICE": {
            "subjects": {subject: {"type": "t"}},
            "resources": {"thing:/": {"grant": ["READ", "WRITE"], "revoke": []}},
        }}});
        Policy::from_json(id, &body).unwrap()
    }

    #[test]
    fn equal_entries_share_one_enforcer_and_others_do_not() {
        let enforcers = Enforcers::default();
        let a = enforcers.of(policy("ns:a", "nginx:ditto").entries());
        let b = enforcers.of(policy("ns:b", "nginx:ditto").entries());
        let c = enforcers.of(policy("ns:c", "nginx:other").entries());
        assert!(Arc::ptr_eq(&a, &b), "same entries, another id");
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(enforcers.table.lock().len, 2);
    }

    #[test]
    fn enforcers_no_policy_holds_are_swept() {
        let enforcers = Enforcers::default();
        let kept = enforcers.of(policy("ns:kept", "nginx:kept").entries());
        for n in 0..FIRST_SWEEP {
            enforcers.of(policy("ns:p", &format!("nginx:u{n}")).entries());
        }
        let table = enforcers.table.lock();
        // The sweep came at the 4,096th entry: it kept the one still held
        // and the one being handed out; one more came after it.
        assert_eq!(table.len, 3);
        assert_eq!(table.sweep_at, FIRST_SWEEP);
        drop(table);
        assert!(Arc::ptr_eq(&kept, &enforcers.of(policy("ns:again", "nginx:kept").entries())));
    }
}
