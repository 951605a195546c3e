//! The durable state as the log says it is: the fold of every stored
//! record. The writer thread applies each record once it is stored, so the
//! ledger is always exactly the log up to its end; a snapshot is the ledger
//! written out as records, and recovery is a snapshot plus the records
//! after it, applied by this same code.
//!
//! Queued messages are held here by offset only, in `Offsets` (about 4
//! bytes each): the message stays in the log.

use super::offsets::Offsets;
use super::record::{Published, Record, StoredMessage, StoredSubscription};
use crate::routing::PRIORITIES;
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ledger {
    pub sessions: HashMap<u64, DurableSession, BuildHasherDefault<SessionIdHasher>>,
    /// Retained messages by topic.
    pub retained: BTreeMap<String, StoredMessage>,
    /// The queues of route endpoints, by name: kept while they hold
    /// anything, whether or not the configuration still names them.
    pub endpoints: BTreeMap<String, DurableEndpoint>,
}

/// What a route endpoint still has to send, by priority.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DurableEndpoint {
    pub pending: [Offsets; PRIORITIES],
    /// The log bytes of the records it still needs: what its disk cap
    /// (`max_bytes`) counts.
    pub bytes: u64,
}

impl DurableEndpoint {
    fn is_empty(&self) -> bool {
        self.pending.iter().all(Offsets::is_empty)
    }

    fn oldest(&self) -> Option<u64> {
        self.pending.iter().filter_map(Offsets::first).min()
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DurableSession {
    pub client_id: String,
    pub expiry_secs: u32,
    /// Unix ms of the last disconnect; `None` while a connection is (or,
    /// after a crash, was) attached.
    pub disconnected_at_ms: Option<u64>,
    pub subscriptions: BTreeMap<String, StoredSubscription>,
    /// Offsets of messages still to deliver.
    pub pending: Offsets,
    /// Those of them the session sent PUBREC for, with the packet id of
    /// the PUBREL left to resend: at most a receive window's worth.
    pub released: BTreeMap<u64, u16>,
    /// QoS 2 packet ids received from the client and not yet released.
    pub inbound: BTreeSet<u16>,
    pub will: Option<(u32, StoredMessage)>,
}

/// Hashes the broker's session ids, which it numbers itself from a
/// counter: nobody outside chooses them, so the ledger, which looks one up
/// for every record it applies, does not need SipHash's defence against
/// chosen keys.
#[derive(Default)]
pub struct SessionIdHasher(u64);

impl Hasher for SessionIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 << 8 | u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        // Fibonacci hashing: consecutive ids spread over the table.
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl DurableSession {
    /// The delivery of the message at `offset` is over.
    fn delivered(&mut self, offset: u64) {
        self.pending.remove(offset);
        self.released.remove(&offset);
    }
}

impl Ledger {
    /// Applies a record stored at `offset`, `size` bytes of log (0 where
    /// unknown: a snapshot's records). Records naming a session that no
    /// longer exists are ignored: it ended after the record was made.
    pub fn apply(&mut self, offset: u64, size: u64, record: &Record) {
        match record {
            Record::SessionOpened { session, client_id, expiry_secs } => {
                let entry = self.sessions.entry(*session).or_default();
                entry.client_id.clone_from(client_id);
                entry.expiry_secs = *expiry_secs;
            }
            Record::SessionEnded { session } => {
                self.sessions.remove(session);
            }
            Record::Connected { session } => self.with(*session, |state| {
                state.disconnected_at_ms = None;
                state.will = None;
            }),
            Record::Disconnected { session, at_ms } => {
                self.with(*session, |state| state.disconnected_at_ms = Some(*at_ms));
            }
            Record::Subscribed { session, subscriptions } => self.with(*session, |state| {
                for subscription in subscriptions {
                    state.subscriptions.insert(subscription.filter.clone(), subscription.clone());
                }
            }),
            Record::Unsubscribed { session, filters } => self.with(*session, |state| {
                for filter in filters {
                    state.subscriptions.remove(filter);
                }
            }),
            Record::Published(published) => self.apply_published(offset, size, published),
            Record::Delivered { session, offsets } => self.with(*session, |state| {
                for &offset in offsets {
                    state.delivered(offset);
                }
            }),
            Record::Released { session, offset, packet_id } => self.with(*session, |state| {
                if state.pending.contains(*offset) {
                    state.released.insert(*offset, *packet_id);
                }
            }),
            Record::InboundReceived { session, packet_id } => {
                self.with(*session, |state| state.inbound.insert(*packet_id));
            }
            Record::InboundReleased { session, packet_id } => {
                self.with(*session, |state| state.inbound.remove(packet_id));
            }
            Record::WillPending { session, delay_secs, message } => {
                self.with(*session, |state| state.will = Some((*delay_secs, message.clone())));
            }
            Record::WillDone { session } => self.with(*session, |state| state.will = None),
            Record::Queued { session, offsets } => self.with(*session, |state| {
                for &offset in offsets {
                    state.pending.insert(offset);
                }
            }),
            Record::Barrier => {}
            Record::Forwarded { endpoint, offsets, bytes } => {
                let Some(state) = self.endpoints.get_mut(endpoint) else { return };
                state.bytes = state.bytes.saturating_sub(*bytes);
                for &offset in offsets {
                    // One message sits at one priority of an endpoint.
                    state.pending.iter_mut().any(|pending| pending.remove(offset));
                }
                if state.is_empty() {
                    self.endpoints.remove(endpoint);
                }
            }
            Record::EndpointQueued { endpoint, priority, offsets, bytes } => {
                let state = self.endpoints.entry(endpoint.clone()).or_default();
                state.bytes += bytes;
                for &offset in offsets {
                    state.pending[usize::from(*priority)].insert(offset);
                }
            }
        }
    }

    fn apply_published(&mut self, offset: u64, size: u64, published: &Published) {
        if let Some((session, moved)) = published.moved_from {
            self.with(session, |state| state.delivered(moved));
        }
        for target in &published.targets {
            self.with(target.session, |state| state.pending.insert(offset));
        }
        if let Some((session, packet_id)) = published.inbound {
            self.with(session, |state| state.inbound.insert(packet_id));
        }
        for target in &published.endpoints {
            let state = self.endpoints.entry(target.endpoint.to_string()).or_default();
            if state.pending[usize::from(target.priority)].insert(offset) {
                state.bytes += size;
            }
        }
        let publish = &published.message.publish;
        if publish.retain {
            if publish.payload.is_empty() {
                self.retained.remove(publish.topic.as_str());
            } else {
                self.retained.insert(publish.topic.to_string(), published.message.clone());
            }
        }
    }

    fn with<R>(&mut self, session: u64, change: impl FnOnce(&mut DurableSession) -> R) {
        if let Some(state) = self.sessions.get_mut(&session) {
            change(state);
        }
    }

    /// The oldest offset a session still needs: the log before it may go.
    pub fn oldest_pending(&self) -> Option<u64> {
        let sessions = self.sessions.values().filter_map(|state| state.pending.first());
        let endpoints = self.endpoints.values().filter_map(DurableEndpoint::oldest);
        sessions.chain(endpoints).min()
    }

    /// Messages waiting for persistent sessions, all sessions together.
    pub fn pending_count(&self) -> usize {
        self.sessions.values().map(|state| state.pending.len()).sum()
    }

    /// The ledger as records: applied to an empty ledger, in order, they
    /// rebuild this one. That is what a snapshot holds.
    pub fn to_records(&self) -> impl Iterator<Item = Record> + '_ {
        let sessions = self.sessions.iter().flat_map(|(&session, state)| {
            let opened = Record::SessionOpened {
                session,
                client_id: state.client_id.clone(),
                expiry_secs: state.expiry_secs,
            };
            let disconnected =
                state.disconnected_at_ms.map(|at_ms| Record::Disconnected { session, at_ms });
            let subscribed = (!state.subscriptions.is_empty()).then(|| Record::Subscribed {
                session,
                subscriptions: state.subscriptions.values().cloned().collect(),
            });
            let will = state.will.as_ref().map(|(delay_secs, message)| Record::WillPending {
                session,
                delay_secs: *delay_secs,
                message: message.clone(),
            });
            let inbound = state
                .inbound
                .iter()
                .map(move |&packet_id| Record::InboundReceived { session, packet_id });
            let queued = Chunks { offsets: state.pending.iter() }
                .map(move |offsets| Record::Queued { session, offsets });
            let released = state
                .released
                .iter()
                .map(move |(&offset, &packet_id)| Record::Released { session, offset, packet_id });
            [Some(opened), disconnected, subscribed, will]
                .into_iter()
                .flatten()
                .chain(inbound)
                .chain(queued)
                .chain(released)
        });
        let retained = self.retained.values().map(|message| {
            Record::Published(Box::new(Published {
                message: message.clone(),
                inbound: None,
                moved_from: None,
                targets: SmallVec::new(),
                endpoints: Vec::new(),
                publisher: None,
            }))
        });
        // The bytes ride on the first record of each endpoint.
        let endpoints = self.endpoints.iter().flat_map(|(endpoint, state)| {
            let mut bytes = Some(state.bytes);
            state
                .pending
                .iter()
                .zip(0..)
                .flat_map(|(pending, priority)| {
                    Chunks { offsets: pending.iter() }.map(move |offsets| (priority, offsets))
                })
                .map(move |(priority, offsets)| Record::EndpointQueued {
                    endpoint: endpoint.clone(),
                    priority,
                    offsets,
                    bytes: bytes.take().unwrap_or(0),
                })
        });
        sessions.chain(endpoints).chain(retained)
    }
}

/// Queued offsets in snapshot records of a bounded size.
struct Chunks<I> {
    offsets: I,
}

/// Offsets per `Queued` record: about 8 KiB of record at 1 KiB messages.
const QUEUED_PER_RECORD: usize = 4096;

impl<I: Iterator<Item = u64>> Iterator for Chunks<I> {
    type Item = Vec<u64>;

    fn next(&mut self) -> Option<Vec<u64>> {
        let chunk: Vec<u64> = self.offsets.by_ref().take(QUEUED_PER_RECORD).collect();
        (!chunk.is_empty()).then_some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::record::{message, Target};
    use crate::routing::EndpointTarget;
    use ferry_mqtt::{QoS, SubscriptionOptions};

    fn published(targets: &[u64], inbound: Option<(u64, u16)>, retain: bool) -> Record {
        Record::Published(Box::new(Published {
            message: message("t", b"x", QoS::ExactlyOnce, retain),
            inbound,
            moved_from: None,
            targets: targets
                .iter()
                .map(|&session| Target {
                    session,
                    qos: QoS::ExactlyOnce,
                    retain: false,
                    packet_id: 1,
                    subscription_ids: vec![],
                })
                .collect(),
            endpoints: Vec::new(),
            publisher: None,
        }))
    }

    fn history() -> Vec<(u64, Record)> {
        vec![
            (24, Record::SessionOpened { session: 1, client_id: "a".into(), expiry_secs: 60 }),
            (40, Record::SessionOpened { session: 2, client_id: "b".into(), expiry_secs: 60 }),
            (
                56,
                Record::Subscribed {
                    session: 1,
                    subscriptions: vec![StoredSubscription {
                        filter: "t".into(),
                        options: SubscriptionOptions::default(),
                        identifier: Some(5),
                    }],
                },
            ),
            (80, published(&[1, 2], Some((2, 9)), true)),
            (200, published(&[1], None, false)),
            (300, Record::Released { session: 1, offset: 80, packet_id: 1 }),
            (320, Record::Delivered { session: 2, offsets: vec![80] }),
            (340, Record::Disconnected { session: 1, at_ms: 1000 }),
            (
                360,
                Record::WillPending {
                    session: 1,
                    delay_secs: 5,
                    message: message("w", b"", QoS::AtMostOnce, false),
                },
            ),
            (400, Record::SessionOpened { session: 3, client_id: "c".into(), expiry_secs: 1 }),
            (420, published(&[3], None, false)),
            (500, Record::SessionEnded { session: 3 }),
        ]
    }

    fn replay(records: &[(u64, Record)]) -> Ledger {
        let mut ledger = Ledger::default();
        for (offset, record) in records {
            ledger.apply(*offset, 100, record);
        }
        ledger
    }

    #[test]
    fn replay_tracks_sessions_queues_and_retained() {
        let ledger = replay(&history());
        assert_eq!(ledger.sessions.len(), 2, "session 3 ended");
        let one = &ledger.sessions[&1];
        assert_eq!(one.pending, Offsets::from_iter([80, 200]));
        assert_eq!(one.released, BTreeMap::from([(80, 1)]));
        assert_eq!(one.disconnected_at_ms, Some(1000));
        assert!(one.will.is_some());
        assert_eq!(one.subscriptions["t"].identifier, Some(5));
        let two = &ledger.sessions[&2];
        assert!(two.pending.is_empty());
        assert_eq!(two.inbound, BTreeSet::from([9]));
        assert_eq!(ledger.retained.len(), 1);
        assert_eq!(ledger.oldest_pending(), Some(80));
        assert_eq!(ledger.pending_count(), 2);
    }

    #[test]
    fn a_snapshot_rebuilds_the_same_ledger() {
        let ledger = replay(&history());
        let snapshot: Vec<(u64, Record)> = ledger.to_records().map(|record| (0, record)).collect();
        assert_eq!(replay(&snapshot), ledger);
    }

    #[test]
    fn qos2_state_both_ways_survives_a_snapshot() {
        let mut records = history();
        records.extend([
            (600, published(&[1], Some((1, 3)), false)),
            (620, Record::Released { session: 1, offset: 600, packet_id: 2 }),
            // the publisher released 9, not 3
            (640, Record::InboundReleased { session: 2, packet_id: 9 }),
        ]);
        let ledger = replay(&records);
        assert_eq!(ledger.sessions[&1].inbound, BTreeSet::from([3]));
        assert!(ledger.sessions[&2].inbound.is_empty());
        assert_eq!(ledger.sessions[&1].released, BTreeMap::from([(80, 1), (600, 2)]));
        let snapshot: Vec<(u64, Record)> = ledger.to_records().map(|record| (0, record)).collect();
        let restored = replay(&snapshot);
        assert_eq!(restored, ledger);
        assert_eq!(restored.sessions[&1].inbound, BTreeSet::from([3]));
        assert_eq!(restored.sessions[&1].released, BTreeMap::from([(80, 1), (600, 2)]));
    }

    #[test]
    fn a_delivery_ends_once_and_a_late_release_does_not_bring_it_back() {
        let mut records = history();
        records.push((600, Record::Delivered { session: 1, offsets: vec![80] }));
        // A PUBREC record stored after the end (it cannot be made after
        // one, but a replay must not resurrect the delivery either way).
        records.push((620, Record::Released { session: 1, offset: 80, packet_id: 1 }));
        let ledger = replay(&records);
        assert_eq!(ledger.sessions[&1].pending, Offsets::from_iter([200]));
        assert!(ledger.sessions[&1].released.is_empty());
    }

    #[test]
    fn a_long_queue_is_snapshotted_in_bounded_records() {
        let mut records = history();
        records.extend((0..10_000u64).map(|n| (1_000 + n * 1_060, published(&[1], None, false))));
        records.push((20_000_000, Record::Released { session: 1, offset: 1_000, packet_id: 7 }));
        records.push((20_000_100, Record::Delivered { session: 1, offsets: vec![2_060, 3_120] }));
        let ledger = replay(&records);
        assert_eq!(ledger.pending_count(), 2 + 10_000 - 2);
        let snapshot: Vec<(u64, Record)> = ledger.to_records().map(|record| (0, record)).collect();
        let queued = snapshot.iter().filter(|(_, r)| matches!(r, Record::Queued { .. })).count();
        assert_eq!(queued, 3, "10,000 offsets in records of 4,096");
        assert!(snapshot.iter().all(|(_, record)| record.encode().len() < 16 * 1024));
        assert_eq!(replay(&snapshot), ledger);
    }

    #[test]
    fn a_moved_delivery_leaves_its_old_session_in_the_same_record() {
        let mut records = history();
        let Record::Published(mut moved) = published(&[2], None, false) else { unreachable!() };
        moved.moved_from = Some((1, 200));
        records.push((900, Record::Published(moved)));
        let ledger = replay(&records);
        assert_eq!(ledger.sessions[&1].pending, Offsets::from_iter([80]));
        assert_eq!(ledger.sessions[&2].pending, Offsets::from_iter([900]));
    }

    #[test]
    fn reconnecting_cancels_the_will_and_an_empty_retained_message_clears_the_topic() {
        let mut records = history();
        records.push((600, Record::Connected { session: 1 }));
        let mut clear = message("t", b"", QoS::AtMostOnce, true);
        clear.publish.payload = bytes::Bytes::new();
        records.push((
            700,
            Record::Published(Box::new(Published {
                message: clear,
                inbound: None,
                moved_from: None,
                targets: SmallVec::new(),
                endpoints: Vec::new(),
                publisher: None,
            })),
        ));
        let ledger = replay(&records);
        assert_eq!(ledger.sessions[&1].will, None);
        assert_eq!(ledger.sessions[&1].disconnected_at_ms, None);
        assert!(ledger.retained.is_empty());
    }

    fn routed(endpoints: &[(&str, u8)]) -> Record {
        let Record::Published(mut published) = published(&[], None, false) else { unreachable!() };
        published.endpoints = endpoints
            .iter()
            .map(|&(endpoint, priority)| EndpointTarget {
                endpoint: endpoint.into(),
                priority,
                expires_at_ms: 0,
            })
            .collect();
        Record::Published(published)
    }

    #[test]
    fn endpoint_queues_hold_the_log_until_forwarded_and_survive_a_snapshot() {
        let records = vec![
            (100, routed(&[("cloud", 9), ("archive", 0)])),
            (200, routed(&[("cloud", 0)])),
            (300, routed(&[("cloud", 9)])),
            (
                400,
                Record::Forwarded { endpoint: "cloud".into(), offsets: vec![100, 200], bytes: 200 },
            ),
        ];
        let ledger = replay(&records);
        assert_eq!(ledger.endpoints["cloud"].pending[9], Offsets::from_iter([300]));
        assert!(ledger.endpoints["cloud"].pending[0].is_empty());
        assert_eq!(ledger.endpoints["archive"].pending[0], Offsets::from_iter([100]));
        assert_eq!(ledger.oldest_pending(), Some(100), "archive still needs 100");
        assert_eq!(
            (ledger.endpoints["cloud"].bytes, ledger.endpoints["archive"].bytes),
            (100, 100)
        );
        let snapshot: Vec<(u64, Record)> = ledger.to_records().map(|record| (0, record)).collect();
        assert_eq!(replay(&snapshot), ledger);

        let mut records = records;
        records.push((
            500,
            Record::Forwarded { endpoint: "archive".into(), offsets: vec![100], bytes: 100 },
        ));
        let ledger = replay(&records);
        assert!(!ledger.endpoints.contains_key("archive"), "an empty queue is forgotten");
        assert_eq!(ledger.oldest_pending(), Some(300));
    }
}
