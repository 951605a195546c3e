//! An `mqtt` connection's client to a broker: one MQTT connection (the
//! routes' `mqtt` endpoint client, `MqttSink`), which subscribes to every
//! source address, and two tasks.
//!
//! - **The applier** takes the sources' messages in the order they came
//!   and applies each as a Ditto protocol command (`inbound.rs`), side by
//!   side in a window (`window.rs`): one thing's commands one at a time,
//!   in the order the broker delivered them, and the acknowledgements in
//!   that order too, as MQTT requires. A QoS 1 message is acknowledged
//!   only once its command and every one before it was applied or refused
//!   for good (Ditto's `twin-persisted`); until then the broker holds it,
//!   and sends it again after a reconnect. Its answer goes to the source's
//!   reply target, if it has one.
//! - **The publisher** owns the connection: it connects, and reconnects
//!   with a growing pause (1 s to 30 s) whenever it fails, and publishes
//!   the targets' events and the replies. What the broker had not
//!   acknowledged when the connection failed is sent again after the
//!   reconnect (at least once), up to `SEND_TRIES` times; events that
//!   committed meanwhile wait in the event journal (`feed.rs`).
//!
//! # What is bounded, and by what
//!
//! QoS 1 messages waiting to be applied: the broker's in-flight window
//! toward us (our Receive Maximum, 32, on MQTT 5; the broker's own limit
//! on 3.1.1, Mosquitto's 20), since none is acknowledged before it is
//! applied. QoS 0 messages: `AT_MOST_ONCE_WAITING`, beyond which they are
//! dropped and counted as failed. Replies: `REPLIES_WAITING`. Events:
//! one batch in flight; the rest wait in the event journal (or, with the
//! journal off, in the change feed's buffer, beyond which they are
//! counted as missed).

use super::super::feed::Feed;
use super::super::inbound::{self, Answer, Outcome};
use super::super::live::LiveSignal;
use super::super::model::{ConnectionSpec, Owed};
use super::super::placeholder::Received;
use super::super::progress::Ticket;
use super::super::source::{AnswerKinds, SourceSpec};
use super::super::stats::ConnectionStats;
use super::super::uri::redact;
use super::super::window::{entity_of, Window};
use super::{live_topic, message, publications, target_message, MqttSpec};
use crate::protocol::search::Searches;
use crate::protocol::Envelope;
use crate::service::Twins;
use ferry_broker::endpoint::RoutedMessage;
use ferry_broker::Message;
use ferry_mqtt::topic::filter_matches;
use ferry_mqtt::{Publish, QoS, ReasonCode};
use ferry_routes::endpoints::mqtt::{MqttSink, Receive};
use ferry_routes::sink::Sink;
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

/// Pauses between tries to connect: doubled after each failure.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(30);

/// QoS 0 messages that may wait to be applied: a burst of about a second
/// at the rate one connection applies commands. Nothing holds a QoS 0
/// sender back, so beyond this they are dropped.
const AT_MOST_ONCE_WAITING: usize = 1024;

/// Replies that may wait for the publisher, e.g. while it reconnects.
const REPLIES_WAITING: usize = 1024;

/// Connections one batch of messages is sent on at most: a batch that the
/// broker drops the connection over again and again (one message too
/// large for it, say) is then counted as failed rather than holding
/// every message after it back.
const SEND_TRIES: u32 = 3;

/// A message of one of the sources, and, at QoS 1, where its
/// acknowledgement waits.
struct Job {
    publish: Publish,
    acknowledge: Option<oneshot::Sender<ReasonCode>>,
}

/// Where the connection's reader hands the sources' messages.
struct Sources {
    jobs: mpsc::UnboundedSender<Job>,
    at_most_once_waiting: Arc<AtomicUsize>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
}

impl Receive for Sources {
    fn receive(&self, publish: Publish) -> Option<oneshot::Receiver<ReasonCode>> {
        if publish.qos == QoS::AtMostOnce {
            if self.at_most_once_waiting.fetch_add(1, Ordering::Relaxed) >= AT_MOST_ONCE_WAITING {
                self.at_most_once_waiting.fetch_sub(1, Ordering::Relaxed);
                if let Some((index, _)) = source_of(&self.mqtt, &publish.topic) {
                    self.stats.sources[index].consumed.inc();
                    self.stats.sources[index].failed.inc();
                }
                self.stats.set_failure(format!(
                    "more than {AT_MOST_ONCE_WAITING} QoS 0 messages waiting to be applied: {} dropped",
                    publish.topic
                ));
                return None;
            }
            // Sent only while the applier runs: it ends with the connection.
            let _ = self.jobs.send(Job { publish, acknowledge: None });
            return None;
        }
        let (acknowledge, acknowledged) = oneshot::channel();
        let _ = self.jobs.send(Job { publish, acknowledge: Some(acknowledge) });
        Some(acknowledged)
    }
}

/// What the publisher sends besides events: an answer for a reply target.
struct Reply {
    topic: String,
    answer: Envelope,
}

/// Starts the connection's client; aborting the handles stops it.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    signals: mpsc::Receiver<LiveSignal>,
    events: Option<Feed>,
) -> Vec<AbortHandle> {
    let (jobs, queued) = mpsc::unbounded_channel();
    let at_most_once_waiting = Arc::new(AtomicUsize::new(0));
    let sources = Sources {
        jobs,
        at_most_once_waiting: at_most_once_waiting.clone(),
        mqtt: mqtt.clone(),
        stats: stats.clone(),
    };
    let name = format!("connection {}", spec.id);
    let sink = match MqttSink::receiving(&name, &mqtt.client, Arc::new(sources)) {
        Ok(sink) => sink,
        Err(error) => {
            // Checked when the connection was stored; only a change of the
            // rules since (a stored connection, a newer Ferry) lands here.
            stats.set_failure(format!("the MQTT connection cannot be made: {error}"));
            return Vec::new();
        }
    };
    stats.set_connecting();
    let (replies, to_reply) = mpsc::channel(REPLIES_WAITING);
    let searches = Searches::new(twins.clone());
    let applier = Applier {
        twins: twins.clone(),
        searches,
        mqtt: mqtt.clone(),
        stats: stats.clone(),
        replies,
    };
    vec![
        tokio::spawn(applier.run(queued, at_most_once_waiting)).abort_handle(),
        tokio::spawn(publish(twins, spec, mqtt, stats, sink, to_reply, signals, events))
            .abort_handle(),
    ]
}

struct Applier {
    twins: Arc<Twins>,
    /// The connection's search subscriptions.
    searches: Searches,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    replies: mpsc::Sender<Reply>,
}

impl Applier {
    async fn run(
        self,
        mut queued: mpsc::UnboundedReceiver<Job>,
        at_most_once_waiting: Arc<AtomicUsize>,
    ) {
        let this = &self;
        let mut window = Window::default();
        loop {
            tokio::select! {
                // Finished commands first: they free room.
                biased;
                Some(acknowledge) = window.next(), if !window.is_empty() => {
                    Self::acknowledge(acknowledge);
                }
                job = queued.recv(), if window.has_room() => {
                    let Some(job) = job else { break };
                    if job.acknowledge.is_none() {
                        at_most_once_waiting.fetch_sub(1, Ordering::Relaxed);
                    }
                    let entity = entity_of(&job.publish.payload);
                    while window.holds(&entity) {
                        let Some(acknowledge) = window.next().await else { break };
                        Self::acknowledge(acknowledge);
                    }
                    window.push(entity, async move {
                        this.apply(&job.publish).await;
                        job.acknowledge
                    });
                }
            }
        }
        while let Some(acknowledge) = window.next().await {
            Self::acknowledge(acknowledge);
        }
    }

    fn acknowledge(acknowledge: Option<oneshot::Sender<ReasonCode>>) {
        if let Some(acknowledge) = acknowledge {
            // Applied or refused for good: either way the broker may
            // forget it (MQTT 3.1.1 has no negative acknowledgement).
            let _ = acknowledge.send(ReasonCode::Success);
        }
    }

    async fn apply(&self, publish: &Publish) {
        let topic = publish.topic.as_ref();
        // None: a subscription of an earlier configuration that the
        // broker's persistent session still holds.
        let Some((index, source)) = source_of(&self.mqtt, topic) else {
            tracing::debug!(%topic, "an MQTT connection's message matches none of its sources");
            return;
        };
        let figures = &self.stats.sources[index];
        figures.consumed.inc();
        let headers = headers_of(publish);
        let received = Received { headers: &headers, address: Some(topic) };
        let what = || format!("MQTT topic {topic}");
        let (outcome, answer) = inbound::apply_until_done(
            &self.twins,
            &self.searches,
            source,
            received,
            &publish.payload,
            what,
        )
        .await;
        match outcome {
            Outcome::Applied => {
                figures.applied.inc();
                self.stats.set_success();
            }
            Outcome::Refused(why) | Outcome::Retriable(why) => {
                figures.failed.inc();
                self.stats.set_failure(format!("{topic}: {why}"));
            }
        }
        let Some(answer) = answer else { return };
        let Some(target) = &source.reply_target else { return };
        let Some(reply_topic) = target.address_for(received, &publish.payload) else { return };
        match answer {
            Answer::Now(answer) => {
                reply(&self.replies, &self.stats, target.takes, reply_topic, *answer)
            }
            Answer::Later(call) => {
                // Waits beside the applier, which goes on with the next
                // messages; calls waiting at once are bounded by the hub.
                let (replies, stats, takes) =
                    (self.replies.clone(), self.stats.clone(), target.takes);
                tokio::spawn(async move {
                    if let Some(answer) = call.response().await {
                        reply(&replies, &stats, takes, reply_topic, answer);
                    }
                });
            }
            Answer::Stream(mut events) => {
                // As long as the subscription lasts: bounded per
                // connection by `search::SUBSCRIPTIONS_PER_OWNER`.
                let (replies, stats, takes) =
                    (self.replies.clone(), self.stats.clone(), target.takes);
                tokio::spawn(async move {
                    while let Some(event) = events.recv().await {
                        reply(&replies, &stats, takes, reply_topic.clone(), event);
                    }
                });
            }
        }
    }
}

/// Queues `answer` for the reply target, if it takes its kind.
fn reply(
    replies: &mpsc::Sender<Reply>,
    stats: &ConnectionStats,
    takes: AnswerKinds,
    topic: String,
    answer: Envelope,
) {
    if !takes.answer(&answer) {
        return;
    }
    if replies.try_send(Reply { topic, answer }).is_err() {
        stats.set_failure(format!("more than {REPLIES_WAITING} replies waiting: one dropped"));
    }
}

/// The source (and its index) that subscribed to what `topic` came on.
fn source_of<'a>(mqtt: &'a MqttSpec, topic: &str) -> Option<(usize, &'a SourceSpec)> {
    mqtt.sources
        .iter()
        .enumerate()
        .find(|(_, source)| source.addresses.iter().any(|filter| filter_matches(filter, topic)))
}

/// A message's transport headers, as Ditto's MQTT sources give them:
/// `mqtt.topic`, `mqtt.qos`, `mqtt.retain`, and on MQTT 5 the user
/// properties (names in lower case), `content-type`, `reply-to` (the
/// Response Topic) and `correlation-id` (the Correlation Data as text).
fn headers_of(publish: &Publish) -> Map<String, Value> {
    let mut headers = Map::new();
    let properties = &publish.properties;
    for (name, value) in &properties.user_properties {
        headers.insert(name.to_ascii_lowercase(), Value::String(value.to_string()));
    }
    if let Some(content_type) = &properties.content_type {
        headers.insert("content-type".into(), Value::String(content_type.to_string()));
    }
    if let Some(response_topic) = &properties.response_topic {
        headers.insert("reply-to".into(), Value::String(response_topic.to_string()));
    }
    if let Some(correlation) = &properties.correlation_data {
        let correlation = String::from_utf8_lossy(correlation).into_owned();
        headers.insert("correlation-id".into(), Value::String(correlation));
    }
    headers.insert("mqtt.topic".into(), Value::String(publish.topic.to_string()));
    headers.insert("mqtt.qos".into(), Value::String((publish.qos as u8).to_string()));
    headers.insert("mqtt.retain".into(), Value::String(publish.retain.to_string()));
    headers
}

/// A batch of messages for the broker, and what each one settles.
#[derive(Default)]
struct Batch {
    messages: Vec<RoutedMessage>,
    /// Per message of a target: its sequence, the target's index, the
    /// acknowledgement it owes and the event's ticket.
    owed: Vec<(u64, usize, Option<Owed>, Option<Ticket>)>,
    /// Connections it was sent on and lost with.
    tries: u32,
}

/// The connection's publisher; see the module documentation.
#[expect(clippy::too_many_arguments, reason = "the connection's parts, each its own")]
async fn publish(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    mut sink: MqttSink,
    mut replies: mpsc::Receiver<Reply>,
    mut signals: mpsc::Receiver<LiveSignal>,
    mut events: Option<Feed>,
) {
    let qos = mqtt.client.send_qos();
    let broker = redact(&mqtt.client.url);
    let mut retry = FIRST_RETRY;
    let mut sequence = 0u64;
    let mut unsent: Option<Batch> = None;
    loop {
        if let Err(error) = sink.connect().await {
            tracing::warn!(connection = %spec.id, %broker, %error, "a twin connection cannot connect to its MQTT broker; trying again in {retry:?}");
            stats.set_failure(format!("cannot connect to {broker}: {error}"));
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(LAST_RETRY);
            continue;
        }
        tracing::info!(connection = %spec.id, %broker, "a twin connection connected to its MQTT broker");
        retry = FIRST_RETRY;
        stats.set_success();
        let closed = sink.closed();
        tokio::pin!(closed);
        loop {
            let mut batch = unsent.take().unwrap_or_default();
            if batch.messages.is_empty() {
                tokio::select! {
                    why = &mut closed => {
                        tracing::warn!(connection = %spec.id, %broker, error = %why, "a twin connection lost its MQTT broker");
                        stats.set_failure(format!("connection to {broker} lost: {why}"));
                        break;
                    }
                    Some(reply) = replies.recv() => {
                        sequence += 1;
                        batch.messages.push(routed(sequence, message(reply.topic, &reply.answer, qos)));
                    }
                    Some(mut signal) = signals.recv() => {
                        if let Some(topic) = live_topic(&twins, &mqtt, &stats, &mut signal) {
                            sequence += 1;
                            let message = target_message(&mqtt, signal.target, topic, &signal.envelope, qos);
                            batch.messages.push(routed(sequence, message));
                            batch.owed.push((sequence, signal.target, signal.owed, None));
                        }
                    }
                    Some((event, ticket)) = next_from(&mut events, &stats, &spec.id) => {
                        for publication in publications(&twins, &spec, &mqtt, &stats, &event).await {
                            sequence += 1;
                            let message = target_message(&mqtt, publication.target, publication.topic, &publication.envelope, qos);
                            batch.messages.push(routed(sequence, message));
                            batch.owed.push((sequence, publication.target, publication.owed, ticket.clone()));
                        }
                    }
                }
            }
            if batch.messages.is_empty() {
                continue;
            }
            let sent = sink.send(&batch.messages).await;
            batch.tries += 1;
            if let Err(error) = &sent {
                stats.set_failure(format!("publishing to {broker} failed: {error}"));
                if batch.tries < SEND_TRIES {
                    unsent = Some(batch);
                    break;
                }
            }
            let lost = sent.is_err();
            let rejected = sent.as_ref().map(|sent| sent.rejected.as_slice()).unwrap_or_default();
            for (sequence, index, owes, _ticket) in batch.owed {
                let refused = lost || rejected.iter().any(|(offset, _)| *offset == sequence);
                let figures = &stats.targets[index];
                if refused {
                    figures.failed.inc();
                } else {
                    figures.published.inc();
                }
                if let Some(owes) = owes {
                    settle(owes, &twins, refused);
                }
            }
            if lost {
                break;
            }
        }
    }
}

/// The next event, or never for a connection without targets.
async fn next_from(
    events: &mut Option<Feed>,
    stats: &ConnectionStats,
    id: &str,
) -> Option<(crate::service::ThingEvent, Option<Ticket>)> {
    match events {
        Some(feed) => feed.next(stats, id).await,
        None => std::future::pending().await,
    }
}

fn settle(owes: Owed, twins: &Twins, refused: bool) {
    if refused {
        owes.settle(twins, 503, Some("the MQTT broker did not take the event".into()));
    } else {
        owes.settle(twins, 204, None);
    }
}

/// One PUBLISH for the client: `sequence` tells it apart in `Sent`.
fn routed(sequence: u64, message: Message) -> RoutedMessage {
    RoutedMessage {
        offset: sequence,
        priority: 0,
        expires_at_ms: 0,
        stored_bytes: 0,
        message,
        publisher: None,
    }
}
