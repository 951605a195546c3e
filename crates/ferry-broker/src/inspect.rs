//! What the admin API asks of the broker: clients with their figures,
//! sessions, subscriptions and retained messages (listed, looked up,
//! removed), a publish as an administrator, and an in-broker subscription
//! that streams what a filter matches.
//!
//! All of it is control plane: a listing takes the locks a SUBSCRIBE or a
//! CONNECT takes, in the broker's lock order (`sessions` → topic tree →
//! one session), one at a time and briefly, and copies out what it shows.
//! Nothing here is on the publish path; the per-connection figures are
//! counted by each connection itself (`connection_info.rs`).

use crate::broker::Broker;
use crate::connection_info::ConnectionInfo;
use crate::message::Message;
use crate::session::Session;
use crate::stats::HistogramFigures;
use ferry_mqtt::{ByteStr, ProtocolVersion, QoS, RetainHandling, SubscriptionOptions};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// One page of a listing, and how many items there are over all pages.
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub count: usize,
}

/// Which page of a listing: `page` counts from 1.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    pub page: usize,
    pub limit: usize,
}

impl Paging {
    /// Sorts `all` by `key` and keeps the page asked for. A listing holds
    /// one entry per match (a pointer, mostly) while it sorts, so that
    /// pages are stable however the broker's maps are ordered; the broker
    /// already holds far more than that for each of them.
    fn cut<T, K: Ord>(self, mut all: Vec<T>, key: impl Fn(&T) -> K) -> Page<T> {
        let count = all.len();
        all.sort_by_key(key);
        let skip = self.page.saturating_sub(1).saturating_mul(self.limit);
        let items = all.into_iter().skip(skip).take(self.limit).collect();
        Page { items, count }
    }
}

/// A connected client, as listed.
#[derive(Debug, Clone)]
pub struct ClientView {
    pub client_id: String,
    pub username: Option<String>,
    pub address: SocketAddr,
    /// `3.1`, `3.1.1` or `5`.
    pub protocol: &'static str,
    pub keep_alive_secs: u16,
    pub clean_start: bool,
    pub connected_at_ms: u64,
    pub subscriptions: usize,
    /// QoS 1/2 deliveries sent and not yet acknowledged.
    pub inflight: usize,
    /// Deliveries waiting, in memory and in the durable log.
    pub queued: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub messages_in: u64,
    pub messages_out: u64,
    pub listener: String,
}

/// What a client listing selects; every set field must match.
#[derive(Debug, Default, Clone)]
pub struct ClientQuery {
    pub client_id_prefix: Option<String>,
    pub username: Option<String>,
    /// A prefix of the peer address as `ip:port` (so an IP alone matches
    /// all its ports).
    pub address: Option<String>,
    pub protocol: Option<String>,
}

/// A subscription, as listed.
#[derive(Debug, Clone)]
pub struct SubscriptionView {
    pub client_id: String,
    pub filter: String,
    pub qos: u8,
    pub no_local: bool,
    pub retain_as_published: bool,
    pub retain_handling: u8,
}

/// A session, online or not.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub client_id: String,
    pub online: bool,
    pub expiry_interval_secs: u32,
    pub queued: usize,
    pub subscriptions: usize,
}

/// Why a session could not be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeleteSessionError {
    #[error("no session for this client id")]
    NotFound,
    #[error("the session's client is connected; disconnect it first")]
    Online,
}

/// The broker's counters and sizes at one moment, for the overview.
#[derive(Debug, Clone, Default)]
pub struct Overview {
    pub connections: u64,
    pub sessions_online: usize,
    pub sessions_offline: usize,
    pub subscriptions: usize,
    pub retained: usize,
    pub messages_in: u64,
    pub messages_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub dropped: u64,
    pub queued_messages: usize,
    pub queued_bytes: u64,
    /// Publish-to-deliver latency since the start; a reader keeps the
    /// previous reading to have the latency of an interval.
    pub latency: HistogramFigures,
    pub disk_free_bytes: Option<u64>,
    pub log_bytes: Option<u64>,
}

fn protocol_name(version: ProtocolVersion) -> &'static str {
    match version {
        ProtocolVersion::V31 => "3.1",
        ProtocolVersion::V311 => "3.1.1",
        ProtocolVersion::V5 => "5",
    }
}

fn subscription_view(
    client_id: &str,
    filter: &str,
    options: SubscriptionOptions,
) -> SubscriptionView {
    SubscriptionView {
        client_id: client_id.to_owned(),
        filter: filter.to_owned(),
        qos: options.qos as u8,
        no_local: options.no_local,
        retain_as_published: options.retain_as_published,
        retain_handling: match options.retain_handling {
            RetainHandling::SendOnSubscribe => 0,
            RetainHandling::SendIfNewSubscription => 1,
            RetainHandling::DoNotSend => 2,
        },
    }
}

impl ClientQuery {
    fn matches(&self, client_id: &str, info: &ConnectionInfo) -> bool {
        self.client_id_prefix.as_deref().is_none_or(|prefix| client_id.starts_with(prefix))
            && self.username.as_deref().is_none_or(|wanted| info.username() == Some(wanted))
            && self
                .address
                .as_deref()
                .is_none_or(|prefix| info.address().to_string().starts_with(prefix))
            && self.protocol.as_deref().is_none_or(|wanted| protocol_name(info.version) == wanted)
    }
}

impl Broker {
    fn client_view(&self, session: &Session, info: &ConnectionInfo) -> ClientView {
        let (subscriptions, inflight, queued) = {
            let state = session.lock();
            let inflight = state.inflight.len().saturating_sub(usize::from(state.ending));
            (state.subscriptions.len(), inflight, state.queue.len() + state.on_disk.len())
        };
        ClientView {
            client_id: session.client_id.to_string(),
            username: info.username().map(str::to_owned),
            address: info.address(),
            protocol: protocol_name(info.version),
            keep_alive_secs: info.keep_alive_secs,
            clean_start: info.clean_start,
            connected_at_ms: info.connected_at_ms,
            subscriptions,
            inflight,
            queued,
            bytes_in: ConnectionInfo::get(&info.bytes_in),
            bytes_out: ConnectionInfo::get(&info.bytes_out),
            messages_in: ConnectionInfo::get(&info.messages_in),
            messages_out: ConnectionInfo::get(&info.messages_out),
            listener: info.listener.name.clone(),
        }
    }

    /// Connected clients that `query` selects, by client id.
    pub fn clients(&self, query: &ClientQuery, paging: Paging) -> Page<ClientView> {
        let sessions = self.sessions.lock().snapshot();
        let selected: Vec<_> = sessions
            .into_iter()
            .filter_map(|session| {
                let info = session.connection()?;
                Some((session, info))
            })
            .filter(|(session, info)| query.matches(&session.client_id, info))
            .collect();
        let page = paging.cut(selected, |(session, _)| session.client_id.clone());
        Page {
            items: page
                .items
                .iter()
                .map(|(session, info)| self.client_view(session, info))
                .collect(),
            count: page.count,
        }
    }

    /// One connected client and its subscriptions; `None` when it is not
    /// connected.
    pub fn client(&self, client_id: &str) -> Option<(ClientView, Vec<SubscriptionView>)> {
        let session = self.sessions.lock().get(client_id).cloned()?;
        let info = session.connection()?;
        let view = self.client_view(&session, &info);
        let subscriptions = self.subscriptions_of(&session);
        Some((view, subscriptions))
    }

    fn subscriptions_of(&self, session: &Session) -> Vec<SubscriptionView> {
        let mut found = Vec::new();
        self.subscriptions.read().for_each(|id, subscription| {
            if *id == session.id {
                found.push(subscription_view(
                    &session.client_id,
                    &subscription.filter,
                    subscription.options,
                ));
            }
        });
        found.sort_by(|a, b| a.filter.cmp(&b.filter));
        found
    }

    /// Closes the connection of `client_id`, telling an MQTT 5 client
    /// DISCONNECT 0x98 (Administrative action) with `reason`; a 3.1.1
    /// client's socket is just closed. False when it is not connected.
    pub fn disconnect_client(&self, client_id: &str, reason: &str) -> bool {
        let Some(session) = self.sessions.lock().get(client_id).cloned() else { return false };
        if !session.lock().request_close(reason) {
            return false;
        }
        session.wake.notify_one();
        true
    }

    fn session_view(session: &Session) -> SessionView {
        let state = session.lock();
        SessionView {
            client_id: session.client_id.to_string(),
            online: session.is_online(),
            expiry_interval_secs: state.expiry_secs,
            queued: state.queue.len() + state.on_disk.len(),
            subscriptions: state.subscriptions.len(),
        }
    }

    /// Sessions whose client id starts with `prefix`, online or offline as
    /// `online` says (either when `None`), by client id.
    pub fn sessions_page(
        &self,
        prefix: Option<&str>,
        online: Option<bool>,
        paging: Paging,
    ) -> Page<SessionView> {
        let selected: Vec<Arc<Session>> = self
            .sessions
            .lock()
            .values()
            .filter(|session| prefix.is_none_or(|prefix| session.client_id.starts_with(prefix)))
            .filter(|session| online.is_none_or(|online| session.is_online() == online))
            .cloned()
            .collect();
        let page = paging.cut(selected, |session| session.client_id.clone());
        Page {
            items: page.items.iter().map(|session| Broker::session_view(session)).collect(),
            count: page.count,
        }
    }

    pub fn session(&self, client_id: &str) -> Option<SessionView> {
        let session = self.sessions.lock().get(client_id).cloned()?;
        Some(Broker::session_view(&session))
    }

    /// Ends an offline session now, as its expiry would: its queue and
    /// subscriptions go, and a pending will is published.
    pub fn delete_session(&self, client_id: &str) -> Result<(), DeleteSessionError> {
        let mut sessions = self.sessions.lock();
        let session = sessions.get(client_id).cloned().ok_or(DeleteSessionError::NotFound)?;
        // Under the sessions lock, which a CONNECT takes to attach: no
        // client can come online between this check and the removal.
        if session.is_online() {
            return Err(DeleteSessionError::Online);
        }
        sessions.remove(client_id);
        drop(sessions);
        self.end_session(&session);
        Ok(())
    }

    /// Subscriptions of `client_id` and/or through exactly `filter`, by
    /// client id and filter.
    pub fn subscriptions_page(
        &self,
        client_id: Option<&str>,
        filter: Option<&str>,
        paging: Paging,
    ) -> Page<SubscriptionView> {
        let mut selected = Vec::new();
        self.subscriptions.read().for_each(|_, subscription| {
            if client_id.is_none_or(|wanted| *subscription.session.client_id == *wanted)
                && filter.is_none_or(|wanted| subscription.filter.as_str() == wanted)
            {
                selected.push((
                    subscription.session.client_id.clone(),
                    subscription.filter.clone(),
                    subscription.options,
                ));
            }
        });
        let page =
            paging.cut(selected, |(client_id, filter, _)| (client_id.clone(), filter.clone()));
        Page {
            items: page
                .items
                .iter()
                .map(|(client_id, filter, options)| subscription_view(client_id, filter, *options))
                .collect(),
            count: page.count,
        }
    }

    /// Retained messages whose topics `filter` matches, by topic.
    pub fn retained_page(&self, filter: &str, paging: Paging) -> Page<Arc<Message>> {
        let now = std::time::Instant::now();
        let mut selected = Vec::new();
        self.retained.read().for_each_match(filter, |_, message| {
            if !message.is_expired(now) {
                selected.push(message.clone());
            }
        });
        paging.cut(selected, |message| message.topic.clone())
    }

    /// Removes the retained message of `topic`; false if there was none.
    pub async fn delete_retained(&self, topic: &str) -> bool {
        if self.retained_message(topic).is_none() {
            return false;
        }
        self.clear_retained(ByteStr::from(topic)).await;
        true
    }

    /// The overview's figures now: counters since start and current sizes.
    pub fn overview(&self) -> Overview {
        let stats = &self.stats;
        let mut overview = Overview {
            connections: stats.clients_connected.get(),
            subscriptions: self.subscription_count(),
            retained: self.retained_count(),
            messages_in: stats.publishes_received.sum(),
            messages_out: stats.publishes_sent.sum(),
            bytes_in: stats.bytes_received.get(),
            bytes_out: stats.bytes_sent.get(),
            dropped: stats.dropped_queue_full.get()
                + stats.dropped_too_large.get()
                + stats.dropped_expired.get(),
            latency: stats.delivery_latency.get(),
            ..Overview::default()
        };
        let sessions = self.sessions.lock().snapshot();
        for session in sessions {
            if session.is_online() {
                overview.sessions_online += 1;
            } else {
                overview.sessions_offline += 1;
            }
            let state = session.lock();
            overview.queued_messages += state.queue.len() + state.on_disk.len();
            overview.queued_bytes += state.queued_bytes();
        }
        if let Some(figures) = self.store_figures() {
            overview.disk_free_bytes = Some(figures.free_disk_bytes);
            overview.log_bytes = Some(figures.log_bytes);
        }
        overview
    }

    /// The ACL file's `[groups]` that list `user`; none without an ACL.
    pub fn acl_groups_of(&self, user: &str) -> Vec<String> {
        self.authorization
            .acl()
            .map(|acl| acl.groups_of(user).map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Subscribes a session of its own, inside the broker, to `filter`
    /// (the ACL does not apply) and streams what it matches from now on:
    /// retained messages are not sent. At most `capacity` messages wait
    /// for the reader; beyond that they are dropped and counted, so a slow
    /// reader never slows publishers. The subscription ends when the
    /// stream is dropped. `None` for a filter that is not valid.
    pub fn stream_topic(self: &Arc<Self>, filter: &str, capacity: usize) -> Option<TopicStream> {
        if !ferry_mqtt::topic::is_valid_topic_filter(filter)
            || ferry_mqtt::topic::is_shared_filter(filter)
        {
            return None;
        }
        let id = self.next_session_id.fetch_add(1, Ordering::Relaxed);
        // Not in the sessions map: no client can take it over, and no
        // listing shows it.
        let session = Arc::new(Session::new(id, format!("$admin/stream/{id}").into(), 0));
        session.set_online(true);
        let options = SubscriptionOptions {
            qos: QoS::AtMostOnce,
            no_local: false,
            retain_as_published: true,
            retain_handling: RetainHandling::DoNotSend,
        };
        self.subscribe(&session, &ByteStr::from(filter), options, None, None, None);
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(forward(session.clone(), sender, dropped.clone())).abort_handle();
        Some(TopicStream { broker: self.clone(), session, receiver, dropped, task })
    }
}

/// Moves what the stream's session receives into its channel, at once, so
/// that its queue never holds a publisher back: what does not fit in the
/// channel is dropped and counted.
async fn forward(
    session: Arc<Session>,
    sender: mpsc::Sender<Arc<Message>>,
    dropped: Arc<AtomicU64>,
) {
    loop {
        let arrived = {
            let mut state = session.lock();
            if state.ended {
                return;
            }
            let mut arrived = Vec::with_capacity(state.queue.len());
            while let Some(delivery) = state.pop_queued() {
                arrived.push(delivery.message);
            }
            state.release_waiters();
            arrived
        };
        for message in arrived {
            if sender.try_send(message).is_err() {
                dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        if sender.is_closed() {
            return;
        }
        // A wake-up that came since the queue was emptied left its permit.
        session.wake.notified().await;
    }
}

/// A live subscription of the admin API's topic stream.
pub struct TopicStream {
    broker: Arc<Broker>,
    session: Arc<Session>,
    receiver: mpsc::Receiver<Arc<Message>>,
    dropped: Arc<AtomicU64>,
    task: AbortHandle,
}

impl TopicStream {
    /// The next message; `None` once the subscription has ended.
    pub async fn next(&mut self) -> Option<Arc<Message>> {
        self.receiver.recv().await
    }

    /// Messages dropped since the last call, because the reader was behind.
    pub fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }
}

impl Drop for TopicStream {
    fn drop(&mut self) {
        self.task.abort();
        self.broker.end_session(&self.session);
    }
}
