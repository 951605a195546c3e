//! Ditto's WebSocket, `/ws/2`: Ditto protocol messages as text frames both
//! ways, plus the text control messages (`ws/control.rs`) that start and
//! stop what the server pushes: twin events (`START-SEND-EVENTS`), live
//! messages, live commands and live events (`START-SEND-MESSAGES`, …).
//!
//! The caller is the one the HTTP listener authenticated at the upgrade
//! (the same `TwinAuth` as `/api/2`), for the whole session.
//!
//! **Order and flow.** One task per session reads the client's frames and
//! applies them one after another, writing each answer before reading
//! on, so a client that does not read its answers is slowed by TCP rather
//! than buffered. Live signals pushed to the session wait in a bounded
//! queue ([`PUSH_QUEUE`]); Ditto's gateway drops what its session's
//! buffer (`publisher.backpressure-buffer-size`, 200) cannot hold, and so
//! does this one, counting the drops in `Live::dropped`. The answers to
//! the session's own live calls go through the same queue but wait for
//! room instead. Twin events are read from the change feed by the same
//! task; a session that falls [`EVENT_BUFFER`] events behind loses the
//! oldest, counted the same way.
//!
//! **Live calls** a session sends wait in tasks of their own (their
//! answers come back through the queue), at most [`CALLS_IN_FLIGHT`] at a
//! time, Ditto's `subscriber.backpressure-queue-size`. So does a twin
//! command that waits for subscribers' acknowledgements, which may be
//! this session's own (counted among those calls), and a retrieve with a
//! `live-channel-condition`, which may wait for a device's response.
//!
//! **Acknowledgements.** `/ws/2?declared-acks=a,b` declares the labels the
//! session acknowledges (`acks.rs`; a label taken by another subscriber
//! closes the session after Ditto's `label.not.unique` error). An event
//! whose command requested one of them carries it in `requested-acks`,
//! with the command's `correlation-id`; the client answers on
//! `<ns>/<name>/things/twin/acks/<label>`, or with several labels at once
//! on `…/things/twin/acks` (`protocol/acks.rs`). An event the session's options
//! or READ rights keep from it is weakly acknowledged for it.
//!
//! **Search** (`protocol/search.rs`): the session's subscriptions send
//! their pages through the same queue as the answers to its live calls,
//! waiting for room; they end with the session.
//!
//! **Shutdown** closes every session with 1001 (going away):
//! `Live::close`.
//!
//! [`EVENT_BUFFER`]: crate::service::EVENT_BUFFER

pub(crate) mod control;
pub(crate) mod events;

pub use events::EventOptions;

use crate::acks::{self, Declaration, Requested};
use crate::live::{smart, Kind, Route, Sending, Subscription};
use crate::protocol::search::{self, Searches};
use crate::protocol::{self, error_response, Envelope, Topic, MAX_ENVELOPE_BYTES};
use crate::service::{Caller, ThingEvent, Twins};
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use control::{Control, Stream};
use serde_json::Map;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc, Semaphore};

/// Signals pushed to one session and not yet written: Ditto's
/// `publisher.backpressure-buffer-size`. Beyond it they are dropped.
pub const PUSH_QUEUE: usize = 200;

/// Live calls one session may have waiting for their responses: Ditto's
/// `subscriber.backpressure-queue-size`. Beyond it a call is refused with
/// 429.
pub const CALLS_IN_FLIGHT: usize = 100;

/// `GET /ws/2[?declared-acks=…]`: the upgrade, for an authenticated
/// caller.
pub async fn upgrade(
    State(twins): State<Arc<Twins>>,
    caller: Option<Extension<Caller>>,
    RawQuery(query): RawQuery,
    upgrade: WebSocketUpgrade,
) -> Response {
    let caller = match crate::http::caller(caller) {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    let params = crate::http::params::pairs(
        query.unwrap_or_default().as_bytes(),
        crate::http::params::Plus::Literal,
    );
    let declared = match params.iter().find(|(name, _)| name == "declared-acks") {
        Some((_, labels)) => match acks::parse_labels(labels) {
            Ok(labels) => labels,
            Err(error) => return error.into_response(),
        },
        None => Vec::new(),
    };
    // A larger frame is closed by the WebSocket layer (1009) before it is
    // buffered: no Ditto protocol message is that large.
    upgrade
        .max_message_size(MAX_ENVELOPE_BYTES)
        .on_upgrade(move |socket| Session::start(twins, caller, socket).run(declared))
}

struct Session {
    twins: Arc<Twins>,
    caller: Caller,
    socket: WebSocket,
    /// Live signals for this session, and the answers to its live calls.
    pushed: mpsc::Receiver<Envelope>,
    answers: mpsc::Sender<Envelope>,
    subscription: Subscription,
    calls: Arc<Semaphore>,
    /// The change feed and the session's options, while it wants events.
    events: Option<(broadcast::Receiver<ThingEvent>, EventOptions)>,
    /// The acknowledgement labels the session declared.
    declaration: Option<Declaration>,
    /// The session's search subscriptions, whose pages go out through the
    /// answers' queue.
    searches: Searches,
}

/// Whether the session goes on after a frame.
enum Next {
    Continue,
    Close(CloseFrame),
}

impl Session {
    fn start(twins: Arc<Twins>, caller: Caller, socket: WebSocket) -> Session {
        let (answers, pushed) = mpsc::channel(PUSH_QUEUE);
        let subscription = twins.subscribe_live(caller.clone(), answers.clone());
        let searches = Searches::new(twins.clone());
        Session {
            twins,
            caller,
            socket,
            pushed,
            answers,
            subscription,
            calls: Arc::new(Semaphore::new(CALLS_IN_FLIGHT)),
            events: None,
            declaration: None,
            searches,
        }
    }

    async fn run(mut self, declared: Vec<String>) {
        if !declared.is_empty() {
            match self.twins.ack_hub().declare(declared) {
                Ok(declaration) => {
                    self.subscription.subscriber.declare(declaration.labels());
                    self.declaration = Some(declaration);
                }
                Err(error) => {
                    // As Ditto: the error, then the session ends.
                    let _ = self.send(&error_response(None, &Map::new(), &error)).await;
                    let reason = error.message.clone().into();
                    let frame = CloseFrame { code: close_code::POLICY, reason };
                    let _ = self.socket.send(Message::Close(Some(frame))).await;
                    return;
                }
            }
        }
        let mut closing = self.twins.live().closing();
        let close = loop {
            let next = tokio::select! {
                frame = self.socket.recv() => match frame {
                    Some(Ok(Message::Text(text))) => self.on_text(text.as_str()).await,
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                    // Pings are answered by the WebSocket layer; Ditto's
                    // protocol is text only.
                    Some(Ok(_)) => Next::Continue,
                },
                Some(pushed) = self.pushed.recv() => self.send(&pushed).await,
                event = next_event(&mut self.events, &self.twins.live().dropped) => self.on_event(event).await,
                // The guard `wait_for` returns is not `Send`: dropped at once.
                () = async { drop(closing.wait_for(|&closed| closed).await) } => Next::Close(CloseFrame {
                    code: close_code::AWAY,
                    reason: "Ferry is shutting down".into(),
                }),
            };
            if let Next::Close(frame) = next {
                break frame;
            }
        };
        let _ = self.socket.send(Message::Close(Some(close))).await;
    }

    async fn on_text(&mut self, text: &str) -> Next {
        match control::parse(text) {
            Ok(Some(control)) => self.on_control(control).await,
            Ok(None) => self.on_protocol(text).await,
            Err(malformed) => {
                tracing::debug!(%malformed, "WebSocket closed");
                Next::Close(CloseFrame {
                    code: close_code::ERROR,
                    reason: "malformed control message".into(),
                })
            }
        }
    }

    async fn on_control(&mut self, control: Control) -> Next {
        let (stream, subscribed) = match control {
            Control::Jwt => return Next::Continue,
            Control::Stop(stream) => {
                match stream {
                    Stream::Events => {
                        self.events = None;
                        self.set_streaming(false);
                    }
                    Stream::Live(kind) => self.subscription.subscriber.set(kind, None),
                    Stream::PolicyAnnouncements => {
                        self.subscription.subscriber.set_announcements(None)
                    }
                }
                (stream, false)
            }
            Control::Start { stream, params } => {
                let correlation_id =
                    params.iter().find(|(name, _)| name == "correlation-id").map(|(_, id)| id);
                match stream {
                    Stream::Events => match EventOptions::parse(&params) {
                        Ok(options) => {
                            let feed = match self.events.take() {
                                Some((feed, _)) => feed,
                                None => self.twins.subscribe(),
                            };
                            self.events = Some((feed, options));
                            self.set_streaming(true);
                        }
                        Err(error) => {
                            // As Ditto: the error, and no acknowledgement.
                            let mut headers = Map::new();
                            if let Some(id) = correlation_id {
                                headers.insert("correlation-id".into(), id.clone().into());
                            }
                            return self.send(&error_response(None, &headers, &error)).await;
                        }
                    },
                    Stream::Live(kind) => {
                        self.subscription.subscriber.set(kind, Some(namespaces(&params)));
                    }
                    Stream::PolicyAnnouncements => {
                        self.subscription.subscriber.set_announcements(Some(namespaces(&params)));
                    }
                }
                (stream, true)
            }
        };
        self.send_text(control::ack(stream, subscribed)).await
    }

    fn set_streaming(&self, streaming: bool) {
        if let Some(declaration) = &self.declaration {
            declaration.set_streaming(streaming);
        }
    }

    async fn on_protocol(&mut self, text: &str) -> Next {
        let envelope = match Envelope::parse(text.as_bytes()) {
            Ok(envelope) => envelope,
            Err(error) => return self.send(&error_response(None, &Map::new(), &error)).await,
        };
        if let Ok(topic) = Topic::parse(&envelope.topic) {
            if protocol::acks::is_ack(&topic) {
                return self.on_ack(topic, envelope).await;
            }
            if search::is_search(&topic) {
                let answers = self.answers.clone();
                let answer = self.searches.apply("", &self.caller, &topic, &envelope, || answers);
                return match answer {
                    Some(answer) => self.send(&answer).await,
                    None => Next::Continue,
                };
            }
        }
        match Route::of(&envelope) {
            Some(Route::Response) => {
                self.twins.answer_live(envelope);
                return Next::Continue;
            }
            Some(Route::Signal(topic, kind)) => return self.send_live(topic, kind, envelope).await,
            None => {}
        }
        let awaits_others = Requested::of_protocol_headers(&envelope.headers)
            .is_ok_and(|requested| requested.awaits_subscribers())
            || envelope.headers.contains_key(smart::CONDITION);
        if awaits_others {
            // Its answer may wait for this very session's acknowledgement,
            // or its live response: in a task of its own, counted with the
            // live calls.
            let Ok(permit) = self.calls.clone().try_acquire_owned() else {
                let error = crate::DittoError::too_many_requests();
                return self.send(&error_response(None, &envelope.headers, &error)).await;
            };
            let (twins, caller, answers) =
                (self.twins.clone(), self.caller.clone(), self.answers.clone());
            tokio::spawn(async move {
                let _permit = permit;
                if let Some(answer) = twins.apply_envelope(&caller, &envelope).await {
                    let _ = answers.send(answer).await;
                }
            });
            return Next::Continue;
        }
        match self.twins.apply_envelope(&self.caller, &envelope).await {
            Some(answer) => self.send(&answer).await,
            None => Next::Continue,
        }
    }

    /// Sends a live signal from this session; its response, when one is
    /// wanted, comes back through the push queue.
    async fn send_live(&mut self, topic: Topic, kind: Kind, envelope: Envelope) -> Next {
        let Ok(permit) = self.calls.clone().try_acquire_owned() else {
            let error = crate::DittoError::too_many_requests();
            return self.send(&error_response(Some(&topic), &envelope.headers, &error)).await;
        };
        let headers = envelope.headers.clone();
        let sent = self
            .twins
            .send_live(&self.caller, topic.clone(), kind, envelope, Sending::default())
            .await;
        match sent {
            Err(error) => self.send(&error_response(Some(&topic), &headers, &error)).await,
            Ok(None) => Next::Continue,
            Ok(Some(call)) => {
                let answers = self.answers.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    tokio::select! {
                        response = call.response() => {
                            if let Some(response) = response {
                                let _ = answers.send(response).await;
                            }
                        }
                        // The session ended: nobody is left to answer.
                        _ = answers.closed() => {}
                    }
                });
                Next::Continue
            }
        }
    }

    /// A client's acknowledgements (`protocol/acks.rs`), for the command
    /// waiting for them: only under labels this session declared.
    async fn on_ack(&mut self, topic: Topic, envelope: Envelope) -> Next {
        let declared = self.declaration.as_ref().map_or(&[][..], Declaration::labels);
        let headers = envelope.headers.clone();
        match protocol::acks::deliver(self.twins.ack_hub(), &topic, envelope, declared) {
            Ok(()) => Next::Continue,
            Err(error) => self.send(&error_response(Some(&topic), &headers, &error)).await,
        }
    }

    async fn on_event(&mut self, event: Option<ThingEvent>) -> Next {
        let Some(event) = event else {
            // The feed closed: the service is shutting down.
            self.events = None;
            return Next::Continue;
        };
        let Some((_, options)) = &self.events else { return Next::Continue };
        // The labels this session declared that the change's command asked for.
        let requested = match (&event.acks, &self.declaration) {
            (Some(requested), Some(declaration)) => {
                let labels: Vec<String> = requested
                    .labels
                    .iter()
                    .filter(|label| declaration.labels().contains(label))
                    .cloned()
                    .collect();
                (!labels.is_empty()).then(|| (requested.correlation_id.clone(), labels))
            }
            _ => None,
        };
        match (options.envelope_for(&self.twins, &self.caller, event).await, requested) {
            (Some(mut envelope), Some((correlation_id, labels))) => {
                envelope.headers.insert("requested-acks".into(), labels.into());
                envelope.headers.insert("correlation-id".into(), correlation_id.into());
                self.send(&envelope).await
            }
            (Some(envelope), None) => self.send(&envelope).await,
            (None, Some((correlation_id, labels))) => {
                for label in labels {
                    self.twins
                        .ack_hub()
                        .deliver(&correlation_id, acks::weak_ack(&label, &correlation_id));
                }
                Next::Continue
            }
            (None, None) => Next::Continue,
        }
    }

    async fn send(&mut self, envelope: &Envelope) -> Next {
        let text = String::from_utf8(envelope.to_bytes()).expect("JSON is UTF-8");
        self.send_text(text).await
    }

    async fn send_text(&mut self, text: String) -> Next {
        match self.socket.send(Message::Text(text.into())).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close(CloseFrame { code: close_code::ERROR, reason: "".into() }),
        }
    }
}

/// The next twin event (`None` once the feed closed; what a session fell
/// too far behind to get is counted in `dropped`), or never while the
/// session wants none.
async fn next_event(
    events: &mut Option<(broadcast::Receiver<ThingEvent>, EventOptions)>,
    dropped: &std::sync::atomic::AtomicU64,
) -> Option<ThingEvent> {
    match events {
        Some((feed, _)) => crate::service::next_event(feed, dropped, "a WebSocket session").await,
        None => std::future::pending().await,
    }
}

/// The `namespaces` a `START-SEND-…` is limited to (empty: all).
fn namespaces(params: &[(String, String)]) -> Vec<String> {
    params
        .iter()
        .find(|(name, _)| name == "namespaces")
        .map(|(_, value)| events::namespaces(value))
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests {
    /// Control message parameters from literals.
    pub(crate) fn params(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect()
    }
}
