//! The broker's sessions, by client id.
//!
//! A table of the sessions themselves, each found by its own `client_id`,
//! rather than a map from a second handle on the id: 8 bytes a slot where
//! the map's took 24, in a table with a slot (and then some) for every
//! session. With 19,000 idle connections that is ~27 bytes each.

use crate::session::Session;
use hashbrown::hash_table::{Entry, HashTable};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct Sessions {
    table: HashTable<Arc<Session>>,
    /// Keyed: clients choose their ids, and could choose colliding ones.
    hasher: RandomState,
}

impl Sessions {
    pub(crate) fn get(&self, client_id: &str) -> Option<&Arc<Session>> {
        self.table.find(self.hasher.hash_one(client_id), |session| &*session.client_id == client_id)
    }

    /// Puts `session` in, in place of the one with its client id, if any.
    pub(crate) fn insert(&mut self, session: Arc<Session>) {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(&*session.client_id);
        let same_id = |other: &Arc<Session>| other.client_id == session.client_id;
        match self.table.entry(hash, same_id, |other| hasher.hash_one(&*other.client_id)) {
            Entry::Occupied(mut occupied) => *occupied.get_mut() = session,
            Entry::Vacant(vacant) => {
                vacant.insert(session);
            }
        }
    }

    pub(crate) fn remove(&mut self, client_id: &str) -> Option<Arc<Session>> {
        let hash = self.hasher.hash_one(client_id);
        let found = self.table.find_entry(hash, |session| &*session.client_id == client_id);
        found.ok().map(|occupied| occupied.remove().0)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<Session>> {
        self.table.iter()
    }

    /// Every session, held apart from the table: for walks that lock each
    /// session, which must not happen under the table's lock.
    pub(crate) fn snapshot(&self) -> Vec<Arc<Session>> {
        self.table.iter().cloned().collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: u64, client_id: &str) -> Arc<Session> {
        Arc::new(Session::new(id, client_id.into(), 0))
    }

    #[test]
    fn finds_replaces_and_removes_by_client_id() {
        let mut sessions = Sessions::default();
        for id in 0..1_000 {
            sessions.insert(session(id, &format!("device-{id}")));
        }
        sessions.insert(session(5_000, "device-7"));
        assert_eq!(sessions.len(), 1_000);
        assert_eq!(sessions.get("device-7").map(|session| session.id), Some(5_000));
        assert_eq!(sessions.get("device-999").map(|session| session.id), Some(999));
        assert!(sessions.get("device-1000").is_none());
        assert_eq!(sessions.remove("device-3").map(|session| session.id), Some(3));
        assert!(sessions.remove("device-3").is_none());
        assert!(sessions.get("device-3").is_none());
        assert_eq!(sessions.values().count(), 999);
    }
}
