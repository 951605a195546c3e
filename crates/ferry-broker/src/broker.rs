//! The broker's shared state and the operations connections perform on it:
//! attach and detach sessions, subscribe, and route publishes.
//!
//! Locks, and the order in which they may be taken (never the reverse):
//! `sessions` → topic tree → one session's state. The publish path takes
//! only the topic tree's read lock (shared by all publishers) and, briefly,
//! the state lock of each session it delivers to.

use crate::answer::Answer;
use crate::authenticate::Authentication;
use crate::authorize::Authorization;
use crate::backpressure;
use crate::clock::unix_ms;
use crate::config::BrokerConfig;
use crate::durable::record::{self, Record, Target};
use crate::durable::{Store, StoreError};
use crate::message::Message;
use crate::places::Places;
use crate::relay::Posts;
use crate::retained::RetainedStore;
use crate::routing::{EndpointCap, EndpointTarget, RouteSource, Router, Routing, WhenFull};
use crate::service::{ServiceAlreadyInstalled, Services, Signal, TopicService};
use crate::session::{Delivery, Enqueued, Publisher, Reply, Session, SessionState};
use crate::shed_log::ShedLog;
use crate::stats::Stats;
use crate::token_bucket::TokenBucket;
use crate::topic_tree::{Match, TopicTree};
use crate::will::PendingWill;
use ferry_auth::{
    Acl, Authenticator, Credentials, ListenerAuth, Principal, SubscribeVerdict, Verdict,
};
use ferry_mqtt::{topic, ByteStr, QoS, ReasonCode, RetainHandling, SubscriptionOptions};
use parking_lot::{Mutex, RwLock};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};
use tokio::task::AbortHandle;
use tokio_util::task::TaskTracker;

/// How long a new connection waits for the connection it takes over to
/// apply its client's last packets. That connection answers within a turn
/// of its core's loop; this bounds a core that is stuck.
const TAKEOVER_PATIENCE: Duration = Duration::from_secs(1);

/// A subscription's entry in the topic tree. Holds the session itself so a
/// publish needs no lookup by client id.
#[derive(Clone)]
pub(crate) struct Subscription {
    pub session: Arc<Session>,
    /// The filter as subscribed, `$share/...` included.
    pub filter: ByteStr,
    pub options: SubscriptionOptions,
    pub identifier: Option<u32>,
    /// Set when the ACL grants only part of the filter: each message is
    /// checked against this principal's read permission.
    pub reader: Option<Arc<Principal>>,
    /// Who made it, kept when it can receive a service's signals
    /// (`service.rs`), whose payload depends on the reader.
    pub viewer: Option<Arc<Principal>>,
}

/// What [`Broker::session_figures`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionFigures {
    pub online: u64,
    /// Persistent sessions without a connection (the others end with it).
    pub offline: u64,
    /// Messages queued for offline sessions, in memory and in the log.
    pub offline_queued_messages: u64,
    /// Their topic and payload bytes, what `max_queued_bytes` bounds.
    pub offline_queued_bytes: u64,
}

pub struct Broker {
    pub config: BrokerConfig,
    pub stats: Stats,
    pub started_at: Instant,
    /// The durable log, when durability is on.
    pub(crate) store: Option<Store>,
    /// This broker, for the answers of the durable log, which run after
    /// the call that appended has returned.
    me: Weak<Broker>,
    /// Deliveries of stored messages, made by the log's answers and queued
    /// once their batch is answered (`enqueue_stored`), each with its place
    /// in the batch.
    stored: Mutex<Vec<(Arc<Session>, usize, Delivery)>>,
    /// The publishers' acknowledgements of a batch's messages, given once
    /// the batch's deliveries are queued: a publisher that had its PUBACK
    /// earlier could publish again and have that message queued first.
    stored_replies: Mutex<Vec<(Acknowledgement, ReasonCode)>>,
    pub(crate) subscriptions: RwLock<TopicTree<u64, Subscription>>,
    pub(crate) retained: RwLock<RetainedStore<Arc<Message>>>,
    /// Held from a stored retained message's change in `retained` to its
    /// record's append, so that the log (which a restart replays) orders
    /// the changes of one topic as memory did. Never taken on the log
    /// writer's thread, which a holder may wait for.
    retain_order: Mutex<()>,
    pub(crate) sessions: Mutex<crate::sessions::Sessions>,
    pub(crate) next_session_id: AtomicU64,
    /// Read on every drain, so a plain flag rather than the watch's lock.
    shutting_down: AtomicBool,
    /// Wakes the listeners' accept loops at shutdown.
    shutdown: watch::Sender<bool>,
    /// Every connection task, so shutdown can wait for them to finish.
    pub(crate) connections: TaskTracker,
    pub(crate) authentication: Authentication,
    pub(crate) authorization: Authorization,
    pub(crate) routing: Routing,
    pub(crate) services: Services,
    pub(crate) places: Places,
    pub(crate) connection_rate: Mutex<TokenBucket>,
    pub(crate) shed_log: ShedLog,
    /// Set while resident memory is above `max_memory_bytes`.
    pub(crate) memory_high: AtomicBool,
}

/// Where a stored message goes once the log has it: usually one session,
/// kept inline, since the plan travels to the log writer's thread and
/// every allocation freed there costs the connection's thread too.
type Plan = smallvec::SmallVec<[(Arc<Session>, Delivery); 1]>;

/// Whether a publish asks the routes where else it goes.
#[derive(Clone, Copy)]
enum Routes<'e> {
    Apply,
    /// All but into this endpoint, which the message came in through:
    /// sent back up, it could loop between the two brokers.
    Except(&'e str),
    Skip,
}

/// Where a message to store goes once the log has it.
struct Destinations {
    /// Sessions, each with its delivery.
    plan: Plan,
    /// Route endpoints, which read it from the log (`endpoint.rs`).
    endpoints: Vec<EndpointTarget>,
}

/// The retained message a stored retained message replaced in memory
/// before its record was stored, to put back if the log refuses it.
struct Replaced(Option<Arc<Message>>);

/// What became of a publish.
pub(crate) enum Routed {
    /// Delivered now: acknowledge at once.
    Now(Published),
    /// Being stored; it is delivered, and its acknowledgement takes its
    /// place in the publisher's replies, once the log has it. `congested`
    /// is as in `Published`.
    Storing { congested: Option<Arc<Session>>, delivered: usize },
    /// It must be stored and cannot be now (the disk limits): answer with
    /// this reason.
    Refused(ReasonCode),
    /// An endpoint it is routed to is full and blocks (`when_full =
    /// "block"`): nothing was done, and the publisher holds the message,
    /// unanswered, to try again until `timeout` has passed.
    Held { message: Arc<Message>, timeout: Duration },
}

/// Who waits for a stored message's acknowledgement.
pub(crate) enum Acknowledgement {
    /// A client: its PUBACK or PUBREC, queued in its session's replies.
    Client(Answer),
    /// A caller outside any session (`publish_stored`).
    Waiter(oneshot::Sender<ReasonCode>),
}

impl Acknowledgement {
    fn client(&self) -> Option<&Answer> {
        match self {
            Acknowledgement::Client(answer) => Some(answer),
            Acknowledgement::Waiter(_) => None,
        }
    }

    /// Answers a waiter at once, with the publish not stored (refused, or
    /// with nothing to store it for); a client is answered by its own
    /// connection from `Routed`.
    fn answer_now(acknowledgement: Option<Acknowledgement>, reason: ReasonCode) {
        if let Some(Acknowledgement::Waiter(waiter)) = acknowledgement {
            // Nobody may wait any more (the uplink's connection closed).
            let _ = waiter.send(reason);
        }
    }
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
    /// Answered once the session's record is stored, when one was made:
    /// CONNACK waits for it, so a client never hears of a session that a
    /// crash right after could forget.
    pub stored: Option<oneshot::Receiver<()>>,
}

impl Broker {
    /// A broker whose state lives as long as the process.
    pub fn new(config: BrokerConfig) -> Arc<Broker> {
        Broker::with_store(config, None)
    }

    pub(crate) fn with_store(config: BrokerConfig, store: Option<Store>) -> Arc<Broker> {
        let broker = Arc::new_cyclic(|me| Broker {
            stats: Stats::default(),
            started_at: Instant::now(),
            store,
            me: me.clone(),
            stored: Mutex::new(Vec::new()),
            stored_replies: Mutex::new(Vec::new()),
            subscriptions: RwLock::new(TopicTree::new()),
            retained: RwLock::new(RetainedStore::new()),
            retain_order: Mutex::new(()),
            sessions: Mutex::default(),
            next_session_id: AtomicU64::new(1),
            shutting_down: AtomicBool::new(false),
            shutdown: watch::channel(false).0,
            connections: TaskTracker::new(),
            authentication: Default::default(),
            authorization: Default::default(),
            routing: Default::default(),
            services: Default::default(),
            places: Places::default(),
            connection_rate: Mutex::new(TokenBucket::new(
                f64::from(config.max_connection_rate),
                f64::from(config.max_connection_rate),
                Instant::now(),
            )),
            shed_log: ShedLog::default(),
            memory_high: AtomicBool::new(false),
            config,
        });
        if let Some(store) = &broker.store {
            let me = broker.me.clone();
            store.on_batch_answered(move || {
                if let Some(broker) = me.upgrade() {
                    broker.enqueue_stored();
                }
            });
        }
        broker
    }

    /// Who may connect from now on; connections already in are not
    /// re-examined.
    pub fn set_authenticator(&self, authenticator: Authenticator) {
        self.authentication.set(authenticator);
    }

    /// Whether the password file in force has `user`.
    pub fn has_password_user(&self, user: &str) -> bool {
        self.authentication.has_password_user(user)
    }

    /// The verdict of the authenticator in force on `credentials`, for
    /// other protocols than MQTT (the HTTP API): the same files, the same
    /// failure counting, and password hashing kept off the async threads.
    pub async fn authenticate(
        &self,
        policy: ListenerAuth,
        credentials: Credentials<'_>,
    ) -> Verdict {
        self.authentication.verdict(policy, credentials).await
    }

    /// The ACL from now on (`None`: everything allowed); see
    /// `Authorization::set`.
    pub fn set_acl(&self, acl: Option<Acl>) {
        self.authorization.set(acl);
    }

    /// Where messages go beyond local subscribers from now on (`None`:
    /// nowhere). Routed messages are stored, so routes need durability.
    pub fn set_router(&self, router: Option<Arc<dyn Router>>) {
        self.routing.set(router);
    }

    /// Whether the ACL in force lets `principal` publish on `topic`: for a
    /// service publishing where a client asked it to (an MQTT 5 response
    /// topic), which must not reach further than the client itself.
    pub fn may_publish(&self, principal: &Principal, topic: &str) -> bool {
        self.authorization.may_publish(principal, topic)
    }

    /// Installs the service that answers its topics inside the process
    /// (`service.rs`); once per broker.
    pub fn install_service(
        &self,
        service: Arc<dyn TopicService>,
    ) -> Result<(), ServiceAlreadyInstalled> {
        self.services.install(service)
    }

    /// Caps the log bytes `endpoint` may hold, and says what happens past
    /// it.
    pub fn set_endpoint_cap(&self, endpoint: &str, cap: EndpointCap) {
        self.routing.set_cap(endpoint, cap);
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

    /// The durable state's figures, when durability is on.
    pub fn store_figures(&self) -> Option<crate::durable::StoreFigures> {
        self.store.as_ref().map(Store::figures)
    }

    /// Whether the durable log can take writes (`Store::check_ready`);
    /// `Ok` without durability.
    pub fn check_store_ready(&self) -> Result<(), String> {
        self.store.as_ref().map_or(Ok(()), Store::check_ready)
    }

    /// Stores what the durable log has been given and stops its writer:
    /// the last step of a graceful shutdown.
    pub fn close_store(&self) {
        if let Some(store) = &self.store {
            store.close();
        }
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

    /// Says `true` once shutdown has begun. Wait on it with
    /// `wait_for(|&stopping| stopping)`, never `changed()`: a task first
    /// polled after shutdown began (on a busy runtime, or when the signal
    /// came during startup) would wait for a change that already happened,
    /// and hold the shutdown up.
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

    /// Sessions online and offline, and what the offline ones have queued.
    /// Visits every session, each under its own lock, for a scrape: the
    /// map's lock is held only to copy the list, so CONNECTs wait for a
    /// copy of pointers, not for the visit.
    pub fn session_figures(&self) -> SessionFigures {
        let sessions = self.sessions.lock().snapshot();
        let mut figures = SessionFigures::default();
        for session in sessions {
            if session.is_online() {
                figures.online += 1;
                continue;
            }
            figures.offline += 1;
            let state = session.lock();
            figures.offline_queued_messages += (state.queue.len() + state.on_disk.len()) as u64;
            figures.offline_queued_bytes += state.queued_bytes();
        }
        figures
    }

    /// Attaches a new connection to the session of `client_id`, creating,
    /// resuming (unless it ends with its connection) or replacing it. A
    /// connection still attached to the old session notices through the
    /// generation (or `ended`) and leaves with 0x8E Session taken over.
    pub(crate) fn attach(
        &self,
        client_id: &Arc<str>,
        clean_start: bool,
        expiry_secs: u32,
    ) -> Attached {
        let mut sessions = self.sessions.lock();
        if let Some(existing) = sessions.get(client_id).cloned() {
            let mut state = existing.lock();
            // A session whose expiry is 0 lasts as long as its connection
            // (3.1.1 §3.1.2.4: Clean Session 1's state "MUST NOT be reused
            // in any subsequent Session"), so a connection taking it over
            // starts afresh, as with Mosquitto, and its will is due.
            if !clean_start && !state.ended && state.expiry_secs != 0 {
                state.cancel_timers();
                state.set_will(None);
                state.generation += 1;
                state.clear_replies();
                state.forget_close_request();
                let expiry_changed = state.expiry_secs != expiry_secs;
                state.expiry_secs = expiry_secs;
                let generation = state.generation;
                drop(state);
                existing.set_online(true);
                existing.wake.notify_one();
                let stored = self.persist_resumed(&existing, expiry_changed, expiry_secs);
                return Attached { session: existing, session_present: true, generation, stored };
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
        sessions.insert(session.clone());
        let stored = self.persist_expiry(&session, expiry_secs);
        Attached { session, session_present: false, generation: 1, stored }
    }

    /// Lets the connection that holds `client_id`'s session, if one does,
    /// apply what its client already sent before a new connection attaches
    /// ([`Session::settle`]).
    pub(crate) async fn settle_previous(&self, client_id: &str) {
        let existing = self.sessions.lock().get(client_id).cloned();
        if let Some(existing) = existing {
            existing.settle(TAKEOVER_PATIENCE).await;
        }
    }

    pub(crate) fn me(&self) -> Weak<Broker> {
        self.me.clone()
    }

    /// The durable log, if there is one and `session` is in it.
    pub(crate) fn store_for(&self, session: &Session) -> Option<&Store> {
        self.store.as_ref().filter(|_| session.is_persistent())
    }

    /// Puts the session in the durable log with its expiry interval, or
    /// takes it out if the interval is 0 (it ends with its connection).
    /// When it puts it in, the receiver is answered once that is stored.
    pub(crate) fn persist_expiry(
        &self,
        session: &Session,
        expiry_secs: u32,
    ) -> Option<oneshot::Receiver<()>> {
        let store = self.store.as_ref()?;
        if expiry_secs > 0 {
            session.set_persistent(true);
            let record = Record::SessionOpened {
                session: session.id,
                client_id: session.client_id.to_string(),
                expiry_secs,
            };
            let (stored, answer) = oneshot::channel();
            let client_id = session.client_id.clone();
            store.append(record, move |result| {
                if let Err(error) = result {
                    tracing::warn!(%client_id, %error, "session not stored; it lasts until a restart");
                }
                let _ = stored.send(());
            });
            return Some(answer);
        }
        if session.is_persistent() {
            session.set_persistent(false);
            store.note(Record::SessionEnded { session: session.id });
        }
        None
    }

    fn persist_resumed(
        &self,
        session: &Session,
        expiry_changed: bool,
        expiry_secs: u32,
    ) -> Option<oneshot::Receiver<()>> {
        let stored = if expiry_changed || (expiry_secs > 0 && !session.is_persistent()) {
            self.persist_expiry(session, expiry_secs)
        } else {
            None
        };
        if let Some(store) = self.store_for(session) {
            store.note(Record::Connected { session: session.id });
        }
        stored
    }

    /// Ends a session: its subscriptions leave the tree, its queue is
    /// dropped, and a connection still attached is woken to leave.
    pub(crate) fn end_session(&self, session: &Arc<Session>) {
        let (subscriptions, orphans, will) = {
            let mut state = session.lock();
            if state.ended {
                return;
            }
            state.ended = true;
            state.cancel_timers();
            state.release_waiters();
            let will = state.take_will();
            let subscriptions = std::mem::take(&mut state.subscriptions);
            let orphans = state.take_shared_deliveries();
            state.clear_queue();
            state.inflight.clear();
            state.ending = 0;
            state.clear_inbound();
            (subscriptions, orphans, will)
        };
        {
            let mut tree = self.subscriptions.write();
            for filter in subscriptions.iter() {
                tree.remove(filter, &session.id);
            }
        }
        if let Some(store) = self.store_for(session) {
            session.set_persistent(false);
            store.note(Record::SessionEnded { session: session.id });
        }
        session.wake.notify_one();
        self.redistribute(orphans, session);
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
            state.forget_close_request();
            state.shed();
            let orphans = state.take_shared_deliveries();
            if self.store_for(session).is_some() {
                state.park_stored();
            }
            (state.expiry_secs, orphans)
        };
        self.redistribute(orphans, session);
        self.record_disconnect(session, generation);
        if let Some(will) = will {
            if will.delay_secs == 0 {
                self.publish(*will.message);
            } else {
                self.delay_will(session, generation, expiry_secs, will);
            }
        }
        if expiry_secs == 0 {
            self.expire(session, generation);
        } else if expiry_secs != u32::MAX {
            self.start_expiry_clock(
                session,
                generation,
                Duration::from_secs(u64::from(expiry_secs)),
            );
        }
    }

    /// Records that the connection of `generation` left. A new connection
    /// may have resumed the session since the caller checked, and the
    /// record saying so may be ahead of this one in the log: then it is
    /// stated again after it. Otherwise a restart would count the session
    /// offline from now, and could expire it, queue and all, while it is in
    /// use.
    fn record_disconnect(&self, session: &Session, generation: u64) {
        let Some(store) = self.store_for(session) else { return };
        store.note(Record::Disconnected { session: session.id, at_ms: unix_ms() });
        let resumed = session.lock().generation != generation && session.is_online();
        if resumed {
            store.note(Record::Connected { session: session.id });
        }
    }

    /// Holds the will of the connection of `generation`, which just left,
    /// for its delay. The session was unlocked since that connection
    /// detached: a new connection may have resumed it meanwhile, which
    /// cancels the will, or ended it, which makes the will due now
    /// (§3.1.3.2.2).
    fn delay_will(
        self: &Arc<Self>,
        session: &Arc<Session>,
        generation: u64,
        expiry_secs: u32,
        will: PendingWill,
    ) {
        if let Some(store) = self.store_for(session) {
            store.note(Record::WillPending {
                session: session.id,
                delay_secs: will.delay_secs,
                message: stored_message(&will.message, store),
            });
        }
        let mut state = session.lock();
        if state.generation == generation && !state.ended {
            state.set_will(Some(will.message));
            if will.delay_secs < expiry_secs {
                let delay = Duration::from_secs(u64::from(will.delay_secs));
                state.add_timer(self.schedule_will(session.clone(), delay));
            }
            return;
        }
        let due = state.generation == generation;
        drop(state);
        if due {
            self.publish(*will.message);
        }
        // The log may hold the new connection's record before the pending
        // will: this one closes it after.
        if let Some(store) = self.store_for(session) {
            store.note(Record::WillDone { session: session.id });
        }
    }

    /// Ends the session after `after`, unless a connection attaches first.
    pub(crate) fn start_expiry_clock(
        self: &Arc<Self>,
        session: &Arc<Session>,
        generation: u64,
        after: Duration,
    ) {
        let broker = self.clone();
        let expiring = session.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            broker.expire(&expiring, generation);
        });
        session.lock().add_timer(timer.abort_handle());
    }

    /// Ends the session if no connection attached to it since `generation`.
    pub(crate) fn expire(&self, session: &Arc<Session>, generation: u64) {
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
        reader: Option<Arc<Principal>>,
        viewer: Option<Arc<Principal>>,
    ) -> ReasonCode {
        if self.config.deny_subscribe.iter().any(|denied| denied.as_str() == filter.as_str()) {
            return ReasonCode::UnspecifiedError;
        }
        let subscription = Subscription {
            session: session.clone(),
            filter: filter.clone(),
            options,
            identifier,
            reader: reader.clone(),
            viewer,
        };
        let previous = self.subscriptions.write().insert(filter, session.id, subscription);
        session.lock().subscriptions.insert(filter.clone());
        let is_new = previous.is_none();
        let shared = topic::is_shared_filter(filter);
        let send_retained = !shared
            && match options.retain_handling {
                RetainHandling::SendOnSubscribe => true,
                RetainHandling::SendIfNewSubscription => is_new,
                RetainHandling::DoNotSend => false,
            };
        if send_retained {
            self.send_retained(session, filter, options, identifier, reader.as_deref());
        }
        ReasonCode::granted(options.qos)
    }

    fn send_retained(
        &self,
        session: &Arc<Session>,
        filter: &str,
        options: SubscriptionOptions,
        identifier: Option<u32>,
        reader: Option<&Principal>,
    ) {
        let now = Instant::now();
        let mut matches = Vec::new();
        self.retained.read().for_each_match(filter, |_, message| {
            if !message.is_expired(now) {
                matches.push(message.clone());
            }
        });
        if let Some(reader) = reader {
            matches.retain(|message| self.authorization.may_receive(reader, &message.topic));
        }
        for message in matches {
            let delivery = Delivery {
                qos: message.qos.min(options.qos),
                retain: true,
                subscription_ids: identifier.into_iter().collect(),
                shared_filter: None,
                offset: None,
                packet_id: 0,
                restored: false,
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

    /// Publishes the session's pending will after `delay`, if it is still
    /// pending then: a reconnect clears it, and the end of the session publishes
    /// it early (§3.1.3.2.2).
    pub(crate) fn schedule_will(
        self: &Arc<Self>,
        session: Arc<Session>,
        delay: Duration,
    ) -> AbortHandle {
        let broker = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let will = session.lock().take_will();
            if let Some(message) = will {
                broker.publish(*message);
                if let Some(store) = broker.store_for(&session) {
                    store.note(Record::WillDone { session: session.id });
                }
            }
        })
        .abort_handle()
    }

    /// Checks a resumed session's subscriptions against the ACL for the
    /// client now connected: a client id taken over by another user must
    /// not inherit subscriptions the ACL would refuse that user. Refused
    /// ones are removed (and the removal stored); the rest are marked for
    /// per-message checks as the ACL now says.
    pub(crate) fn recheck_subscriptions(&self, session: &Arc<Session>, principal: &Arc<Principal>) {
        let Some(acl) = self.authorization.acl() else { return };
        let filters: Vec<ByteStr> = session.lock().subscriptions.iter().cloned().collect();
        let mut refused = Vec::new();
        {
            let mut tree = self.subscriptions.write();
            for filter in filters {
                let verdict = acl.may_subscribe(principal, &filter);
                let Some(mut subscription) = tree.remove(&filter, &session.id) else { continue };
                match verdict {
                    SubscribeVerdict::Denied => refused.push(filter),
                    SubscribeVerdict::Allowed | SubscribeVerdict::Filtered => {
                        subscription.reader =
                            (verdict == SubscribeVerdict::Filtered).then(|| principal.clone());
                        tree.insert(&filter, session.id, subscription);
                    }
                }
            }
        }
        if refused.is_empty() {
            return;
        }
        let mut state = session.lock();
        for filter in &refused {
            state.subscriptions.remove(filter);
        }
        drop(state);
        tracing::info!(
            client_id = %session.client_id,
            filters = ?refused.iter().map(ByteStr::as_str).collect::<Vec<_>>(),
            "subscriptions the ACL refuses this client removed from its session"
        );
        if let Some(store) = self.store_for(session) {
            let filters = refused.iter().map(ToString::to_string).collect();
            store.note(Record::Unsubscribed { session: session.id, filters });
        }
    }

    /// Stores or clears the retained message of the topic (if RETAIN is set)
    /// and delivers the message to every matching subscription. For
    /// messages the broker makes itself (wills, `$SYS`), which have no
    /// connection to slow down or acknowledge.
    pub fn publish(&self, message: Message) {
        self.publish_with(Arc::new(message), None, None, Routes::Apply);
    }

    /// Publishes a message that came in through the uplink `endpoint` (a
    /// command from the cloud), routed like any other but never back into
    /// that endpoint, and answers once the durable log has it as the fsync
    /// policy says, so that the remote's acknowledgement can wait for that
    /// as a local client's does: `Success` (or `NoMatchingSubscribers`), or
    /// the reason it was refused. What nobody needs stored is answered at
    /// once.
    pub fn publish_stored(
        &self,
        message: Message,
        endpoint: &str,
    ) -> oneshot::Receiver<ReasonCode> {
        let (waiter, answered) = oneshot::channel();
        let waiter = Some(Acknowledgement::Waiter(waiter));
        self.publish_with(Arc::new(message), None, waiter, Routes::Except(endpoint));
        answered
    }

    /// Publishes a service's message (`service.rs`) to its subscribers,
    /// each getting the payload `signal` gives its subscription's maker,
    /// or nothing. Not stored and not routed: a signal is about a moment
    /// (a twin's change, a command for a device) and is made again from
    /// the service's own state if it matters later. Not retained either,
    /// since a retained copy could be read by anyone later.
    pub fn publish_signal(&self, message: Message, signal: &dyn Signal) {
        let message = Arc::new(message);
        let tree = self.subscriptions.read();
        let targets = self.targets(&tree, &message);
        for_each_delivery(&message, &targets, |subscription, mut delivery| {
            let Some(payload) = signal.view(subscription.viewer.as_deref()) else { return };
            delivery.message = Arc::new(message.with_payload(payload));
            self.enqueue(&subscription.session, delivery, None);
        });
    }

    /// Remembers who is now connected to a resumed session on its
    /// subscriptions that can receive signals, whose makers a restart
    /// forgot (`service.rs`).
    pub(crate) fn renew_viewers(&self, session: &Arc<Session>, principal: &Arc<Principal>) {
        if !self.services.is_active() {
            return;
        }
        let filters: Vec<ByteStr> = session.lock().subscriptions.iter().cloned().collect();
        let mut tree = self.subscriptions.write();
        for filter in filters.iter().filter(|filter| self.services.may_signal(filter)) {
            if let Some(mut subscription) = tree.remove(filter, &session.id) {
                subscription.viewer = Some(principal.clone());
                tree.insert(filter, session.id, subscription);
            }
        }
    }

    /// Publishes for an administrator (the admin API): routed like a
    /// message the broker makes, no ACL asked, and answered once the
    /// durable log has it when it must be stored. Says how many sessions
    /// it went to, or why it was refused.
    pub async fn publish_admin(&self, message: Message) -> Result<usize, ReasonCode> {
        let (waiter, answered) = oneshot::channel();
        let waiter = Some(Acknowledgement::Waiter(waiter));
        match self.publish_with(Arc::new(message), None, waiter, Routes::Apply) {
            Routed::Now(published) => Ok(published.delivered),
            Routed::Storing { delivered, .. } => match answered.await {
                Ok(reason) if !reason.is_error() => Ok(delivered),
                Ok(reason) => Err(reason),
                Err(_) => Err(ReasonCode::UnspecifiedError),
            },
            Routed::Refused(reason) => Err(reason),
            // Only a client's publish is held.
            Routed::Held { .. } => Err(ReasonCode::QuotaExceeded),
        }
    }

    /// Removes the retained message of `topic` without delivering anything
    /// (the admin API's delete). With durability through a record of its
    /// own, as a client's empty retained publish would be; answers once
    /// the removal holds.
    pub(crate) async fn clear_retained(&self, topic: ByteStr) {
        let message = Arc::new(Message::new(
            topic,
            bytes::Bytes::new(),
            QoS::AtMostOnce,
            true,
            ferry_mqtt::Properties::default(),
            0,
        ));
        match self.store.as_ref().filter(|_| !message.topic.starts_with(topic::SYS_PREFIX)) {
            Some(store) => {
                let (waiter, answered) = oneshot::channel();
                let destinations = Destinations { plan: Plan::new(), endpoints: Vec::new() };
                let waiter = Some(Acknowledgement::Waiter(waiter));
                self.store_then_deliver(store, message, destinations, None, waiter, None);
                let _ = answered.await;
            }
            None => {
                self.retain(&message);
            }
        }
    }

    /// Publishes without asking the routes: for what an endpoint republishes
    /// (`ferry-routes`' topic endpoint), which routing again could loop.
    pub fn publish_unrouted(&self, message: Message) {
        self.publish_with(Arc::new(message), None, None, Routes::Skip);
    }

    /// Publishes for a client's session. When delivered at once,
    /// `congested` names a subscriber whose queue reached its high
    /// watermark, which the publisher should wait for (see `backpressure`);
    /// when the message must be stored first, `answer` is queued in the
    /// publisher's replies once it is.
    pub(crate) fn publish_from(
        &self,
        message: Arc<Message>,
        publisher: &Arc<Session>,
        username: Option<&str>,
        answer: Option<Answer>,
    ) -> Routed {
        let publisher = Publisher {
            session: publisher,
            username,
            high_watermark: backpressure::high_watermark(self.config.online_queue()),
        };
        self.publish_with(
            message,
            Some(&publisher),
            answer.map(Acknowledgement::Client),
            Routes::Apply,
        )
    }

    fn publish_with(
        &self,
        message: Arc<Message>,
        publisher: Option<&Publisher<'_>>,
        answer: Option<Acknowledgement>,
        routes: Routes<'_>,
    ) -> Routed {
        // `$SYS` is remade every interval from live counters: storing it
        // would only fill the log.
        let store = self.store.as_ref().filter(|_| !message.topic.starts_with(topic::SYS_PREFIX));
        if store.is_none() && message.retain {
            self.retain(&message);
        }
        let source = publisher.map_or_else(RouteSource::default, |publisher| RouteSource {
            client_id: Some(&publisher.session.client_id),
            username: publisher.username,
        });
        let endpoints = match (store, routes) {
            (Some(_), Routes::Apply) => self.routing.route(&message, source, unix_ms()),
            (Some(_), Routes::Except(came_from)) => {
                let mut endpoints = self.routing.route(&message, source, unix_ms());
                endpoints.retain(|target| *target.endpoint != *came_from);
                endpoints
            }
            _ => Vec::new(),
        };
        let tree = self.subscriptions.read();
        let targets = self.targets(&tree, &message);
        if let Some(store) = store {
            let persistent = |(subscription, _): &(&Subscription, bool)| {
                subscription.session.is_persistent() && subscription.options.qos != QoS::AtMostOnce
            };
            let must_store = message.retain
                || !endpoints.is_empty()
                || (message.qos != QoS::AtMostOnce && targets.iter().any(persistent));
            if let Some((full, cap)) =
                self.routing.full(&endpoints, |name| store.endpoint_bytes(name))
            {
                drop(tree);
                let client = answer.as_ref().and_then(Acknowledgement::client);
                if cap.when_full == WhenFull::Block && client.is_some() {
                    return Routed::Held { message, timeout: cap.block_timeout };
                }
                self.stats.refused_endpoint_full.inc();
                self.shed_log.refused(
                    source.client_id.unwrap_or(""),
                    &format!("PUBLISH routed to endpoint {full:?}, which holds its max_bytes"),
                    &message.topic,
                );
                if let Some(answer) = client {
                    if answer.exactly_once {
                        answer.session.lock().release_inbound(answer.packet_id);
                    }
                }
                Acknowledgement::answer_now(answer, ReasonCode::QuotaExceeded);
                return Routed::Refused(ReasonCode::QuotaExceeded);
            }
            if must_store && !store.has_room() {
                drop(tree);
                self.stats.refused_disk_full.inc();
                if let Some(answer) = answer.as_ref().and_then(Acknowledgement::client) {
                    if answer.exactly_once {
                        answer.session.lock().release_inbound(answer.packet_id);
                    }
                }
                Acknowledgement::answer_now(answer, ReasonCode::QuotaExceeded);
                return Routed::Refused(ReasonCode::QuotaExceeded);
            }
            if must_store {
                let mut plan = Plan::with_capacity(targets.len());
                for_each_delivery(&message, &targets, |subscription, delivery| {
                    plan.push((subscription.session.clone(), delivery));
                });
                drop(tree);
                let delivered = plan.len();
                let destinations = Destinations { plan, endpoints };
                let congested =
                    self.store_then_deliver(store, message, destinations, publisher, answer, None);
                return Routed::Storing { congested, delivered };
            }
        }
        let mut published = Published { delivered: 0, congested: None };
        for_each_delivery(&message, &targets, |subscription, delivery| {
            // Register the publisher with the first congested subscriber
            // only: waiting for one is enough to slow it down.
            let waiter = if published.congested.is_none() { publisher } else { None };
            if self.enqueue(&subscription.session, delivery, waiter) == Enqueued::Congested {
                published.congested = Some(subscription.session.clone());
            }
            published.delivered += 1;
        });
        Acknowledgement::answer_now(answer, publish_reason(published.delivered));
        Routed::Now(published)
    }

    /// The subscriptions a message goes to, each with whether it came
    /// through a shared group, sorted by session so that one session's
    /// overlapping subscriptions are next to each other.
    fn targets<'t>(
        &self,
        tree: &'t TopicTree<u64, Subscription>,
        message: &Message,
    ) -> Vec<(&'t Subscription, bool)> {
        let mut targets: Vec<(&Subscription, bool)> = Vec::new();
        tree.for_each_match(&message.topic, |found| match found {
            Match::Subscriber { value, .. } => {
                if !(value.options.no_local && value.session.id == message.origin_session)
                    && value
                        .reader
                        .as_ref()
                        .is_none_or(|reader| self.authorization.may_receive(reader, &message.topic))
                {
                    targets.push((value, false));
                }
            }
            Match::Shared(group) => {
                let may_read = |member: &Subscription| {
                    member
                        .reader
                        .as_ref()
                        .is_none_or(|reader| self.authorization.may_receive(reader, &message.topic))
                };
                let picked = group
                    .pick(|_, member| member.session.is_online() && may_read(member))
                    .or_else(|| group.pick(|_, member| may_read(member)));
                if let Some((_, member)) = picked {
                    targets.push((member, true));
                }
            }
        });
        if targets.len() > 1 {
            targets
                .sort_unstable_by_key(|(subscription, shared)| (subscription.session.id, *shared));
        }
        targets
    }

    /// Appends the message's record; once it is stored, delivers it as
    /// `destinations` say and answers the publisher. Persistent sessions get their
    /// packet ids now, so the record holds them; every target counts the
    /// delivery as coming, so back-pressure sees it. Returns the subscriber
    /// the publisher should wait for, if one is congested. `moved_from`
    /// names a stored delivery this one replaces (`record::Published`).
    fn store_then_deliver(
        &self,
        store: &Store,
        message: Arc<Message>,
        destinations: Destinations,
        publisher: Option<&Publisher<'_>>,
        answer: Option<Acknowledgement>,
        moved_from: Option<(u64, u64)>,
    ) -> Option<Arc<Session>> {
        let Destinations { mut plan, endpoints } = destinations;
        let mut targets = smallvec::SmallVec::new();
        let mut congested = None;
        plan.retain_mut(|(session, delivery)| {
            let persistent = session.is_persistent() && delivery.qos != QoS::AtMostOnce;
            let waiter = if congested.is_none() { publisher } else { None };
            let (expected, packet_id) = session.expect(waiter, persistent);
            match expected {
                Enqueued::Dropped => return false,
                Enqueued::Congested => congested = Some(session.clone()),
                Enqueued::Queued => {}
            }
            if persistent {
                delivery.packet_id = packet_id;
                targets.push(Target {
                    session: session.id,
                    qos: delivery.qos,
                    retain: delivery.retain,
                    packet_id,
                    subscription_ids: delivery.subscription_ids.clone(),
                });
            }
            true
        });
        let client = answer.as_ref().and_then(Acknowledgement::client);
        let inbound = client
            .filter(|answer| answer.exactly_once && answer.session.is_persistent())
            .map(|answer| (answer.session.id, answer.packet_id));
        if let Some(answer) = client {
            answer.session.lock().hold_reply(answer.generation, Reply::Waiting);
        }
        // Who to wake once it is stored: the record owns the targets.
        let routed_to: Vec<EndpointTarget> = endpoints.clone();
        let publisher = publisher
            .filter(|_| !endpoints.is_empty())
            .map(|publisher| publisher.session.client_id.clone());
        let record = Record::Published(Box::new(record::Published {
            message: stored_message(&message, store),
            inbound,
            moved_from,
            targets,
            endpoints,
            publisher,
        }));
        let broker = self.me.upgrade();
        // A retained message is retained from now, not once stored: a
        // client that publishes it and then subscribes (or anyone who
        // subscribes meanwhile, and so is not among `plan`) gets it, as
        // from a broker without a log.
        let order = message.retain.then(|| self.retain_order.lock());
        let replaced = order.as_ref().map(|_| Replaced(self.retain(&message)));
        store.append(record, move |result| {
            if let Some(broker) = broker {
                broker.deliver_stored(result, &message, plan, &routed_to, answer, replaced);
            }
        });
        drop(order);
        congested
    }

    /// On the log writer's thread: the message's record is stored (or not).
    fn deliver_stored(
        &self,
        result: Result<u64, StoreError>,
        message: &Arc<Message>,
        plan: Plan,
        routed_to: &[EndpointTarget],
        answer: Option<Acknowledgement>,
        replaced: Option<Replaced>,
    ) {
        let reason = match result {
            Ok(offset) => {
                self.routing.wake(routed_to);
                let delivered = plan.len() + routed_to.len();
                let mut stored = self.stored.lock();
                for (session, mut delivery) in plan {
                    if delivery.packet_id != 0 {
                        delivery.offset = NonZeroU64::new(offset);
                    }
                    let place = stored.len();
                    stored.push((session, place, delivery));
                }
                publish_reason(delivered)
            }
            Err(error) => {
                for (session, _) in &plan {
                    session.unexpect();
                }
                self.stats.store_failures.inc();
                tracing::warn!(%error, topic = %message.topic, "message refused: the durable log could not store it");
                if let Some(Replaced(previous)) = replaced {
                    self.unretain(message, previous);
                }
                let client = answer.as_ref().and_then(Acknowledgement::client);
                if let Some(answer) = client.filter(|answer| answer.exactly_once) {
                    // Not taken: a retransmission must be treated as new.
                    answer.session.lock().release_inbound(answer.packet_id);
                }
                ReasonCode::UnspecifiedError
            }
        };
        if let Some(answer) = answer {
            self.stored_replies.lock().push((answer, reason));
        }
    }

    /// On the log writer's thread, once a batch is answered: queues the
    /// deliveries its messages made, each session's in one go and in the
    /// order they were stored, then gives the publishers their
    /// acknowledgements. Per delivery, the lock of a busy subscriber's
    /// session was the most contended lock of the durable path.
    fn enqueue_stored(&self) {
        let mut batch = std::mem::take(&mut *self.stored.lock());
        // By place within a session, so each session's keep their order.
        // Not a stable sort, and the batch's vector is kept for the next:
        // a fresh scratch buffer per batch cost page faults on the writer.
        batch.sort_unstable_by_key(|(session, place, _)| (session.id, *place));
        let mut evicted = Vec::new();
        let mut deliveries = batch.drain(..).peekable();
        while let Some((session, _, first)) = deliveries.next() {
            let same_session = std::iter::from_fn(|| {
                deliveries
                    .next_if(|(next, _, _)| next.id == session.id)
                    .map(|(_, _, delivery)| delivery)
            });
            session.enqueue_expected(
                std::iter::once(first).chain(same_session),
                self.config.queue_bound(),
                &self.stats,
                &mut evicted,
            );
            for offset in evicted.drain(..) {
                self.delivery_over(&session, Some(offset));
            }
        }
        drop(deliveries);
        let mut stored = self.stored.lock();
        if stored.is_empty() {
            *stored = batch;
        }
        drop(stored);
        let mut replies = std::mem::take(&mut *self.stored_replies.lock());
        let mut wakes = Posts::default();
        for (answer, reason) in replies.drain(..) {
            match answer {
                Acknowledgement::Client(answer) => {
                    let packet = answer.packet(reason);
                    if answer.session.fill_reply_quietly(answer.generation, packet) {
                        wakes.push(answer.relay, answer.session);
                    }
                }
                Acknowledgement::Waiter(waiter) => {
                    let _ = waiter.send(reason);
                }
            }
        }
        wakes.send();
        let mut kept = self.stored_replies.lock();
        if kept.is_empty() {
            *kept = replies;
        }
    }

    /// Makes `message` its topic's retained message (an empty one clears
    /// it) and returns the one it replaced.
    fn retain(&self, message: &Arc<Message>) -> Option<Arc<Message>> {
        let mut retained = self.retained.write();
        if message.payload.is_empty() {
            retained.remove(&message.topic)
        } else {
            retained.insert(&message.topic, message.clone())
        }
    }

    /// Takes back the change `retain(message)` made, which the log refused,
    /// unless a later one has replaced it: what the topic retains is again
    /// what the log holds.
    fn unretain(&self, message: &Arc<Message>, previous: Option<Arc<Message>>) {
        let mut retained = self.retained.write();
        let current = retained.get(&message.topic);
        let still_ours = match current {
            Some(current) => Arc::ptr_eq(current, message),
            None => message.payload.is_empty(),
        };
        if !still_ours {
            return;
        }
        match previous {
            Some(previous) => retained.insert(&message.topic, previous),
            None => retained.remove(&message.topic),
        };
    }

    fn enqueue(
        &self,
        session: &Session,
        delivery: Delivery,
        publisher: Option<&Publisher<'_>>,
    ) -> Enqueued {
        let mut evicted = Vec::new();
        let outcome = session.enqueue(
            delivery,
            self.config.queue_bound(),
            &self.stats,
            publisher,
            &mut evicted,
        );
        for offset in evicted {
            self.delivery_over(session, Some(offset));
        }
        if outcome == Enqueued::Dropped {
            tracing::trace!(client_id = %session.client_id, "message dropped for session");
        }
        outcome
    }

    /// Reads up to `max` deliveries of `session` back from the log into its
    /// queue. Called by its connection, under the session's lock, when the
    /// queue runs low; a message the log cannot give back is logged,
    /// counted and recorded as over rather than blocking the queue.
    pub(crate) fn load_from_disk(&self, session: &Session, state: &mut SessionState, max: usize) {
        let Some(store) = &self.store else { return };
        for _ in 0..max {
            let Some(offset) = state.on_disk.pop_first() else { return };
            let delivery = store.read_published(offset.get()).and_then(|published| {
                let target = published.targets.into_iter().find(|t| t.session == session.id);
                let Some(target) = target else {
                    return Err(crate::durable::record::RecordError::Invalid {
                        field: "queued message",
                        reason: format!("its record does not name session {}", session.id),
                    }
                    .into());
                };
                Ok(Delivery {
                    message: Arc::new(message_from_stored(&published.message)),
                    qos: target.qos,
                    retain: target.retain,
                    subscription_ids: target.subscription_ids,
                    shared_filter: None,
                    offset: Some(offset),
                    packet_id: target.packet_id,
                    restored: store.stored_before_restart(offset.get()),
                })
            });
            match delivery {
                Ok(delivery) => state.push_loaded(delivery),
                Err(error) => {
                    self.stats.store_failures.inc();
                    tracing::error!(client_id = %session.client_id, offset = offset.get(), %error, "queued message cannot be read back from the durable log; skipped");
                    self.delivery_over(session, Some(offset));
                }
            }
        }
    }

    /// Records that a persistent session is done with a stored delivery
    /// (acknowledged, expired or dropped), so a restart does not send it
    /// again.
    pub(crate) fn delivery_over(&self, session: &Session, offset: Option<NonZeroU64>) {
        if let (Some(store), Some(offset)) = (self.store_for(session), offset) {
            store.note(Record::delivered(session.id, vec![offset.get()]));
        }
    }

    /// Hands deliveries of a shared subscription that a leaving member never
    /// completed to another member of the same group.
    fn redistribute(&self, orphans: Vec<Delivery>, leaving: &Session) {
        let leaving_session = leaving.id;
        if orphans.is_empty() {
            return;
        }
        let mut handed = Vec::with_capacity(orphans.len());
        {
            let tree = self.subscriptions.read();
            for orphan in orphans {
                let Some(filter) = orphan.shared_filter.clone() else { continue };
                let mut chosen = None;
                tree.for_each_match(&orphan.message.topic, |found| {
                    let Match::Shared(group) = found else { return };
                    // Only the group the delivery came through; picking in
                    // the others would move their round-robin cursors for
                    // nothing.
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
                    handed.push((session, orphan));
                }
            }
        }
        for (session, orphan) in handed {
            let from = orphan.offset;
            let handed_over = Delivery { retain: false, offset: None, packet_id: 0, ..orphan };
            let persistent = session.is_persistent() && handed_over.qos != QoS::AtMostOnce;
            match self.store.as_ref().filter(|_| persistent) {
                // Stored for its new member by the record that ends it for
                // the old one: a crash leaves it with exactly one of them.
                Some(store) => {
                    let moved_from = self
                        .store_for(leaving)
                        .and(from)
                        .map(|offset| (leaving_session, offset.get()));
                    let message = handed_over.message.clone();
                    let plan = smallvec::smallvec![(session, handed_over)];
                    let destinations = Destinations { plan, endpoints: Vec::new() };
                    self.store_then_deliver(store, message, destinations, None, None, moved_from);
                }
                None => {
                    self.delivery_over(leaving, from);
                    self.enqueue(&session, handed_over, None);
                }
            }
        }
    }

    /// The retained message of a topic.
    pub fn retained_message(&self, topic: &str) -> Option<Arc<Message>> {
        self.retained.read().get(topic).cloned()
    }

    /// Drops retained messages whose expiry interval ran out. (The log
    /// keeps them until the next snapshot, which recovery applies expiry to.)
    pub fn sweep_expired_retained(&self) {
        let now = Instant::now();
        self.retained.write().retain(|_, message| !message.is_expired(now));
    }
}

/// A for-each over the deliveries of a message to `targets`: one per
/// session, except that each shared subscription is its own. A client whose
/// subscriptions overlap gets the message once, at the highest granted QoS,
/// with every matching identifier (§3.3.4).
fn for_each_delivery(
    message: &Arc<Message>,
    targets: &[(&Subscription, bool)],
    mut deliver: impl FnMut(&Subscription, Delivery),
) {
    let mut index = 0;
    while index < targets.len() {
        let (first, shared) = targets[index];
        let mut delivery = Delivery {
            message: message.clone(),
            qos: message.qos.min(first.options.qos),
            retain: message.retain && first.options.retain_as_published,
            subscription_ids: first.identifier.into_iter().collect(),
            shared_filter: shared.then(|| first.filter.clone()),
            offset: None,
            packet_id: 0,
            restored: false,
        };
        index += 1;
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
        deliver(first, delivery);
    }
}

/// PUBACK/PUBREC reason for a publish delivered to `delivered` sessions.
pub(crate) fn publish_reason(delivered: usize) -> ReasonCode {
    if delivered == 0 {
        ReasonCode::NoMatchingSubscribers
    } else {
        ReasonCode::Success
    }
}

/// A stored message as the broker holds it, its age kept so that its
/// expiry interval counts the time it spent in the log (restarts included).
pub(crate) fn message_from_stored(stored: &record::StoredMessage) -> Message {
    let publish = stored.publish.clone();
    let mut message = Message::new(
        publish.topic,
        publish.payload,
        publish.qos,
        publish.retain,
        publish.properties,
        stored.origin,
    );
    let age = Duration::from_millis(unix_ms().saturating_sub(stored.received_at_ms));
    message.received_at = Instant::now().checked_sub(age).unwrap_or(message.received_at);
    message
}

/// The message as the durable log keeps it.
pub(crate) fn stored_message(message: &Message, store: &Store) -> record::StoredMessage {
    record::StoredMessage {
        publish: ferry_mqtt::Publish {
            dup: false,
            qos: message.qos,
            retain: message.retain,
            topic: message.topic.clone(),
            packet_id: record::StoredMessage::packet_id(message.qos),
            properties: message.properties.clone(),
            payload: message.payload.clone(),
        },
        received_at_ms: store.unix_ms_at(message.received_at),
        origin: message.origin_session,
    }
}

#[cfg(test)]
mod tests;
