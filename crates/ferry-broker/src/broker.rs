//! The broker's shared state and the operations connections perform on it:
//! attach and detach sessions, subscribe, and route publishes.
//!
//! Locks, and the order in which they may be taken (never the reverse):
//! `sessions` → topic tree → one session's state. The publish path takes
//! only the topic tree's read lock (shared by all publishers) and, briefly,
//! the state lock of each session it delivers to.

use crate::backpressure;
use crate::config::BrokerConfig;
use crate::message::Message;
use crate::retained::RetainedStore;
use crate::session::{Delivery, Enqueued, Publisher, Session};
use crate::stats::Stats;
use crate::topic_tree::{Match, TopicTree};
use crate::will::PendingWill;
use ferry_mqtt::{ByteStr, ReasonCode, RetainHandling, SubscriptionOptions};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

/// A subscription's entry in the topic tree. Holds the session itself so a
/// publish needs no lookup by client id.
#[derive(Clone)]
pub(crate) struct Subscription {
    pub session: Arc<Session>,
    /// The filter as subscribed, `$share/...` included.
    pub filter: ByteStr,
    pub options: SubscriptionOptions,
    pub identifier: Option<u32>,
}

pub struct Broker {
    pub config: BrokerConfig,
    pub stats: Stats,
    pub started_at: Instant,
    subscriptions: RwLock<TopicTree<u64, Subscription>>,
    retained: RwLock<RetainedStore<Arc<Message>>>,
    sessions: Mutex<HashMap<Arc<str>, Arc<Session>>>,
    next_session_id: AtomicU64,
    /// Read on every drain, so a plain flag rather than the watch's lock.
    shutting_down: AtomicBool,
    /// Wakes the listeners' accept loops at shutdown.
    shutdown: watch::Sender<bool>,
    /// Every connection task, so shutdown can wait for them to finish.
    pub(crate) connections: TaskTracker,
}

/// What a client's publish did.
pub(crate) struct Published {
    /// Sessions the message was delivered to.
    pub delivered: usize,
    /// An online subscriber whose queue reached its high watermark.
    pub congested: Option<Arc<Session>>,
}

/// The result of attaching a connection to a session.
pub(crate) struct Attached {
    pub session: Arc<Session>,
    pub session_present: bool,
    pub generation: u64,
}

impl Broker {
    pub fn new(config: BrokerConfig) -> Arc<Broker> {
        Arc::new(Broker {
            config,
            stats: Stats::default(),
            started_at: Instant::now(),
            subscriptions: RwLock::new(TopicTree::new()),
            retained: RwLock::new(RetainedStore::new()),
            sessions: Mutex::new(HashMap::new()),
            next_session_id: AtomicU64::new(1),
            shutting_down: AtomicBool::new(false),
            shutdown: watch::channel(false).0,
            connections: TaskTracker::new(),
        })
    }

    /// Tells every connection to send DISCONNECT 0x8B and close, and the
    /// listeners to stop accepting.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        self.shutdown.send_replace(true);
        // Connections learn it through their session's wake-up rather than
        // a watch receiver each: that keeps an idle connection smaller.
        for session in self.sessions.lock().values() {
            session.wake.notify_one();
        }
    }

    /// Waits until every connection has said goodbye, or `grace` passed.
    pub async fn wait_for_connections(&self, grace: Duration) {
        self.connections.close();
        let _ = tokio::time::timeout(grace, self.connections.wait()).await;
    }

    /// Milliseconds since the broker started: the clock of keep-alive.
    pub(crate) fn now_ms(&self) -> u64 {
        u64::try_from(self.started_at.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(crate) fn for_each_online_session(&self, mut visit: impl FnMut(&Session)) {
        for session in self.sessions.lock().values() {
            if session.is_online() {
                visit(session);
            }
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub fn session_count(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn retained_count(&self) -> usize {
        self.retained.read().len()
    }

    pub fn subscription_count(&self) -> usize {
        self.subscriptions.read().len()
    }

    /// Attaches a new connection to the session of `client_id`, creating,
    /// resuming or replacing it. A connection still attached to the old
    /// session notices through the generation (or `ended`) and leaves with
    /// 0x8E Session taken over.
    pub(crate) fn attach(
        &self,
        client_id: &Arc<str>,
        clean_start: bool,
        expiry_secs: u32,
    ) -> Attached {
        let mut sessions = self.sessions.lock();
        if let Some(existing) = sessions.get(client_id).cloned() {
            let mut state = existing.lock();
            if !clean_start && !state.ended {
                state.cancel_timers();
                state.pending_will = None;
                state.generation += 1;
                state.expiry_secs = expiry_secs;
                let generation = state.generation;
                drop(state);
                existing.set_online(true);
                existing.wake.notify_one();
                return Attached { session: existing, session_present: true, generation };
            }
            drop(state);
            sessions.remove(client_id);
            // Still holding `sessions`, so no other CONNECT for this client
            // id can slip in between ending the old session and inserting
            // the new one.
            self.end_session(&existing);
        }
        let id = self.next_session_id.fetch_add(1, Ordering::Relaxed);
        let session = Arc::new(Session::new(id, client_id.clone(), expiry_secs));
        session.lock().generation = 1;
        session.set_online(true);
        sessions.insert(client_id.clone(), session.clone());
        Attached { session, session_present: false, generation: 1 }
    }

    /// Ends a session: its subscriptions leave the tree, its queue is
    /// dropped, and a connection still attached is woken to leave.
    fn end_session(&self, session: &Arc<Session>) {
        let (subscriptions, orphans, will) = {
            let mut state = session.lock();
            if state.ended {
                return;
            }
            state.ended = true;
            state.cancel_timers();
            state.release_waiters();
            let will = state.pending_will.take();
            let subscriptions = std::mem::take(&mut state.subscriptions);
            let orphans = state.take_shared_deliveries();
            state.queue.clear();
            state.inflight.clear();
            state.inbound_qos2.clear();
            (subscriptions, orphans, will)
        };
        {
            let mut tree = self.subscriptions.write();
            for filter in &subscriptions {
                tree.remove(filter, &session.id);
            }
        }
        session.wake.notify_one();
        self.redistribute(orphans, session.id);
        if let Some(will) = will {
            self.publish(*will);
        }
    }

    /// Called by a connection when it closes for any reason other than
    /// being taken over. Starts the session-expiry and will-delay clocks.
    pub(crate) fn detach(
        self: &Arc<Self>,
        session: &Arc<Session>,
        generation: u64,
        will: Option<PendingWill>,
    ) {
        let (expiry_secs, orphans) = {
            let mut state = session.lock();
            if state.generation != generation || state.ended {
                return;
            }
            session.set_online(false);
            state.release_waiters();
            let orphans = state.take_shared_deliveries();
            (state.expiry_secs, orphans)
        };
        self.redistribute(orphans, session.id);
        if let Some(will) = will {
            if will.delay_secs == 0 {
                self.publish(*will.message);
            } else {
                let mut state = session.lock();
                state.pending_will = Some(will.message);
                if will.delay_secs < expiry_secs {
                    let delay = Duration::from_secs(u64::from(will.delay_secs));
                    state.timers.push(crate::will::schedule(self.clone(), session.clone(), delay));
                }
            }
        }
        if expiry_secs == 0 {
            self.expire(session, generation);
        } else if expiry_secs != u32::MAX {
            let broker = self.clone();
            let expiring = session.clone();
            let timer = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(u64::from(expiry_secs))).await;
                broker.expire(&expiring, generation);
            });
            session.lock().timers.push(timer.abort_handle());
        }
    }

    /// Ends the session if no connection attached to it since `generation`.
    fn expire(&self, session: &Arc<Session>, generation: u64) {
        let mut sessions = self.sessions.lock();
        {
            let state = session.lock();
            if state.generation != generation || session.is_online() {
                return;
            }
        }
        if sessions.get(&session.client_id).is_some_and(|current| Arc::ptr_eq(current, session)) {
            sessions.remove(&session.client_id);
        }
        drop(sessions);
        self.end_session(session);
    }

    /// Subscribes `session` to `filter`. Returns the SUBACK reason code, and
    /// whether the subscription is new (for Retain Handling 1).
    pub(crate) fn subscribe(
        &self,
        session: &Arc<Session>,
        filter: &ByteStr,
        options: SubscriptionOptions,
        identifier: Option<u32>,
    ) -> ReasonCode {
        if self.config.deny_subscribe.iter().any(|denied| denied.as_str() == filter.as_str()) {
            return ReasonCode::UnspecifiedError;
        }
        let subscription =
            Subscription { session: session.clone(), filter: filter.clone(), options, identifier };
        let previous = self.subscriptions.write().insert(filter, session.id, subscription);
        session.lock().subscriptions.insert(filter.clone());
        let is_new = previous.is_none();
        let shared = filter.starts_with("$share/");
        let send_retained = !shared
            && match options.retain_handling {
                RetainHandling::SendOnSubscribe => true,
                RetainHandling::SendIfNewSubscription => is_new,
                RetainHandling::DoNotSend => false,
            };
        if send_retained {
            self.send_retained(session, filter, options, identifier);
        }
        ReasonCode::granted(options.qos)
    }

    fn send_retained(
        &self,
        session: &Arc<Session>,
        filter: &str,
        options: SubscriptionOptions,
        identifier: Option<u32>,
    ) {
        let now = Instant::now();
        let mut matches = Vec::new();
        self.retained.read().for_each_match(filter, |_, message| {
            if !message.is_expired(now) {
                matches.push(message.clone());
            }
        });
        for message in matches {
            let delivery = Delivery {
                qos: message.qos.min(options.qos),
                retain: true,
                subscription_ids: identifier.into_iter().collect(),
                shared_filter: None,
                message,
            };
            self.enqueue(session, delivery, None);
        }
    }

    /// Removes the subscription; false if there was none.
    pub(crate) fn unsubscribe(&self, session: &Arc<Session>, filter: &ByteStr) -> bool {
        let existed = self.subscriptions.write().remove(filter, &session.id).is_some();
        session.lock().subscriptions.remove(filter);
        existed
    }

    /// Stores or clears the retained message of the topic (if RETAIN is set)
    /// and delivers the message to every matching subscription. Returns the
    /// number of sessions it was delivered to. For messages the broker makes
    /// itself (wills, `$SYS`), which have no connection to slow down.
    pub fn publish(&self, message: Message) -> usize {
        self.publish_with(message, None).delivered
    }

    /// Publishes for a client's session; `congested` names a subscriber
    /// whose queue reached its high watermark, which the publisher should
    /// wait for (see `backpressure`).
    pub(crate) fn publish_from(&self, message: Message, publisher: &Arc<Session>) -> Published {
        let publisher = Publisher {
            session: publisher,
            high_watermark: backpressure::high_watermark(self.config.max_queued_messages),
        };
        self.publish_with(message, Some(&publisher))
    }

    fn publish_with(&self, message: Message, publisher: Option<&Publisher<'_>>) -> Published {
        let message = Arc::new(message);
        if message.retain {
            let mut retained = self.retained.write();
            if message.payload.is_empty() {
                retained.remove(&message.topic);
            } else {
                retained.insert(&message.topic, message.clone());
            }
        }
        self.route(&message, publisher)
    }

    fn route(&self, message: &Arc<Message>, publisher: Option<&Publisher<'_>>) -> Published {
        let tree = self.subscriptions.read();
        let mut targets: Vec<(&Subscription, bool)> = Vec::new();
        tree.for_each_match(&message.topic, |found| match found {
            Match::Subscriber { value, .. } => {
                if !(value.options.no_local && value.session.id == message.origin_session) {
                    targets.push((value, false));
                }
            }
            Match::Shared(group) => {
                let picked = group
                    .pick(|_, member| member.session.is_online())
                    .or_else(|| group.pick(|_, _| true));
                if let Some((_, member)) = picked {
                    targets.push((member, true));
                }
            }
        });
        if targets.len() > 1 {
            targets
                .sort_unstable_by_key(|(subscription, shared)| (subscription.session.id, *shared));
        }
        let mut index = 0;
        let mut published = Published { delivered: 0, congested: None };
        while index < targets.len() {
            let (first, shared) = targets[index];
            let mut delivery = self.delivery_for(message, first, shared);
            index += 1;
            // A client whose subscriptions overlap gets the message once, at
            // the highest granted QoS, with every matching identifier (§3.3.4).
            while !shared && index < targets.len() {
                let (next, next_shared) = targets[index];
                if next_shared || next.session.id != first.session.id {
                    break;
                }
                delivery.qos = delivery.qos.max(message.qos.min(next.options.qos));
                delivery.retain |= message.retain && next.options.retain_as_published;
                delivery.subscription_ids.extend(next.identifier);
                index += 1;
            }
            // Register the publisher with the first congested subscriber
            // only: waiting for one is enough to slow it down.
            let waiter = if published.congested.is_none() { publisher } else { None };
            if self.enqueue(&first.session, delivery, waiter) == Enqueued::Congested {
                published.congested = Some(first.session.clone());
            }
            published.delivered += 1;
        }
        published
    }

    fn delivery_for(
        &self,
        message: &Arc<Message>,
        subscription: &Subscription,
        shared: bool,
    ) -> Delivery {
        Delivery {
            message: message.clone(),
            qos: message.qos.min(subscription.options.qos),
            retain: message.retain && subscription.options.retain_as_published,
            subscription_ids: subscription.identifier.into_iter().collect(),
            shared_filter: shared.then(|| subscription.filter.clone()),
        }
    }

    fn enqueue(
        &self,
        session: &Session,
        delivery: Delivery,
        publisher: Option<&Publisher<'_>>,
    ) -> Enqueued {
        let outcome = session.enqueue(
            delivery,
            self.config.max_queued_messages,
            self.config.queue_overflow,
            &self.stats,
            publisher,
        );
        if outcome == Enqueued::Dropped {
            tracing::trace!(client_id = %session.client_id, "message dropped for session");
        }
        outcome
    }

    /// Hands deliveries of a shared subscription that a leaving member never
    /// completed to another member of the same group.
    fn redistribute(&self, orphans: Vec<Delivery>, leaving_session: u64) {
        if orphans.is_empty() {
            return;
        }
        let tree = self.subscriptions.read();
        for orphan in orphans {
            let Some(filter) = orphan.shared_filter.clone() else { continue };
            let mut chosen = None;
            tree.for_each_match(&orphan.message.topic, |found| {
                let Match::Shared(group) = found else { return };
                // Only the group the delivery came through; picking in the
                // others would move their round-robin cursors for nothing.
                let same_group =
                    group.members().next().is_some_and(|(_, member)| member.filter == filter);
                if chosen.is_none() && same_group {
                    chosen = group
                        .pick(|_, member| {
                            member.session.id != leaving_session && member.session.is_online()
                        })
                        .map(|(_, member)| member.session.clone());
                }
            });
            if let Some(session) = chosen {
                self.enqueue(&session, Delivery { retain: false, ..orphan }, None);
            }
        }
    }

    /// The retained message of a topic.
    pub fn retained_message(&self, topic: &str) -> Option<Arc<Message>> {
        self.retained.read().get(topic).cloned()
    }

    /// Drops retained messages whose expiry interval ran out.
    pub fn sweep_expired_retained(&self) {
        let now = Instant::now();
        self.retained.write().retain(|_, message| !message.is_expired(now));
    }
}
