//! Startup with durability on: the broker is rebuilt from what the log
//! says (`durable::recover`), then keeps its durable state there.
//!
//! Sessions come back offline, with their subscriptions in the topic tree,
//! their queues in order (a message PUBREC'd before the restart only waits
//! for PUBREL again), the QoS 2 ids their clients have not released, and
//! their expiry and will-delay clocks running from the time they were
//! disconnected, as the log recorded it. Queued messages are not read:
//! they stay in the log and come back as each session drains, so startup
//! time and memory do not grow with the backlog.

use crate::broker::{message_from_stored, Broker, Subscription};
use crate::clock::unix_ms;
use crate::config::BrokerConfig;
use crate::durable::record::StoredSubscription;
use crate::durable::{self, DurabilityConfig, DurableSession, StoreError};
use crate::message::Message;
use crate::session::{Inflight, OnDisk, Session};
use ferry_mqtt::ByteStr;
use std::num::NonZeroU64;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Broker {
    /// A broker whose durable state is in `data_dir`: recovered from it
    /// now, and kept there from now on. With durability off, an in-memory
    /// broker.
    pub fn open(
        config: BrokerConfig,
        durability: &DurabilityConfig,
        data_dir: &Path,
    ) -> Result<Arc<Broker>, StoreError> {
        if !durability.enabled {
            return Ok(Broker::new(config));
        }
        let recovery = durable::recover(data_dir, durability)?;
        let ledger = &recovery.ledger;
        let now = Instant::now();
        let sessions: Vec<Restored> =
            ledger.sessions.iter().map(|(&id, durable)| Restored::new(id, durable)).collect();
        let retained: Vec<Arc<Message>> = ledger
            .retained
            .values()
            .map(|stored| Arc::new(message_from_stored(stored)))
            .filter(|message| !message.is_expired(now))
            .collect();
        let next_id = ledger.sessions.keys().max().map_or(1, |&id| id + 1);
        let queued = ledger.pending_count();
        let (replayed, elapsed) = (recovery.replayed, recovery.elapsed);
        let broker = Broker::with_store(config, Some(recovery.start()?));

        broker.next_session_id.store(next_id, Ordering::Relaxed);
        {
            let mut retained_store = broker.retained.write();
            for message in &retained {
                retained_store.insert(&message.topic, message.clone());
            }
        }
        for restored in &sessions {
            broker.install(restored);
        }
        let now_ms = unix_ms();
        for restored in &sessions {
            broker.start_clocks(restored, now_ms);
        }
        tracing::info!(
            sessions = sessions.len(),
            queued,
            retained = retained.len(),
            replayed_records = replayed,
            elapsed_ms = elapsed.as_millis() as u64,
            "durable state recovered"
        );
        Ok(broker)
    }

    /// Puts a restored session in the session map and its subscriptions in
    /// the topic tree.
    fn install(&self, restored: &Restored) {
        let session = &restored.session;
        self.sessions.lock().insert(session.clone());
        let mut tree = self.subscriptions.write();
        for stored in &restored.subscriptions {
            let filter = ByteStr::from(stored.filter.as_str());
            let subscription = Subscription {
                session: session.clone(),
                filter: filter.clone(),
                options: stored.options,
                identifier: stored.identifier,
                // Who made it is not stored: it was allowed then, and is
                // checked again when its client next connects.
                reader: None,
                viewer: None,
            };
            tree.insert(&filter, session.id, subscription);
        }
    }

    /// Runs the expiry and will-delay clocks from the last disconnect (or
    /// from now, for a session whose connection the crash cut).
    fn start_clocks(self: &Arc<Self>, restored: &Restored, now_ms: u64) {
        let session = &restored.session;
        let offline = Duration::from_millis(
            now_ms.saturating_sub(restored.disconnected_at_ms.unwrap_or(now_ms)),
        );
        if let Some(delay_secs) = restored.will_delay_secs {
            let left = Duration::from_secs(u64::from(delay_secs)).saturating_sub(offline);
            let timer = self.schedule_will(session.clone(), left);
            session.lock().add_timer(timer);
        }
        let expiry_secs = session.lock().expiry_secs;
        if expiry_secs != u32::MAX {
            let expiry = Duration::from_secs(u64::from(expiry_secs));
            match expiry.checked_sub(offline) {
                Some(left) if !left.is_zero() => self.start_expiry_clock(session, 0, left),
                _ => self.expire(session, 0),
            }
        }
    }
}

/// A session as the ledger has it, offline, its queue left in the log,
/// with what the broker needs to put it back once it runs.
struct Restored {
    session: Arc<Session>,
    subscriptions: Vec<StoredSubscription>,
    will_delay_secs: Option<u32>,
    disconnected_at_ms: Option<u64>,
}

impl Restored {
    fn new(id: u64, durable: &DurableSession) -> Restored {
        Restored {
            session: restore_session(id, durable),
            subscriptions: durable.subscriptions.values().cloned().collect(),
            will_delay_secs: durable.will.as_ref().map(|(delay_secs, _)| *delay_secs),
            disconnected_at_ms: durable.disconnected_at_ms,
        }
    }
}

fn restore_session(id: u64, durable: &DurableSession) -> Arc<Session> {
    let session =
        Arc::new(Session::new(id, durable.client_id.as_str().into(), durable.expiry_secs));
    session.set_persistent(true);
    let mut state = session.lock();
    state.subscriptions =
        durable.subscriptions.keys().map(|filter| ByteStr::from(filter.as_str())).collect();
    for &packet_id in &durable.inbound {
        state.hold_inbound(packet_id);
    }
    if let Some((_, will)) = &durable.will {
        state.set_will(Some(Box::new(message_from_stored(will))));
    }
    state.on_disk = OnDisk::restored(durable.pending.clone());
    for (&offset, &packet_id) in &durable.released {
        // Only PUBREL is left: no need for the message.
        state.on_disk.remove(offset);
        let offset = NonZeroU64::new(offset);
        state.inflight.push_back(Inflight::Release { packet_id, offset });
    }
    drop(state);
    session
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::Offsets;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn a_restored_session_keeps_its_qos2_state_both_ways() {
        let durable = DurableSession {
            client_id: "c".into(),
            expiry_secs: 60,
            pending: Offsets::from_iter([100, 200, 300]),
            released: BTreeMap::from([(200, 7)]),
            inbound: BTreeSet::from([4, 9]),
            ..DurableSession::default()
        };
        let session = restore_session(1, &durable);
        let state = session.lock();
        // Inbound: a PUBLISH resent with these ids is not routed again.
        let mut inbound = state.inbound_ids();
        inbound.sort_unstable();
        assert_eq!(inbound, [4, 9]);
        // Outbound: the PUBREC'd delivery waits for PUBCOMP under its id,
        // and is not sent again as a PUBLISH.
        assert!(matches!(
            state.inflight.front(),
            Some(Inflight::Release { packet_id: 7, offset }) if *offset == NonZeroU64::new(200)
        ));
        assert_eq!(state.inflight.len(), 1);
        assert_eq!(state.on_disk.iter().collect::<Vec<_>>(), [100, 300]);
    }
}
