//! Live signals: messages to and from devices, live commands and live
//! events (Ditto's `live` channel). Nothing of them is stored; the hub
//! routes each one from its sender to the devices and applications that
//! asked for its kind and may READ it, and routes a response back to the
//! call waiting for it, by `correlation-id`.
//!
//! - **Senders** are the HTTP API (`http/messages.rs`), WebSocket clients
//!   (`ws.rs`) and MQTT clients (`mqtt/live.rs`); each calls
//!   [`Twins::send_live`], which checks the signal against the thing's
//!   policy (`live/signal.rs`) and, when a response is wanted, returns a
//!   [`Call`] to await.
//! - **Receivers** are the WebSocket sessions that sent
//!   `START-SEND-MESSAGES`, `START-SEND-LIVE-COMMANDS` or
//!   `START-SEND-LIVE-EVENTS` ([`Subscriber`]), and the MQTT subscribers of
//!   `{prefix}/things/{thingId}/live/…` (the [`Outlet`] `mqtt.rs`
//!   attaches); each gets the view of the signal its subjects may see.
//!   The same WebSocket subscribers (and connection targets) take policy
//!   announcements of their subjects ([`Live::announce`],
//!   `announcements.rs`).
//! - **Responses** (a Ditto protocol message with `status` on the live
//!   topic, or on `…/things/live/errors`) come back through
//!   [`Twins::answer_live`] from any of them; one for no waiting call is
//!   dropped, as Ditto drops it.
//!
//! A call waits `timeout` (Ditto's header: default 10 s, at most 60 s)
//! and then answers Ditto's 408 `command.timeout`. With `timeout` 0 or
//! `response-required: false` nothing waits. A *persistent* message
//! (Ferry's `qos=1`) goes to MQTT at QoS 1 with its TTL as the Message
//! Expiry Interval, so a device's persistent session keeps it while the
//! device is away, and its outcome is kept for polling (`pending.rs`):
//! its response, or the acknowledgements it requested, which it waits
//! for up to its TTL.

mod errors;
mod pending;
mod signal;
pub mod smart;

pub use pending::{Outcome, State as OutcomeState, MAX_PENDING};
pub use signal::{Audience, Kind};

use crate::acks::{weak_ack, Ack, EventAcks, Requested, Waiter};
use crate::error::DittoError;
use crate::protocol::{Channel, Criterion, Envelope, Group, Topic, ORIGINATOR};
use crate::service::{Caller, Twins};
use parking_lot::RwLock;
use pending::{Outcomes, Pending};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The subject and path of Ditto's claim message, which anyone may send
/// (`live/signal.rs`).
pub const CLAIM_SUBJECT: &str = "claim";
pub const CLAIM_PATH: &str = "/inbox/claim";

/// Ditto's default timeout of a live call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Ditto's `messages.max-timeout` (and the commands' default maximum).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);

/// Where live signals go besides WebSocket sessions: the MQTT broker.
pub trait Outlet: Send + Sync {
    /// Publishes the signal to its readers, each getting what `audience`
    /// shows its subjects. `expiry` is how long it is worth delivering: a
    /// call's timeout, or a persistent message's TTL, during which a
    /// device that is away keeps it in its session.
    fn publish(&self, audience: &Arc<Audience>, expiry: Option<Duration>);
}

/// The hub: who listens for what, and the calls waiting for responses.
pub struct Live {
    subscribers: RwLock<HashMap<u64, Arc<Subscriber>>>,
    next_subscriber: AtomicU64,
    outlet: RwLock<Option<Weak<dyn Outlet>>>,
    pending: Arc<Pending>,
    outcomes: Outcomes,
    closing: watch::Sender<bool>,
    /// Live signals and twin events WebSocket sessions did not get because
    /// they fell behind (a full push queue, a lagging change feed).
    pub dropped: AtomicU64,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            subscribers: RwLock::new(HashMap::new()),
            next_subscriber: AtomicU64::new(0),
            outlet: RwLock::new(None),
            pending: Arc::default(),
            outcomes: Outcomes::default(),
            closing: watch::channel(false).0,
            dropped: AtomicU64::new(0),
        }
    }
}

/// A WebSocket session as the hub sees it: its caller, what it asked for
/// and where its signals go.
pub struct Subscriber {
    pub caller: Caller,
    /// Per kind ([`Kind::index`]): `None` when off, else the namespaces it
    /// is limited to (empty: all).
    wants: RwLock<[Option<Vec<String>>; 3]>,
    out: mpsc::Sender<Envelope>,
    /// The acknowledgement labels the session declared: those a signal it
    /// does not get requests are weakly acknowledged for it.
    declared: RwLock<Vec<String>>,
    /// Policy announcements (`announcements.rs`): `None` when off, else
    /// the namespaces of the policies it is limited to (empty: all).
    announcements: RwLock<Option<Vec<String>>>,
}

impl Subscriber {
    /// Starts (`Some`, with its namespaces) or stops (`None`) a kind.
    pub fn set(&self, kind: Kind, namespaces: Option<Vec<String>>) {
        self.wants.write()[kind.index()] = namespaces;
    }

    /// Starts (`Some`, with its namespaces) or stops (`None`) policy
    /// announcements.
    pub fn set_announcements(&self, namespaces: Option<Vec<String>>) {
        *self.announcements.write() = namespaces;
    }

    /// The acknowledgement labels the session declared.
    pub fn declare(&self, labels: &[String]) {
        *self.declared.write() = labels.to_vec();
    }

    fn wants(&self, kind: Kind, namespace: &str) -> bool {
        self.wants.read()[kind.index()].as_ref().is_some_and(|namespaces| {
            namespaces.is_empty() || namespaces.iter().any(|n| n == namespace)
        })
    }
}

/// A session's registration, ended when dropped.
pub struct Subscription {
    twins: Arc<Twins>,
    id: u64,
    pub subscriber: Arc<Subscriber>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.twins.live().subscribers.write().remove(&self.id);
    }
}

impl Live {
    /// Sends live signals to MQTT through `outlet` from now on.
    pub fn attach(&self, outlet: Weak<dyn Outlet>) {
        *self.outlet.write() = Some(outlet);
    }

    /// Ends every WebSocket session, for a shutdown: an upgraded
    /// connection is no longer the HTTP server's to wait for.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Waits until every WebSocket session has ended (each holds a
    /// [`Live::closing`] receiver until it has sent its close frame), so
    /// that a shutdown does not end the process under a session still
    /// saying goodbye.
    pub async fn sessions_ended(&self) {
        self.closing.closed().await;
    }

    /// Turns `true` when the sessions must end.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// The outcome of the persistent message `correlation_id`, if `caller`
    /// sent it and it is still known.
    pub fn outcome(&self, caller: &Caller, correlation_id: &str) -> Option<Outcome> {
        self.outcomes.get(correlation_id).filter(|outcome| outcome.subjects == caller.subjects)
    }

    /// Hands `audience` to every session that asked for its kind and may
    /// read it, and to the outlet. Returns the labels of `acks` declared by
    /// sessions that did not get it (not listening, not allowed to read
    /// it): they cannot acknowledge it.
    fn deliver(
        &self,
        audience: &Arc<Audience>,
        expiry: Option<Duration>,
        acks: Option<&EventAcks>,
    ) -> Vec<String> {
        let namespace = audience.thing_id.namespace();
        let not_got =
            self.hand_out(acks, |subscriber| match subscriber.wants(audience.kind, namespace) {
                true => audience.envelope_for(&subscriber.caller),
                false => None,
            });
        let outlet = self.outlet.read().as_ref().and_then(Weak::upgrade);
        if let Some(outlet) = outlet {
            outlet.publish(audience, expiry);
        }
        not_got
    }

    /// Hands a policy announcement of a policy in `namespace` to every
    /// subscriber that asked for announcements there and is one of
    /// `subjects` (Ditto publishes an announcement to the subjects it
    /// names). Returns the labels of `acks` declared by subscribers that
    /// did not get it.
    pub(crate) fn announce(
        &self,
        announcement: &Envelope,
        namespace: &str,
        subjects: &[String],
        acks: Option<&EventAcks>,
    ) -> Vec<String> {
        self.hand_out(acks, |subscriber| {
            let wanted = subscriber.announcements.read().as_ref().is_some_and(|namespaces| {
                namespaces.is_empty() || namespaces.iter().any(|n| n == namespace)
            });
            let named = subscriber.caller.subjects.iter().any(|s| subjects.contains(s));
            (wanted && named).then(|| announcement.clone())
        })
    }

    /// Gives each subscriber what `view` makes of a signal for it, if
    /// anything; returns the labels of `acks` declared by subscribers that
    /// got nothing, which they cannot acknowledge.
    fn hand_out(
        &self,
        acks: Option<&EventAcks>,
        view: impl Fn(&Subscriber) -> Option<Envelope>,
    ) -> Vec<String> {
        let mut not_got = Vec::new();
        for subscriber in self.subscribers.read().values() {
            let Some(envelope) = view(subscriber) else {
                if let Some(acks) = acks {
                    let declared = subscriber.declared.read();
                    not_got.extend(acks.labels.iter().filter(|l| declared.contains(l)).cloned());
                }
                continue;
            };
            if subscriber.out.try_send(envelope).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("signal dropped: a WebSocket session's queue is full");
            }
        }
        not_got
    }
}

/// A call waiting for its response, or its receivers'
/// acknowledgements; dropping it stops waiting.
pub struct Call {
    pending: Arc<Pending>,
    serial: u64,
    pub correlation_id: String,
    /// `None` when no response is wanted (only acknowledgements), or
    /// once it was awaited.
    response: Option<tokio::sync::oneshot::Receiver<crate::protocol::Envelope>>,
    timeout: Duration,
    audience: Arc<Audience>,
    sender: Caller,
    /// Labels the receivers acknowledge, when any was requested beside
    /// `live-response`.
    acks: Option<(Requested, Waiter)>,
}

/// How a call ended.
pub enum Settled {
    /// The receiver's response, or Ditto's 408 error response.
    Response(Box<Envelope>),
    /// The acknowledgements requested, in order, aggregated with their
    /// combined status (200, 424, or one label's own).
    Acknowledgements { status: u16, acks: Vec<Ack> },
    /// All acknowledgements succeeded and no response was required:
    /// nothing to tell the sender waiting; the acknowledgements, for a
    /// persistent message's outcome.
    Quiet(Vec<Ack>),
}

impl Settled {
    /// The Ditto protocol message that says it, on `topic`'s thing: the
    /// response, or the aggregated `…/things/live/acks`.
    pub fn into_envelope(self, topic: &Topic, correlation_id: &str) -> Option<Envelope> {
        match self {
            Settled::Response(response) => Some(*response),
            Settled::Acknowledgements { status, acks } => {
                let mut envelope = Envelope::new(topic.with(Criterion::Acks, "").to_string(), "/");
                envelope.headers = crate::acks::correlation_headers(correlation_id);
                envelope.value = Some(crate::acks::protocol_value(&acks));
                envelope.status = Some(status);
                Some(envelope)
            }
            Settled::Quiet(_) => None,
        }
    }
}

impl Call {
    /// The response as the sender may see it, or Ditto's 408 error
    /// response once the timeout passes; with acknowledgements requested,
    /// their aggregate instead (`None` when nobody needs to hear of them).
    pub async fn response(self) -> Option<Envelope> {
        let (topic, correlation_id) = (self.audience.topic.clone(), self.correlation_id.clone());
        self.settle().await.into_envelope(&topic, &correlation_id)
    }

    /// Awaits the response and the acknowledgements, within the call's
    /// one timeout.
    pub async fn settle(mut self) -> Settled {
        let Some((requested, waiter)) = self.acks.take() else {
            return Settled::Response(Box::new(match self.answer().await {
                Some(response) => response,
                None => self.timed_out(),
            }));
        };
        let started = tokio::time::Instant::now();
        // The response counts only as `live-response`, when requested.
        let own_requested =
            requested.labels.iter().any(|label| label == crate::acks::LIVE_RESPONSE);
        let own = match self.response.is_some() && own_requested {
            true => Some(match self.answer().await {
                Some(response) => Ack {
                    label: crate::acks::LIVE_RESPONSE.to_owned(),
                    status: response.status.unwrap_or(200),
                    payload: response.value,
                    headers: response.headers,
                },
                None => {
                    Ack::timed_out(crate::acks::LIVE_RESPONSE, self.timeout, &self.correlation_id)
                }
            }),
            false => None,
        };
        let received = waiter.collect(self.timeout.saturating_sub(started.elapsed())).await;
        let mut acks = requested.fulfil(own, received, &self.correlation_id);
        let status = crate::acks::combined_status(&acks);
        if !requested.response_required {
            if (200..300).contains(&status) {
                return Settled::Quiet(acks);
            }
            acks = crate::acks::minimized(&acks);
        }
        Settled::Acknowledgements { status, acks }
    }

    /// Ditto's 408 error response of a call nobody answered in time.
    pub fn timed_out(&self) -> Envelope {
        self.error(&DittoError::command_timeout(self.timeout))
    }

    /// The response as the sender may see it, or `None` once the timeout
    /// passed without one. Answers once: the call is over after it.
    pub async fn answer(&mut self) -> Option<Envelope> {
        let response = self.response.take()?;
        let response = tokio::time::timeout(self.timeout, response).await.ok()?.ok()?;
        Some(self.audience.response_for(&self.sender, response))
    }

    /// `error` as the response to this call.
    pub fn error(&self, error: &DittoError) -> Envelope {
        crate::protocol::error_response(
            Some(&self.audience.topic),
            &self.audience.envelope.headers,
            error,
        )
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.pending.forget(&self.correlation_id, self.serial);
    }
}

/// How a signal is to be sent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sending {
    /// Ferry's `qos=1`: keep the message this long for devices that are
    /// away, and its outcome for polling; the call then waits this long.
    pub persistent: Option<Duration>,
}

impl Twins {
    /// Registers a WebSocket session's `caller` and the queue its signals
    /// go to.
    pub fn subscribe_live(
        self: &Arc<Self>,
        caller: Caller,
        out: mpsc::Sender<Envelope>,
    ) -> Subscription {
        let live = self.live();
        let id = live.next_subscriber.fetch_add(1, Ordering::Relaxed);
        let subscriber = Arc::new(Subscriber {
            caller,
            wants: RwLock::new([None, None, None]),
            out,
            declared: RwLock::new(Vec::new()),
            announcements: RwLock::new(None),
        });
        live.subscribers.write().insert(id, subscriber.clone());
        Subscription { twins: self.clone(), id, subscriber }
    }

    /// Sends the live signal `envelope` (of `topic` and `kind`) from
    /// `caller`: checked against the thing's policy, given a correlation id
    /// if it has none, handed to its receivers. Returns the call to await
    /// when a response is wanted.
    pub async fn send_live(
        &self,
        caller: &Caller,
        topic: Topic,
        kind: Kind,
        mut envelope: Envelope,
        sending: Sending,
    ) -> Result<Option<Call>, DittoError> {
        let correlation_id = match envelope.correlation_id() {
            Some(id) => id,
            None => {
                let id = crate::id::random_uuid();
                envelope.headers.insert("correlation-id".into(), id.clone().into());
                id
            }
        };
        // Who sent it, stamped as Ditto stamps every signal; a sender's
        // own `ditto-originator` is not believed.
        match caller.subjects.first() {
            Some(subject) => envelope.headers.insert(ORIGINATOR.into(), subject.as_str().into()),
            None => envelope.headers.remove(ORIGINATOR),
        };
        let timeout = match sending.persistent {
            Some(ttl) => ttl,
            None => timeout(envelope.header("timeout").as_deref())?,
        };
        let wants_response =
            kind != Kind::LiveEvents && envelope.response_required() && !timeout.is_zero();
        if !wants_response && kind != Kind::LiveEvents {
            envelope.headers.insert("response-required".into(), false.into());
        }
        let requested = match kind {
            Kind::LiveEvents => None,
            _ => receivers_acks(&mut envelope, wants_response, timeout, &correlation_id)?,
        };
        let audience = Arc::new(self.authorize_live(caller, topic, kind, envelope).await?);
        let live = self.live();
        let call = if wants_response || requested.is_some() {
            let registered = live.pending.register(&correlation_id, &audience.thing_id)?;
            if let Some(ttl) = sending.persistent {
                live.outcomes.sent(&correlation_id, &audience.thing_id, &caller.subjects, ttl);
            }
            // Registered before the signal goes: an acknowledgement that
            // comes back at once is not missed.
            let acks = match &requested {
                Some((requested, acks)) => Some((requested.clone(), self.ack_hub().expect(acks)?)),
                None => None,
            };
            Some(Call {
                pending: live.pending.clone(),
                serial: registered.serial,
                correlation_id: correlation_id.clone(),
                response: wants_response.then_some(registered.response),
                timeout,
                audience: audience.clone(),
                sender: caller.clone(),
                acks,
            })
        } else {
            None
        };
        let acks = requested.as_ref().map(|(_, acks)| acks);
        for label in live.deliver(&audience, wants_response.then_some(timeout), acks) {
            self.ack_hub().deliver(&correlation_id, weak_ack(&label, &correlation_id));
        }
        Ok(call)
    }

    /// Awaits a persistent message's response and records it for polling.
    pub async fn settle_persistent(&self, call: Call) {
        let correlation_id = call.correlation_id.clone();
        let state = match call.settle().await {
            Settled::Response(response)
                if response.status == Some(408) && response.topic.ends_with("/errors") =>
            {
                OutcomeState::Expired
            }
            Settled::Response(response) => OutcomeState::Answered(response),
            Settled::Acknowledgements { status, acks } => {
                OutcomeState::Acknowledged { status, acks }
            }
            Settled::Quiet(acks) => OutcomeState::Acknowledged { status: 200, acks },
        };
        self.live().outcomes.settle(&correlation_id, state);
    }

    /// Takes `envelope` as the response to a waiting live call, if it is
    /// one; `false` when nobody waits for it.
    pub fn answer_live(&self, envelope: Envelope) -> bool {
        let Ok(topic) = Topic::parse(&envelope.topic) else { return false };
        let (Some(correlation_id), Some(entity)) = (envelope.correlation_id(), topic.entity_id())
        else {
            return false;
        };
        let Ok(thing_id) = crate::id::ThingId::parse(&entity) else { return false };
        let answered = self.live().pending.answer(&correlation_id, &thing_id, envelope);
        if !answered {
            tracing::debug!(%correlation_id, "a live response no call waits for, dropped");
        }
        answered
    }
}

/// The acknowledgements a live message or command asks its receivers
/// for (`acks.rs`, `Requested::live`), when it names any beyond
/// `live-response`, and the labels as the receivers see them in its
/// `requested-acks` header.
fn receivers_acks(
    envelope: &mut Envelope,
    wants_response: bool,
    timeout: Duration,
    correlation_id: &str,
) -> Result<Option<(Requested, EventAcks)>, DittoError> {
    let Some(labels) = crate::acks::requested_labels(&envelope.headers)? else { return Ok(None) };
    let requested = Requested::live(Some(labels), wants_response, timeout)?;
    envelope.headers.insert("requested-acks".into(), requested.labels.clone().into());
    Ok(requested.event_acks(correlation_id).map(|acks| (requested, acks)))
}

/// Where a Ditto protocol message on the live channel goes.
pub enum Route {
    /// A response to a live call: to the call ([`Twins::answer_live`]).
    Response,
    /// A live signal: to its receivers ([`Twins::send_live`]).
    Signal(Topic, Kind),
}

impl Route {
    /// The route of `envelope`, or `None` for a message that is not
    /// live (a twin or policy command, or one whose topic is unreadable).
    pub fn of(envelope: &Envelope) -> Option<Route> {
        let topic = Topic::parse(&envelope.topic).ok()?;
        if is_response(&topic, envelope) {
            return Some(Route::Response);
        }
        Kind::of(&topic).map(|kind| Route::Signal(topic, kind))
    }
}

/// Whether `envelope` (of `topic`) answers a live call: a message or a
/// live command with a `status`, or an error on the live channel.
fn is_response(topic: &Topic, envelope: &Envelope) -> bool {
    if (topic.group, topic.channel) != (Group::Things, Channel::Live) {
        return false;
    }
    match topic.criterion {
        Criterion::Errors => true,
        Criterion::Messages | Criterion::Commands => envelope.status.is_some(),
        _ => false,
    }
}

/// A call's timeout from Ditto's `timeout` header (`10`, `10s`, `500ms`,
/// `1m`, as `DittoDuration` reads them): default 10 s, at most 60 s.
pub fn timeout(header: Option<&str>) -> Result<Duration, DittoError> {
    timeout_or(header, DEFAULT_TIMEOUT)
}

/// `timeout` with another default: a twin command's is 60 s.
pub fn timeout_or(header: Option<&str>, default: Duration) -> Result<Duration, DittoError> {
    let Some(text) = header else { return Ok(default) };
    let timeout = crate::duration::DittoDuration::parse(text)
        .ok_or_else(|| DittoError::header_invalid("timeout", text, "duration"))?
        .as_duration();
    if timeout > MAX_TIMEOUT {
        return Err(DittoError::timeout_invalid(timeout, MAX_TIMEOUT));
    }
    Ok(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_read_as_ditto_reads_them() {
        assert_eq!(timeout(None).unwrap(), DEFAULT_TIMEOUT);
        assert_eq!(timeout(Some("0")).unwrap(), Duration::ZERO);
        assert_eq!(timeout(Some("5")).unwrap(), Duration::from_secs(5));
        assert_eq!(timeout(Some("250ms")).unwrap(), Duration::from_millis(250));
        assert_eq!(timeout(Some("1m")).unwrap(), Duration::from_secs(60));
        for bad in ["", "s", "-1", "5x", "1.5s"] {
            assert_eq!(timeout(Some(bad)).unwrap_err().error, "header.invalid", "{bad}");
        }
        let over = timeout(Some("61")).unwrap_err();
        assert_eq!((over.status, over.error), (400, "timeout.invalid"));
        assert_eq!(
            over.message,
            "The timeout <61,000ms> is not inside its allowed bounds <0ms - 60,000ms>"
        );
    }

    #[test]
    fn responses_are_live_answers_with_a_status_or_live_errors() {
        let check = |topic: &str, status: Option<u16>| {
            let mut envelope = Envelope::new(topic, "/");
            envelope.status = status;
            is_response(&Topic::parse(topic).unwrap(), &envelope)
        };
        assert!(check("a/b/things/live/messages/ask", Some(200)));
        assert!(check("a/b/things/live/commands/modify", Some(204)));
        assert!(check("a/b/things/live/errors", Some(404)));
        assert!(!check("a/b/things/live/messages/ask", None));
        assert!(!check("a/b/things/live/events/modified", Some(200)));
        assert!(!check("a/b/things/twin/commands/modify", Some(204)));
    }
}

#[cfg(test)]
mod hub_tests {
    use super::*;
    use crate::service::TwinsConfig;
    use crate::store::{sqlite::SqliteStore, Store};
    use serde_json::json;

    const TOPIC: &str = "org.acme/lamp/things/live/messages/ask";

    /// A service with the thing `org.acme:lamp`, owned by `nginx:alice`,
    /// whose inbox `nginx:dev` may read.
    async fn twins(dir: &tempfile::TempDir) -> Arc<Twins> {
        let store = SqliteStore::open(&dir.path().join("twins.db"), false).unwrap();
        let twins = Arc::new(Twins::new(Store::Sqlite(store), TwinsConfig::default()));
        let grant = |subject: &str, resources: serde_json::Value| json!({"subjects": {subject: {"type": "generated"}}, "resources": resources});
        let all = json!({"grant": ["READ", "WRITE"], "revoke": []});
        let policy = json!({"entries": {
            "OWNER": grant("nginx:alice", json!({"thing:/": all, "policy:/": all, "message:/": all})),
            "DEVICE": grant("nginx:dev", json!({"message:/inbox": {"grant": ["READ"], "revoke": []}})),
        }});
        let mut create = Envelope::new("org.acme/lamp/policies/commands/create", "/");
        create.value = Some(policy);
        let created = twins.apply_envelope(&caller("alice"), &create).await.unwrap();
        assert_eq!(created.status, Some(201), "{created:?}");
        let mut create = Envelope::new("org.acme/lamp/things/twin/commands/create", "/");
        create.value = Some(json!({"policyId": "org.acme:lamp"}));
        let created = twins.apply_envelope(&caller("alice"), &create).await.unwrap();
        assert_eq!(created.status, Some(201), "{created:?}");
        twins
    }

    fn caller(user: &str) -> Caller {
        Caller::new(vec![format!("nginx:{user}")])
    }

    fn message(headers: serde_json::Value) -> (Topic, Envelope) {
        let mut envelope = Envelope::new(TOPIC, "/inbox/messages/ask");
        envelope.headers = headers.as_object().unwrap().clone();
        envelope.value = Some(json!("what time is it?"));
        (Topic::parse(TOPIC).unwrap(), envelope)
    }

    /// A subscriber of messages, and the queue it reads.
    fn listen(twins: &Arc<Twins>, user: &str) -> (Subscription, mpsc::Receiver<Envelope>) {
        let (out, queue) = mpsc::channel(4);
        let subscription = twins.subscribe_live(caller(user), out);
        subscription.subscriber.set(Kind::Messages, Some(Vec::new()));
        (subscription, queue)
    }

    #[tokio::test]
    async fn a_response_is_correlated_to_its_call() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir).await;
        let (_device, mut inbox) = listen(&twins, "dev");
        let (topic, envelope) = message(json!({"correlation-id": "c1"}));
        let call = twins
            .send_live(&caller("alice"), topic, Kind::Messages, envelope, Sending::default())
            .await
            .unwrap()
            .expect("a response is wanted");
        let received = inbox.recv().await.unwrap();
        assert_eq!(received.correlation_id().as_deref(), Some("c1"));

        let mut other = received.clone();
        other.status = Some(200);
        other.headers.insert("correlation-id".into(), "c2".into());
        assert!(!twins.answer_live(other), "no call waits for c2");
        let mut response = received;
        response.status = Some(201);
        response.value = Some(json!("noon"));
        assert!(twins.answer_live(response));
        let answered = call.response().await.unwrap();
        assert_eq!((answered.status, answered.value), (Some(201), Some(json!("noon"))));
    }

    #[tokio::test]
    async fn an_unanswered_call_times_out_with_dittos_408_and_frees_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir).await;
        let (topic, envelope) = message(json!({"correlation-id": "c1", "timeout": "50ms"}));
        let call = twins
            .send_live(
                &caller("alice"),
                topic.clone(),
                Kind::Messages,
                envelope.clone(),
                Sending::default(),
            )
            .await
            .unwrap()
            .unwrap();
        let timed_out = call.response().await.unwrap();
        assert_eq!(timed_out.topic, "org.acme/lamp/things/live/errors");
        assert_eq!(timed_out.status, Some(408));
        assert_eq!(timed_out.value.unwrap()["error"], "command.timeout");
        // The correlation id may be used again.
        let alice = caller("alice");
        let again = twins.send_live(&alice, topic, Kind::Messages, envelope, Sending::default());
        assert!(again.await.unwrap().is_some());
    }

    #[tokio::test]
    async fn senders_need_write_and_readers_read() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir).await;
        let (_device, mut device) = listen(&twins, "dev");
        let (_stranger, mut stranger) = listen(&twins, "eve");
        let (topic, envelope) = message(json!({"timeout": "0"}));
        let refused = twins
            .send_live(
                &caller("dev"),
                topic.clone(),
                Kind::Messages,
                envelope.clone(),
                Sending::default(),
            )
            .await
            .err()
            .unwrap();
        assert_eq!((refused.status, refused.error), (403, "messages:send.notallowed"));
        let sent = twins
            .send_live(&caller("alice"), topic, Kind::Messages, envelope, Sending::default())
            .await
            .unwrap();
        assert!(sent.is_none(), "timeout 0 waits for nothing");
        assert!(device.try_recv().is_ok());
        assert!(stranger.try_recv().is_err(), "no READ on the message: nothing");
    }

    #[tokio::test]
    async fn a_full_session_queue_drops_and_counts() {
        let dir = tempfile::tempdir().unwrap();
        let twins = twins(&dir).await;
        let (_device, _unread) = listen(&twins, "dev");
        for _ in 0..6 {
            let (topic, envelope) = message(json!({"timeout": "0"}));
            let caller = caller("alice");
            twins
                .send_live(&caller, topic, Kind::Messages, envelope, Sending::default())
                .await
                .unwrap();
        }
        assert_eq!(twins.live().dropped.load(Ordering::Relaxed), 2, "4 fit in the queue");
    }
}
