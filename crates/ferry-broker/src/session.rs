//! A session: the state MQTT keeps for a client id across connections —
//! its subscriptions, the messages queued for it, and the QoS 1/2 exchanges
//! in flight in both directions.
//!
//! Publishers on other threads enqueue into a session while its own
//! connection task drains it, so the state sits behind a per-session mutex:
//! a publish touches only the locks of the sessions it delivers to, never a
//! global one.

use crate::config::{QueueBound, QueueOverflow};
use crate::connection_info::ConnectionInfo;
use crate::liveness::Liveness;
use crate::message::Message;
use crate::stats::Stats;
use crate::wakeup::Wakeup;
use ferry_mqtt::{ByteStr, Packet, QoS};
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::AbortHandle;

mod filters;
mod on_disk;

pub(crate) use filters::Filters;
pub(crate) use on_disk::OnDisk;

/// One message on its way to one session.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub message: Arc<Message>,
    /// min(publish QoS, granted QoS), over all matching subscriptions.
    pub qos: QoS,
    /// The RETAIN flag to send: set for retained messages sent on subscribe,
    /// and for live ones only under Retain As Published.
    pub retain: bool,
    pub subscription_ids: Vec<u32>,
    /// Set when the delivery came through a shared subscription, so that it
    /// can be handed to another member if this one leaves before acking.
    pub shared_filter: Option<ByteStr>,
    /// Where the message is in the durable log, for a persistent session:
    /// the end of the delivery is recorded against it.
    pub offset: Option<NonZeroU64>,
    /// Chosen when the message was stored (0: chosen when it is sent), so
    /// that a resend after a restart uses the id the client may hold.
    pub packet_id: u16,
    /// Stored before the last restart: it may have been sent before, so it
    /// goes out with DUP set (§4.4).
    pub restored: bool,
}

/// What a queued delivery counts toward `max_queued_bytes`.
fn queued_size(delivery: &Delivery) -> u64 {
    (delivery.message.topic.len() + delivery.message.payload.len()) as u64
}

/// An outbound QoS 1/2 exchange awaiting the client's answer.
#[derive(Debug)]
pub(crate) enum Inflight {
    /// PUBLISH sent; waiting for PUBACK (QoS 1) or PUBREC (QoS 2). Boxed:
    /// finding a packet id scans the window on every send and ack, and an
    /// entry of 16 bytes scans five times faster than one the size of a
    /// delivery.
    Publish { packet_id: u16, delivery: Box<Delivery> },
    /// PUBREL sent; waiting for PUBCOMP.
    Release { packet_id: u16, offset: Option<NonZeroU64> },
    /// PUBCOMP received for a stored delivery, and its `Delivered` record
    /// not stored yet. The exchange is over for the client, which may use
    /// the packet id for the next message at once; but until the record is
    /// stored a restart brings the delivery back as released and sends its
    /// PUBREL again, which would release whatever message the client then
    /// holds under that id (and that message, resent, would be delivered a
    /// second time). So the id stays taken until the record is stored
    /// (`Session::ends_stored`). Not counted in the in-flight window.
    Ending { packet_id: u16, offset: NonZeroU64 },
}

impl Inflight {
    pub(crate) fn packet_id(&self) -> u16 {
        match self {
            Inflight::Publish { packet_id, .. }
            | Inflight::Release { packet_id, .. }
            | Inflight::Ending { packet_id, .. } => *packet_id,
        }
    }
}

pub struct Session {
    /// Unique for the life of the process; the key of this session's
    /// subscriptions in the topic tree. Never reused, so a stale tree entry
    /// can never deliver to a newer session of the same client id.
    pub id: u64,
    pub client_id: Arc<str>,
    online: AtomicBool,
    /// Whether the session is in the durable log (it has an expiry
    /// interval and durability is on). Read on the publish path unlocked.
    persistent: AtomicBool,
    /// A new connection for this client id waits to take over: the current
    /// one applies what its client already sent (a DISCONNECT, say), then
    /// clears this and wakes the waiter.
    settling: AtomicBool,
    /// Wakes the connection, running or parked: new messages, or it has
    /// been taken over.
    pub(crate) wake: Wakeup,
    pub(crate) liveness: Liveness,
    state: Mutex<SessionState>,
}

pub(crate) struct SessionState {
    /// Bumped each time a connection attaches, so timers and connections
    /// started for an earlier attachment can tell they are stale.
    pub generation: u64,
    /// Once ended (expired, or replaced by a clean start) the session takes
    /// no more messages; a new one is made for the client id.
    pub ended: bool,
    pub expiry_secs: u32,
    pub subscriptions: Filters,
    pub queue: VecDeque<Delivery>,
    /// Deliveries of stored messages waiting in the log, after `queue`.
    pub on_disk: OnDisk,
    /// Topic and payload bytes of `queue`, exactly.
    queue_bytes: u64,
    pub inflight: VecDeque<Inflight>,
    /// How many of `inflight` are `Inflight::Ending`.
    pub ending: u16,
    next_packet_id: u16,
    /// A publisher gave up waiting for this session: nobody waits for it
    /// again until its queue drains.
    pub stalled: bool,
    /// Deliveries on their way through the durable log: not queued yet,
    /// but counted by back-pressure, which would otherwise let a whole
    /// pipeline of them overrun the queue.
    pub incoming: u32,
    /// What only some sessions need, some of the time; none when empty.
    occasional: Option<Box<Occasional>>,
    /// The connection attached now, for the admin API. Here rather than
    /// in a registry of the broker's, whose entry took 41 bytes per
    /// connection where this takes 8 in every session.
    connection: Option<Arc<ConnectionInfo>>,
}

/// The parts of a session that most sessions never use, or use in bursts:
/// boxed apart, made when first needed and given back when the connection
/// parks or leaves with them empty ([`SessionState::shed`]). Unboxed, an
/// idle session carried their 112 bytes of empty collections.
#[derive(Default)]
struct Occasional {
    /// QoS 2 packet ids received and answered with PUBREC, not yet released.
    /// A short list, not a set: it holds at most `receive_maximum` ids.
    inbound_qos2: Vec<u16>,
    /// The will of the last connection, waiting for its delay to pass or
    /// the session to end, whichever comes first.
    pending_will: Option<Box<Message>>,
    /// The will-delay and session-expiry timers of the last disconnect.
    timers: Vec<AbortHandle>,
    /// Publishers paused until this queue drains, longest waiting first
    /// (see `backpressure`).
    waiters: Vec<Arc<Session>>,
    /// Answers to the client that wait for the durable log, in the order
    /// the client's packets came (acknowledgements must keep it, §4.6),
    /// each tagged with the generation of the connection it is for.
    replies: VecDeque<(u64, Reply)>,
    /// An administrator's request that the connection of this generation
    /// close, with the reason. Here rather than in the connection's
    /// `ConnectionInfo`, where it cost every connection 24 bytes.
    close_request: Option<(u64, Box<str>)>,
}

impl Occasional {
    fn is_empty(&self) -> bool {
        self.inbound_qos2.is_empty()
            && self.pending_will.is_none()
            && self.timers.is_empty()
            && self.waiters.is_empty()
            && self.replies.is_empty()
            && self.close_request.is_none()
    }
}

/// An answer to a client packet, in its place in line.
#[derive(Debug)]
pub(crate) enum Reply {
    /// Its record is being stored.
    Waiting,
    Ready(Packet),
}

/// What became of an enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Enqueued {
    Queued,
    /// Queued, and the queue reached its high watermark: the publisher was
    /// registered as a waiter and should pause.
    Congested,
    Dropped,
}

/// Who is publishing, for back-pressure: the publisher's session, and
/// whether it may still be registered as a waiter (once per publish).
pub(crate) struct Publisher<'a> {
    pub session: &'a Arc<Session>,
    /// The proven user name, for route conditions (`$username`).
    pub username: Option<&'a str>,
    pub high_watermark: usize,
}

impl Session {
    pub(crate) fn new(id: u64, client_id: Arc<str>, expiry_secs: u32) -> Session {
        Session {
            id,
            client_id,
            online: AtomicBool::new(false),
            persistent: AtomicBool::new(false),
            settling: AtomicBool::new(false),
            wake: Wakeup::default(),
            liveness: Liveness::default(),
            state: Mutex::new(SessionState {
                generation: 0,
                ended: false,
                expiry_secs,
                subscriptions: Filters::default(),
                queue: VecDeque::new(),
                on_disk: OnDisk::default(),
                queue_bytes: 0,
                inflight: VecDeque::new(),
                ending: 0,
                next_packet_id: 0,
                stalled: false,
                incoming: 0,
                occasional: None,
                connection: None,
            }),
        }
    }

    pub fn is_online(&self) -> bool {
        self.online.load(Ordering::Acquire)
    }

    pub(crate) fn set_online(&self, online: bool) {
        self.online.store(online, Ordering::Release);
    }

    /// Whether a new connection waits for this session's connection to
    /// apply the input it already has ([`Session::settle`]).
    pub(crate) fn is_settling(&self) -> bool {
        self.settling.load(Ordering::Acquire)
    }

    /// The session's connection has applied its input, or ended: a
    /// connection waiting to take over may go on.
    pub(crate) fn settled(&self) {
        if self.settling.swap(false, Ordering::AcqRel) {
            self.wake.notify_waiters();
        }
    }

    /// Before a new connection takes this session over: lets the current
    /// connection apply what its client sent before the new one connected,
    /// so that a DISCONNECT (ending a session with expiry 0, or dropping
    /// the will) counts, as it would on a single-threaded broker. A client
    /// that sends DISCONNECT and reconnects at once must not find its
    /// ended session still there just because another core read its new
    /// CONNECT first. Waits at most `patience`: a connection that does not
    /// answer is taken over as before.
    pub(crate) async fn settle(&self, patience: Duration) {
        if !self.is_online() {
            return;
        }
        self.settling.store(true, Ordering::Release);
        self.wake.notify_one();
        // Gone offline meanwhile: it has ended, and will not answer.
        if !self.is_online() {
            self.settling.store(false, Ordering::Release);
            return;
        }
        let deadline = tokio::time::sleep(patience);
        tokio::pin!(deadline);
        loop {
            let answered = self.wake.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            if !self.is_settling() {
                return;
            }
            tokio::select! {
                _ = answered => {}
                _ = &mut deadline => {
                    self.settling.store(false, Ordering::Release);
                    return;
                }
            }
        }
    }

    pub fn is_persistent(&self) -> bool {
        self.persistent.load(Ordering::Acquire)
    }

    pub(crate) fn set_persistent(&self, persistent: bool) {
        self.persistent.store(persistent, Ordering::Release);
    }

    /// Puts `reply` in the first place held for connection `generation`;
    /// nothing if that connection is gone (its places went with it).
    pub(crate) fn fill_reply(&self, generation: u64, reply: Packet) {
        if self.fill_reply_quietly(generation, reply) {
            self.wake.notify_one();
        }
    }

    /// [`Session::fill_reply`] without the wake-up: true if the reply was
    /// placed, and so the connection is to be woken by the caller.
    pub(crate) fn fill_reply_quietly(&self, generation: u64, reply: Packet) -> bool {
        let mut state = self.state.lock();
        let Some(occasional) = state.occasional.as_mut() else { return false };
        let place = occasional
            .replies
            .iter_mut()
            .find(|(owner, held)| *owner == generation && matches!(held, Reply::Waiting));
        match place {
            Some((_, held)) => {
                *held = Reply::Ready(reply);
                true
            }
            None => false,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock()
    }

    /// `info` is this session's connection from now on (a connection that
    /// takes the session over replaces the one before).
    pub(crate) fn attach_connection(&self, info: &Arc<ConnectionInfo>) {
        self.state.lock().connection = Some(info.clone());
    }

    /// The connection `info` has ended; a newer one of the session stays.
    pub(crate) fn detach_connection(&self, info: &Arc<ConnectionInfo>) {
        let mut state = self.state.lock();
        if state.connection.as_ref().is_some_and(|current| Arc::ptr_eq(current, info)) {
            state.connection = None;
        }
    }

    /// The connection attached now, if any.
    pub(crate) fn connection(&self) -> Option<Arc<ConnectionInfo>> {
        self.state.lock().connection.clone()
    }

    /// The `Delivered` record of the deliveries at `offsets` (sorted) is
    /// stored: the packet ids of those that were `Inflight::Ending` are
    /// free again, and the connection, which may be waiting for one of
    /// them, is woken.
    pub(crate) fn ends_stored(&self, offsets: &[u64]) {
        let mut state = self.state.lock();
        let before = state.inflight.len();
        state.inflight.retain(|entry| match entry {
            Inflight::Ending { offset, .. } => offsets.binary_search(&offset.get()).is_err(),
            _ => true,
        });
        let freed = before - state.inflight.len();
        state.ending = state.ending.saturating_sub(freed as u16);
        drop(state);
        if freed > 0 {
            self.wake.notify_one();
        }
    }

    /// Counts a delivery that will be queued once the durable log has its
    /// message, and registers the publisher as a waiter if that makes the
    /// queue congested (`Enqueued::Congested`), as a direct enqueue would.
    /// With `reserve_packet_id`, also chooses the delivery's packet id now
    /// (for the record); `Dropped` if the session has ended.
    pub(crate) fn expect(
        &self,
        publisher: Option<&Publisher<'_>>,
        reserve_packet_id: bool,
    ) -> (Enqueued, u16) {
        let online = self.is_online();
        let mut state = self.state.lock();
        if state.ended {
            return (Enqueued::Dropped, 0);
        }
        state.incoming += 1;
        let packet_id = if reserve_packet_id { state.next_packet_id() } else { 0 };
        match publisher {
            Some(publisher) if state.congested_by(self, online, publisher) => {
                state.add_waiter(publisher.session);
                (Enqueued::Congested, packet_id)
            }
            _ => (Enqueued::Queued, packet_id),
        }
    }

    /// Takes back an [`expect`](Session::expect)ed delivery that will not come.
    pub(crate) fn unexpect(&self) {
        let mut state = self.state.lock();
        state.incoming = state.incoming.saturating_sub(1);
    }

    /// Queues a delivery, applying the session's bound. QoS 0 messages are
    /// not queued for an offline session: at-most-once means no storage. A
    /// stored message for a session that is offline (or still has older
    /// ones in the log) stays in the log: only its offset is queued.
    /// The offsets of stored deliveries the bound pushed out go to
    /// `evicted`.
    pub(crate) fn enqueue(
        &self,
        delivery: Delivery,
        bound: QueueBound,
        stats: &Stats,
        publisher: Option<&Publisher<'_>>,
        evicted: &mut Vec<NonZeroU64>,
    ) -> Enqueued {
        let online = self.is_online();
        let mut state = self.state.lock();
        let was_empty = state.queue.is_empty() && state.on_disk.is_empty();
        let mut outcome = state.push(delivery, online, bound, stats, false, evicted);
        if let Some(publisher) = publisher.filter(|_| outcome == Enqueued::Queued) {
            if state.congested_by(self, online, publisher) {
                state.add_waiter(publisher.session);
                outcome = Enqueued::Congested;
            }
        }
        drop(state);
        self.wake_if_filled(was_empty, online, outcome);
        outcome
    }

    /// Queues deliveries that [`Session::expect`] counted, in order, under
    /// one lock and with one wake-up: the log's writer queues a whole
    /// batch's worth for a session at once. Offsets the bound pushed out go
    /// to `evicted`.
    pub(crate) fn enqueue_expected(
        &self,
        deliveries: impl Iterator<Item = Delivery>,
        bound: QueueBound,
        stats: &Stats,
        evicted: &mut Vec<NonZeroU64>,
    ) {
        let online = self.is_online();
        let mut state = self.state.lock();
        let was_empty = state.queue.is_empty() && state.on_disk.is_empty();
        let mut outcome = Enqueued::Dropped;
        for delivery in deliveries {
            let queued = state.push(delivery, online, bound, stats, true, evicted);
            if queued == Enqueued::Queued {
                outcome = queued;
            }
        }
        drop(state);
        self.wake_if_filled(was_empty, online, outcome);
    }

    /// The connection drains until the queue is empty or its window is
    /// full; in the second case an acknowledgement restarts the drain, so
    /// only the empty→nonempty transition needs a wake-up.
    fn wake_if_filled(&self, was_empty: bool, online: bool, outcome: Enqueued) {
        if was_empty && online && outcome != Enqueued::Dropped {
            self.wake.notify_one();
        }
    }
}

impl SessionState {
    /// Queues one delivery under the session's bound (see
    /// [`Session::enqueue`]); `expected` says [`Session::expect`] counted
    /// it.
    fn push(
        &mut self,
        delivery: Delivery,
        online: bool,
        bound: QueueBound,
        stats: &Stats,
        expected: bool,
        evicted: &mut Vec<NonZeroU64>,
    ) -> Enqueued {
        if expected {
            self.incoming = self.incoming.saturating_sub(1);
        }
        if self.ended || (!online && delivery.qos == QoS::AtMostOnce) {
            return Enqueued::Dropped;
        }
        let size = queued_size(&delivery);
        let over = |state: &SessionState| {
            let queued = state.queue.len() + state.on_disk.len();
            queued >= bound.messages
                || (bound.bytes != 0 && queued > 0 && state.queued_bytes() + size > bound.bytes)
        };
        if over(self) {
            stats.dropped_queue_full.inc();
            match bound.overflow {
                QueueOverflow::DropNew => {
                    evicted.extend(delivery.offset);
                    return Enqueued::Dropped;
                }
                QueueOverflow::DropOldest => {
                    while over(self) {
                        let oldest = match self.pop_queued() {
                            Some(oldest) => oldest.offset,
                            None => self.on_disk.pop_first(),
                        };
                        evicted.extend(oldest);
                    }
                }
            }
        }
        match delivery.offset {
            Some(offset) if !online || !self.on_disk.is_empty() => self.on_disk.push(offset, size),
            _ => {
                self.queue_bytes += size;
                self.queue.push_back(delivery);
            }
        }
        Enqueued::Queued
    }

    /// Topic and payload bytes queued, what `max_queued_bytes` bounds.
    pub(crate) fn queued_bytes(&self) -> u64 {
        self.queue_bytes + self.on_disk.bytes()
    }

    /// Takes the oldest delivery of the in-memory queue.
    pub(crate) fn pop_queued(&mut self) -> Option<Delivery> {
        let delivery = self.queue.pop_front()?;
        self.queue_bytes = self.queue_bytes.saturating_sub(queued_size(&delivery));
        Some(delivery)
    }

    /// Empties the queue, in memory and in the log.
    pub(crate) fn clear_queue(&mut self) {
        self.queue.clear();
        self.on_disk.clear();
        self.queue_bytes = 0;
    }

    /// Queues a delivery read back from the log (see
    /// [`Broker::load_from_disk`](crate::broker::Broker::load_from_disk)).
    pub(crate) fn push_loaded(&mut self, delivery: Delivery) {
        self.queue_bytes += queued_size(&delivery);
        self.queue.push_back(delivery);
    }

    /// What back-pressure weighs: the queue and the deliveries on their way
    /// to it through the durable log.
    pub(crate) fn backlog(&self) -> usize {
        self.queue.len() + self.on_disk.len() + self.incoming as usize
    }

    /// Leaves the stored deliveries of the queue in the log, in front of
    /// those already there: the session went offline, and its queue must
    /// not hold messages in memory while it waits.
    pub(crate) fn park_stored(&mut self) {
        let mut kept = VecDeque::new();
        while let Some(delivery) = self.queue.pop_back() {
            match delivery.offset {
                Some(offset) => {
                    let size = queued_size(&delivery);
                    self.queue_bytes = self.queue_bytes.saturating_sub(size);
                    self.on_disk.push(offset, size);
                }
                None => kept.push_front(delivery),
            }
        }
        self.queue = kept;
    }

    /// Whether `publisher` should wait for this session: it is online (only
    /// an online session drains), not stalled, at its high watermark
    /// counting what is on its way, and not the publisher itself (whose
    /// own task is the one that drains it).
    fn congested_by(&self, session: &Session, online: bool, publisher: &Publisher<'_>) -> bool {
        online
            && !self.stalled
            && self.backlog() >= publisher.high_watermark
            && publisher.session.id != session.id
    }

    /// The next packet id not used by an exchange in flight. The window is
    /// at most 65535 entries, so a free id always exists.
    pub(crate) fn next_packet_id(&mut self) -> u16 {
        loop {
            self.next_packet_id = self.next_packet_id.wrapping_add(1);
            if self.next_packet_id == 0 {
                self.next_packet_id = 1;
            }
            let candidate = self.next_packet_id;
            if !self.inflight.iter().any(|entry| entry.packet_id() == candidate) {
                return candidate;
            }
        }
    }

    /// Where the exchange of `packet_id` is in the in-flight window, if
    /// one is under way (an `Ending` one is over for the client).
    pub(crate) fn inflight_position(&self, packet_id: u16) -> Option<usize> {
        self.inflight.iter().position(|entry| {
            entry.packet_id() == packet_id && !matches!(entry, Inflight::Ending { .. })
        })
    }

    /// The client's PUBCOMP ended the exchange at `index`, a stored
    /// delivery's (at `offset`): its id stays taken until that is stored
    /// (`Inflight::Ending`).
    pub(crate) fn end_release(&mut self, index: usize, offset: NonZeroU64) {
        let packet_id = self.inflight[index].packet_id();
        self.inflight[index] = Inflight::Ending { packet_id, offset };
        self.ending += 1;
    }

    /// Exchanges that count against the client's receive window: those in
    /// flight, less those only waiting for their end to be stored.
    pub(crate) fn in_window(&self) -> usize {
        self.inflight.len() - usize::from(self.ending)
    }

    /// Removes the deliveries that came through a shared subscription from
    /// the queue and the in-flight window, to hand them to another member.
    pub(crate) fn take_shared_deliveries(&mut self) -> Vec<Delivery> {
        let mut orphans = Vec::new();
        let mut taken_bytes = 0;
        self.queue.retain(|delivery| {
            if delivery.shared_filter.is_some() {
                taken_bytes += queued_size(delivery);
                orphans.push(delivery.clone());
                false
            } else {
                true
            }
        });
        self.inflight.retain(|entry| match entry {
            Inflight::Publish { delivery, .. } if delivery.shared_filter.is_some() => {
                orphans.push(Delivery::clone(delivery));
                false
            }
            _ => true,
        });
        self.queue_bytes = self.queue_bytes.saturating_sub(taken_bytes);
        orphans
    }

    /// The occasional parts, made now if there were none.
    fn occasional(&mut self) -> &mut Occasional {
        self.occasional.get_or_insert_with(Box::default)
    }

    /// Asks the connection attached now to close with `reason`, unless it
    /// was asked already (the first reason stands); false when none is
    /// attached.
    pub(crate) fn request_close(&mut self, reason: &str) -> bool {
        if self.connection.is_none() {
            return false;
        }
        let generation = self.generation;
        let occasional = self.occasional();
        if occasional.close_request.as_ref().is_none_or(|(asked, _)| *asked != generation) {
            occasional.close_request = Some((generation, reason.into()));
        }
        true
    }

    /// The reason an administrator gave for closing the connection of
    /// `generation`, once one did.
    pub(crate) fn close_requested(&self, generation: u64) -> Option<&str> {
        let (asked, reason) = self.occasional.as_ref()?.close_request.as_ref()?;
        (*asked == generation).then_some(&**reason)
    }

    /// The connection asked to close is gone, or another takes its place.
    pub(crate) fn forget_close_request(&mut self) {
        if let Some(occasional) = self.occasional.as_mut() {
            occasional.close_request = None;
        }
    }

    /// Gives the occasional parts back if they are all empty: when the
    /// connection parks or leaves, so that a busy one does not make and
    /// free them per message.
    pub(crate) fn shed(&mut self) {
        if self.occasional.as_ref().is_some_and(|occasional| occasional.is_empty()) {
            self.occasional = None;
        }
    }

    pub(crate) fn add_waiter(&mut self, publisher: &Arc<Session>) {
        if !self.is_waiting(publisher.id) {
            self.occasional().waiters.push(publisher.clone());
        }
    }

    /// Whether `publisher` is still waiting for this queue, not released.
    pub(crate) fn is_waiting(&self, publisher: u64) -> bool {
        self.occasional
            .as_ref()
            .is_some_and(|occasional| occasional.waiters.iter().any(|w| w.id == publisher))
    }

    /// Takes `publisher` out of the line without waking it: it gave up.
    pub(crate) fn stop_waiting(&mut self, publisher: u64) {
        if let Some(occasional) = self.occasional.as_mut() {
            occasional.waiters.retain(|waiter| waiter.id != publisher);
        }
    }

    /// Wakes the `turns` publishers that waited longest: the queue drained.
    pub(crate) fn release_turns(&mut self, turns: usize) {
        let Some(occasional) = self.occasional.as_mut() else { return };
        let waiters = &mut occasional.waiters;
        for waiter in waiters.drain(..turns.min(waiters.len())) {
            waiter.wake.notify_one();
        }
    }

    /// Holds a place in line for an answer to the client of connection
    /// `generation` (see [`Session::fill_reply`]), or puts one there.
    pub(crate) fn hold_reply(&mut self, generation: u64, reply: Reply) {
        self.occasional().replies.push_back((generation, reply));
    }

    /// The first answer in line, if it is ready.
    pub(crate) fn take_ready_reply(&mut self) -> Option<Packet> {
        let replies = &mut self.occasional.as_mut()?.replies;
        let Some((_, Reply::Ready(_))) = replies.front() else { return None };
        let Some((_, Reply::Ready(packet))) = replies.pop_front() else { return None };
        Some(packet)
    }

    /// Forgets the answers in line: their connection is gone.
    pub(crate) fn clear_replies(&mut self) {
        if let Some(occasional) = self.occasional.as_mut() {
            occasional.replies.clear();
        }
    }

    /// Whether a QoS 2 PUBLISH with `packet_id` was taken and not released.
    pub(crate) fn holds_inbound(&self, packet_id: u16) -> bool {
        self.occasional.as_ref().is_some_and(|o| o.inbound_qos2.contains(&packet_id))
    }

    /// How many QoS 2 PUBLISHes were taken and not released.
    pub(crate) fn inbound_held(&self) -> usize {
        self.occasional.as_ref().map_or(0, |occasional| occasional.inbound_qos2.len())
    }

    /// Remembers a QoS 2 PUBLISH taken (answered with PUBREC) until its
    /// PUBREL.
    pub(crate) fn hold_inbound(&mut self, packet_id: u16) {
        self.occasional().inbound_qos2.push(packet_id);
    }

    /// The QoS 2 packet ids taken and not released, in no order.
    #[cfg(test)]
    pub(crate) fn inbound_ids(&self) -> Vec<u16> {
        self.occasional.as_ref().map_or_else(Vec::new, |o| o.inbound_qos2.clone())
    }

    pub(crate) fn clear_inbound(&mut self) {
        if let Some(occasional) = self.occasional.as_mut() {
            occasional.inbound_qos2.clear();
        }
    }

    /// Keeps the will of the last connection until it is published or
    /// dropped; `None` drops the one kept.
    pub(crate) fn set_will(&mut self, will: Option<Box<Message>>) {
        match will {
            Some(will) => self.occasional().pending_will = Some(will),
            None => drop(self.take_will()),
        }
    }

    pub(crate) fn take_will(&mut self) -> Option<Box<Message>> {
        self.occasional.as_mut()?.pending_will.take()
    }

    /// Keeps a will-delay or session-expiry timer, to cancel it if the
    /// client comes back.
    pub(crate) fn add_timer(&mut self, timer: AbortHandle) {
        self.occasional().timers.push(timer);
    }

    /// Wakes every publisher waiting for this queue: it will not drain (the
    /// session went offline or ended).
    /// Forgets an inbound QoS 2 packet id; false if it was not held.
    pub(crate) fn release_inbound(&mut self, packet_id: u16) -> bool {
        let Some(occasional) = self.occasional.as_mut() else { return false };
        let inbound = &mut occasional.inbound_qos2;
        let held = inbound.iter().position(|&id| id == packet_id);
        held.map(|index| inbound.swap_remove(index)).is_some()
    }

    pub(crate) fn release_waiters(&mut self) {
        self.release_turns(usize::MAX);
    }

    pub(crate) fn cancel_timers(&mut self) {
        let Some(occasional) = self.occasional.as_mut() else { return };
        for timer in occasional.timers.drain(..) {
            timer.abort();
        }
    }

    /// The publishers waiting for this queue, longest waiting first.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> Vec<u64> {
        self.occasional.as_ref().map_or_else(Vec::new, |o| o.waiters.iter().map(|w| w.id).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn released(state: &mut SessionState, packet_id: u16, offset: u64) {
        state.inflight.push_back(Inflight::Release { packet_id, offset: NonZeroU64::new(offset) });
    }

    #[test]
    fn a_close_request_is_for_the_connection_attached_when_it_was_made() {
        let session = Session::new(1, "c1".into(), 0);
        let listener = Arc::new(crate::listener::Listener::new(
            "test".into(),
            crate::listener::Protocol::Mqtt,
            None,
            ferry_auth::ListenerAuth::default(),
            0,
        ));
        let address = "127.0.0.1:1".parse().unwrap();
        let v5 = ferry_mqtt::ProtocolVersion::V5;
        session.attach_connection(&Arc::new(ConnectionInfo::new(
            address, listener, None, v5, 0, true,
        )));
        let mut state = session.lock();
        state.generation = 4;
        state.request_close("maintenance");
        state.request_close("a second reason");
        assert_eq!(state.close_requested(4), Some("maintenance"));
        // A connection that took the session over is not asked.
        assert_eq!(state.close_requested(5), None);
        state.forget_close_request();
        assert_eq!(state.close_requested(4), None);
        state.shed();
        assert!(state.occasional.is_none(), "nothing occasional is kept for an old request");
    }

    #[test]
    fn a_completed_qos2_id_stays_taken_until_its_end_is_stored() {
        let session = Session::new(1, "c".into(), 60);
        let mut state = session.lock();
        released(&mut state, 1, 100);
        released(&mut state, 2, 200);
        let index = state.inflight_position(1).unwrap();
        state.end_release(index, NonZeroU64::new(100).unwrap());
        // Over for the client: not found by its packets, not in its window.
        assert_eq!(state.inflight_position(1), None);
        assert_eq!(state.in_window(), 1);
        // But not free: a new message does not get it.
        assert_ne!(state.next_packet_id(), 1);
        drop(state);

        session.ends_stored(&[100, 200]);
        let mut state = session.lock();
        assert_eq!(state.ending, 0);
        assert_eq!(state.inflight.len(), 1, "only the Ending entry went");
        assert!(matches!(state.inflight[0], Inflight::Release { packet_id: 2, .. }));
        assert_eq!(state.in_window(), 1);
        // The count wraps around to 1, which is free now.
        state.next_packet_id = u16::MAX;
        assert_eq!(state.next_packet_id(), 1);
    }
}
