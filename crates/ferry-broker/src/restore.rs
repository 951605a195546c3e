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

use crate::broker::{message_from_stored, unix_ms, Broker, Subscription};
use crate::config::BrokerConfig;
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
        let ledger = recovery.ledger.clone();
        let now = Instant::now();
        let sessions: Vec<_> = ledger
            .sessions
            .iter()
            .map(|(&id, durable)| (restore_session(id, durable), durable))
            .collect();
        let retained: Vec<Arc<Message>> = ledger
            .retained
            .values()
            .map(|stored| Arc::new(message_from_stored(stored)))
            .filter(|message| !message.is_expired(now))
            .collect();
        let (replayed, elapsed) = (recovery.replayed, recovery.elapsed);
        let broker = Broker::with_store(config, Some(recovery.start()?));

        let next_id = ledger.sessions.keys().max().map_or(1, |&id| id + 1);
        broker.next_session_id.store(next_id, Ordering::Relaxed);
        {
            let mut retained_store = broker.retained.write();
            for message in &retained {
                retained_store.insert(&message.topic, message.clone());
            }
        }
        for (session, durable) in &sessions {
            broker.install(session, durable);
        }
        let now_ms = unix_ms();
        for (session, durable) in &sessions {
            broker.start_clocks(session, durable, now_ms);
        }
        tracing::info!(
            sessions = sessions.len(),
            queued = ledger.pending_count(),
            retained = retained.len(),
            replayed_records = replayed,
            elapsed_ms = elapsed.as_millis() as u64,
            "durable state recovered"
        );
        Ok(broker)
    }

    /// Puts a restored session in the session map and its subscriptions in
    /// the topic tree.
    fn install(&self, session: &Arc<Session>, durable: &DurableSession) {
        self.sessions.lock().insert(session.client_id.clone(), session.clone());
        let mut tree = self.subscriptions.write();
        for stored in durable.subscriptions.values() {
            let filter = ByteStr::from(stored.filter.as_str());
            let subscription = Subscription {
                session: session.clone(),
                filter: filter.clone(),
                options: stored.options,
                identifier: stored.identifier,
            };
            tree.insert(&filter, session.id, subscription);
        }
    }

    /// Runs the expiry and will-delay clocks from the last disconnect (or
    /// from now, for a session whose connection the crash cut).
    fn start_clocks(
        self: &Arc<Self>,
        session: &Arc<Session>,
        durable: &DurableSession,
        now_ms: u64,
    ) {
        let offline = Duration::from_millis(
            now_ms.saturating_sub(durable.disconnected_at_ms.unwrap_or(now_ms)),
        );
        if let Some((delay_secs, _)) = &durable.will {
            let left = Duration::from_secs(u64::from(*delay_secs)).saturating_sub(offline);
            let timer = crate::will::schedule(self.clone(), session.clone(), left);
            session.lock().timers.push(timer);
        }
        if durable.expiry_secs != u32::MAX {
            let expiry = Duration::from_secs(u64::from(durable.expiry_secs));
            match expiry.checked_sub(offline) {
                Some(left) if !left.is_zero() => self.start_expiry_clock(session, 0, left),
                _ => self.expire(session, 0),
            }
        }
    }
}

/// Builds one session as the ledger has it, offline, its queue left in
/// the log.
fn restore_session(id: u64, durable: &DurableSession) -> Arc<Session> {
    let session =
        Arc::new(Session::new(id, durable.client_id.as_str().into(), durable.expiry_secs));
    session.set_persistent(true);
    let mut state = session.lock();
    state.subscriptions =
        durable.subscriptions.keys().map(|filter| ByteStr::from(filter.as_str())).collect();
    state.inbound_qos2 = durable.inbound.iter().copied().collect();
    if let Some((_, will)) = &durable.will {
        state.pending_will = Some(Box::new(message_from_stored(will)));
    }
    for (&offset, &released_packet_id) in &durable.pending {
        let Some(offset) = NonZeroU64::new(offset) else { continue };
        if released_packet_id != 0 {
            // Only PUBREL is left: no need for the message.
            let packet_id = released_packet_id;
            state.inflight.push_back(Inflight::Release { packet_id, offset: Some(offset) });
        } else {
            // It may have been sent before the restart: DUP.
            state.on_disk.push_back(OnDisk { offset, dup: true });
        }
    }
    drop(state);
    session
}
