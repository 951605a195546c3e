//! Startup with durability on: the broker is rebuilt from what the log
//! says (`durable::recover`), then keeps its durable state there.
//!
//! Sessions come back offline, with their subscriptions in the topic tree,
//! their queues in order (a message PUBREC'd before the restart only waits
//! for PUBREL again), the QoS 2 ids their clients have not released, and
//! their expiry and will-delay clocks running from the time they were
//! disconnected, as the log recorded it.

use crate::broker::{unix_ms, Broker, Subscription};
use crate::config::BrokerConfig;
use crate::durable::record::Target;
use crate::durable::{self, DurabilityConfig, DurableSession, StoreError};
use crate::message::Message;
use crate::session::{Delivery, Inflight, Session};
use ferry_mqtt::ByteStr;
use std::collections::{BTreeSet, HashMap};
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
        let mut recovery = durable::recover(data_dir, durability)?;
        let ledger = recovery.ledger.clone();
        let clock = Clock::now();
        let queued: BTreeSet<u64> =
            ledger.sessions.values().flat_map(|durable| durable.pending.keys().copied()).collect();
        let mut messages = Messages::with_capacity(queued.len());
        recovery.published_at(&queued, |offset, published| {
            let message = Arc::new(clock.message(&published.message));
            messages.insert(offset, (message, published.targets));
        })?;
        let mut sessions = Vec::with_capacity(ledger.sessions.len());
        for (&id, durable) in &ledger.sessions {
            sessions.push((restore_session(id, durable, &messages, &clock), durable));
        }
        let retained: Vec<Arc<Message>> = ledger
            .retained
            .values()
            .map(|stored| Arc::new(clock.message(stored)))
            .filter(|message| !message.is_expired(clock.instant))
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
        for (session, durable) in &sessions {
            broker.start_clocks(session, durable, clock.unix_ms);
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

/// Queued messages read back from the log by offset, each once however
/// many sessions it is queued for, with the sessions it is for.
type Messages = HashMap<u64, (Arc<Message>, Vec<Target>)>;

/// Builds one session as the ledger has it, offline.
fn restore_session(
    id: u64,
    durable: &DurableSession,
    messages: &Messages,
    clock: &Clock,
) -> Arc<Session> {
    let session =
        Arc::new(Session::new(id, durable.client_id.as_str().into(), durable.expiry_secs));
    session.set_persistent(true);
    let mut state = session.lock();
    state.subscriptions =
        durable.subscriptions.keys().map(|filter| ByteStr::from(filter.as_str())).collect();
    state.inbound_qos2 = durable.inbound.iter().copied().collect();
    if let Some((_, will)) = &durable.will {
        state.pending_will = Some(Box::new(clock.message(will)));
    }
    let mut last_packet_id = 0;
    for (&offset, &released) in &durable.pending {
        let Some((message, targets)) = messages.get(&offset) else { continue };
        let Some(target) = targets.iter().find(|target| target.session == id) else {
            tracing::warn!(
                offset,
                session = id,
                "durable state: a queued message does not name its session; skipped"
            );
            continue;
        };
        last_packet_id = target.packet_id;
        let offset = NonZeroU64::new(offset);
        if released {
            state.inflight.push_back(Inflight::Release { packet_id: target.packet_id, offset });
        } else {
            state.queue.push_back(Delivery {
                message: message.clone(),
                qos: target.qos,
                retain: target.retain,
                subscription_ids: target.subscription_ids.clone(),
                shared_filter: None,
                offset,
                packet_id: target.packet_id,
                restored: true,
            });
        }
    }
    state.continue_packet_ids_after(last_packet_id);
    drop(state);
    session
}

/// "Now" on both clocks, to turn stored wall-clock times into `Instant`s.
#[derive(Clone, Copy)]
struct Clock {
    instant: Instant,
    unix_ms: u64,
}

impl Clock {
    fn now() -> Clock {
        Clock { instant: Instant::now(), unix_ms: unix_ms() }
    }

    /// The stored message as the broker holds it, its age kept so that
    /// its expiry interval counts the time before the restart.
    fn message(&self, stored: &durable::record::StoredMessage) -> Message {
        let publish = stored.publish.clone();
        let mut message = Message::new(
            publish.topic,
            publish.payload,
            publish.qos,
            publish.retain,
            publish.properties,
            stored.origin,
        );
        let age = Duration::from_millis(self.unix_ms.saturating_sub(stored.received_at_ms));
        message.received_at = self.instant.checked_sub(age).unwrap_or(self.instant);
        message
    }
}
