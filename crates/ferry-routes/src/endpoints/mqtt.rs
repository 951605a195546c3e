//! The `mqtt` endpoint type: an uplink to any MQTT 3.1.1 or 5.0 broker
//! (another Ferry, Mosquitto, a cloud broker), written on Ferry's own codec
//! so that packet ids, acknowledgements and the in-flight window are ours.
//!
//! - `config.rs`: the settings and their validation.
//! - `connection.rs`: TCP/TLS, CONNECT/CONNACK, and the two tasks that own
//!   the socket (why two tasks is said there); `reader.rs` and `writer.rs`
//!   are those tasks, `keep_alive.rs` their pinging.
//! - `publish.rs`: a routed message as the PUBLISH sent upstream.
//! - `topic_map.rs`: topic rewrite upstream, and the reverse direction's
//!   map from remote filters to local topics.
//! - `tls.rs`: the rustls client configuration.
//!
//! This file is the sink itself: a batch goes out as groups of PUBLISHes
//! (one write each), keeping at most the window unacknowledged, and `send`
//! returns when the remote has acknowledged every one.
//!
//! # What is sent again, and how it is marked
//!
//! The sink resends nothing itself: after a failure the flow reconnects
//! and sends the unacknowledged batch again. Each connection gives fresh
//! packet ids, continuing the counter of the previous one, so an id the
//! remote may still hold from a persistent session comes back only after
//! 65,535 others. Messages written on a failed connection and not
//! acknowledged are remembered (by log offset) and go out again with DUP
//! set; after a restart of Ferry itself that memory is gone and the
//! resent messages go without DUP (DUP is a hint; receivers must not rely
//! on it). QoS 2 ids the remote may hold are released (PUBREL) after a
//! reconnect that finds the session, and the message is sent again: QoS 2
//! is exactly once within a connection, at least once across them.
//!
//! # What is bounded, and by what
//!
//! In flight: the window, `min(max_inflight, the remote's Receive
//! Maximum)`. Encoded and not yet written: two groups of at most
//! `GROUP_BYTES_MAX`. The read buffer: one partial packet of at most
//! `MAX_INBOUND_PACKET_BYTES` plus one read. Commands waiting for the
//! local log: `INBOUND_WINDOW`.

mod config;
mod connection;
mod keep_alive;
mod publish;
mod reader;
mod tls;
mod topic_map;
mod writer;

pub use config::{
    InlinePem, MqttConfigError, MqttEndpointConfig, MqttProtocol, MqttSubscription, RemoteAddress,
};
pub use connection::ConnectionError;

use crate::sink::{Sent, Sink, SinkError};
use bytes::BytesMut;
use connection::{encode, ConnectOptions, Connection, HANDSHAKE_TIMEOUT};
use ferry_broker::endpoint::RoutedMessage;
use ferry_broker::Broker;
use ferry_mqtt::{
    ByteStr, Packet, Properties, PubAck, QoS, ReasonCode, RetainHandling, Subscribe,
    SubscriptionOptions,
};
use publish::Outbound;
use reader::Ack;
pub use reader::Receive;
use reader::{Deliver, Inbound};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use topic_map::{InboundMap, OutboundRewrite};

/// How many bytes of PUBLISHes are encoded before they are handed to the
/// writer as one write: a window of 100 messages of 1 KiB goes in two
/// system calls rather than a hundred, and the two groups the writer may
/// hold cost 128 KiB at most.
const GROUP_BYTES_MAX: usize = 64 * 1024;

/// Offsets remembered as sent on a failed connection (for DUP). Beyond
/// this many, after a long run of failures, the memory is dropped rather
/// than grown: DUP is only a hint.
const UNACKNOWLEDGED_MAX: usize = 65_536;

/// The reason `Sent::rejected` gives for a message the remote refused
/// (an MQTT 5 PUBACK or PUBREC with a reason code of 0x80 or more).
pub const REJECTED_BY_ENDPOINT: &str = "rejected_by_endpoint";

/// An uplink to an MQTT broker; see the module documentation.
pub struct MqttSink {
    options: ConnectOptions,
    /// The reverse direction's filters, subscribed after each CONNACK.
    subscriptions: Vec<(ByteStr, QoS)>,
    qos: QoS,
    /// Where batch envelopes go, when batches go as envelopes.
    envelope: Option<ByteStr>,
    /// Shared with each batch's `Outbound`, which lives beside `&mut self`.
    rewrite: Arc<OutboundRewrite>,
    connection: Option<Connection>,
    /// The last packet id given; ids run on across connections.
    packet_id: u16,
    /// Log offsets of messages written on a failed connection and not
    /// acknowledged: sent again with DUP.
    unacknowledged: HashSet<u64>,
    /// QoS 2 ids written on a failed connection and not completed, which
    /// a persistent session at the remote may still hold.
    unreleased: Vec<u16>,
}

impl std::fmt::Debug for MqttSink {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MqttSink")
            .field("endpoint", &self.options.inbound.endpoint)
            .field("remote", &format_args!("{}:{}", self.options.host, self.options.port))
            .field("connected", &self.connection.is_some())
            .finish_non_exhaustive()
    }
}

/// One message in flight.
#[derive(Debug, Clone, Copy)]
struct Flight {
    /// Its place in the batch.
    index: usize,
    /// Messages it carries from `index` on: more than one in a batch
    /// envelope.
    count: usize,
    /// QoS 2: PUBREC came and PUBREL went; PUBCOMP is next.
    released: bool,
}

impl MqttSink {
    /// The sink of endpoint `endpoint`, configured by `config` (validated
    /// here), whose reverse direction publishes into `local`. TLS files are
    /// read now, so a missing one is a configuration error, not a failure
    /// at every reconnect.
    pub fn new(
        endpoint: &str,
        config: &MqttEndpointConfig,
        local: Arc<Broker>,
    ) -> Result<MqttSink, MqttConfigError> {
        let maps = config
            .subscribe
            .iter()
            .map(|subscription| InboundMap::new(&subscription.remote, &subscription.local))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| MqttConfigError::new("subscribe", "a remote filter cannot be mapped"))?;
        MqttSink::build(endpoint, config, Deliver::Local { broker: local, maps })
    }

    /// A connection named `name` whose subscriptions' messages go to
    /// `receive` rather than into the local broker (their `local` topics
    /// are not used): a twin connection's sources.
    pub fn receiving(
        name: &str,
        config: &MqttEndpointConfig,
        receive: Arc<dyn Receive>,
    ) -> Result<MqttSink, MqttConfigError> {
        MqttSink::build(name, config, Deliver::To(receive))
    }

    fn build(
        endpoint: &str,
        config: &MqttEndpointConfig,
        deliver: Deliver,
    ) -> Result<MqttSink, MqttConfigError> {
        config.validate()?;
        let address = config.address()?;
        let tls = match address.tls {
            true => Some(tls::TlsClient::new(config, &address.host)?),
            false => None,
        };
        let subscriptions = config
            .subscribe
            .iter()
            .map(|subscription| {
                let qos = QoS::from_u8(subscription.qos).unwrap_or(QoS::AtLeastOnce);
                (ByteStr::from(subscription.remote.as_str()), qos)
            })
            .collect();
        let endpoint: Arc<str> = endpoint.into();
        let options = ConnectOptions {
            host: address.host,
            port: address.port,
            tls,
            version: config.protocol_version.version(),
            client_id: config.client_id.clone().unwrap_or_else(|| format!("ferry-{endpoint}")),
            username: config.username.clone(),
            password: config.password.clone(),
            keep_alive_secs: config.keep_alive_secs,
            clean_start: config.clean_start,
            session_expiry_secs: config.session_expiry_secs,
            max_inflight: config.max_inflight,
            inbound: Arc::new(Inbound { deliver, endpoint }),
        };
        Ok(MqttSink {
            options,
            subscriptions,
            qos: config.send_qos(),
            envelope: config.envelope_topic.as_deref().map(ByteStr::from),
            rewrite: Arc::new(OutboundRewrite::new(&config.strip_prefix, &config.remote_prefix)),
            connection: None,
            packet_id: 0,
            unacknowledged: HashSet::new(),
            unreleased: Vec::new(),
        })
    }

    /// The in-flight window of the current connection: `max_inflight`
    /// lowered to the remote's Receive Maximum. `None` while not connected.
    pub fn window(&self) -> Option<usize> {
        let connection = self.connection.as_ref()?;
        let window = self.options.max_inflight.min(connection.limits.receive_maximum);
        Some(usize::from(window))
    }

    /// Resolves, with why, once the current connection has failed; at once
    /// when there is none. For the flow to select on while it has nothing
    /// to send: without a `send`, nothing else would notice that the
    /// reverse direction's commands have stopped coming.
    fn connection_closed(&self) -> impl Future<Output = SinkError> + Send + 'static {
        let closed = self.connection.as_ref().map(Connection::closed);
        async move {
            match closed {
                Some(closed) => closed.await.into(),
                None => SinkError::new("not connected"),
            }
        }
    }

    fn next_packet_id(&mut self, inflight: &HashMap<u16, Flight>) -> u16 {
        // At most `window` ≤ 65,535 ids are in flight, so a free one is
        // found within that many steps.
        loop {
            self.packet_id = self.packet_id.checked_add(1).unwrap_or(1);
            if !inflight.contains_key(&self.packet_id) {
                return self.packet_id;
            }
        }
    }

    /// After CONNACK: QoS 2 ids of the last connection released, if the
    /// remote kept the session, and the reverse direction subscribed.
    async fn resume(&mut self, connection: &mut Connection) -> Result<(), ConnectionError> {
        let version = connection.version;
        let mut wire = BytesMut::new();
        if connection.session_present {
            // Their PUBCOMPs are not waited for: `send` ignores a PUBCOMP
            // it does not expect.
            for packet_id in self.unreleased.drain(..) {
                let release = PubAck::new(packet_id, ReasonCode::Success);
                encode(&Packet::PubRel(release), version, &mut wire)?;
            }
        }
        self.unreleased.clear();
        if self.subscriptions.is_empty() {
            if !wire.is_empty() {
                connection.write(wire.freeze()).await?;
            }
            return Ok(());
        }
        let packet_id = self.next_packet_id(&HashMap::new());
        let filters = self
            .subscriptions
            .iter()
            .map(|(filter, qos)| {
                let options = SubscriptionOptions {
                    qos: *qos,
                    // Retained commands once per subscription, not at
                    // every reconnect of a persistent session (MQTT 5;
                    // a 3.1.1 remote sends them at every SUBSCRIBE).
                    retain_handling: RetainHandling::SendIfNewSubscription,
                    ..SubscriptionOptions::default()
                };
                (filter.clone(), options)
            })
            .collect();
        let subscribe = Subscribe { packet_id, properties: Properties::default(), filters };
        encode(&Packet::Subscribe(subscribe), version, &mut wire)?;
        connection.write(wire.freeze()).await?;
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match connection.next_ack(left).await {
                Err(ConnectionError::Timeout { .. }) => {
                    return Err(ConnectionError::Timeout {
                        what: "SUBACK",
                        seconds: HANDSHAKE_TIMEOUT.as_secs(),
                    })
                }
                Err(error) => return Err(error),
                Ok(Ack::SubAck(suback)) if suback.packet_id == packet_id => {
                    let refused = self
                        .subscriptions
                        .iter()
                        .zip(&suback.reason_codes)
                        .find(|(_, reason)| reason.is_error());
                    if let Some(((filter, _), &reason)) = refused {
                        return Err(ConnectionError::SubscribeRefused {
                            filter: filter.to_string(),
                            reason,
                        });
                    }
                    return Ok(());
                }
                // PUBCOMPs of the releases above.
                Ok(_) => {}
            }
        }
    }

    async fn send_batch(
        &mut self,
        connection: &mut Connection,
        batch: &[RoutedMessage],
        inflight: &mut HashMap<u16, Flight>,
    ) -> Result<Sent, ConnectionError> {
        let limits = connection.limits;
        let window = usize::from(self.options.max_inflight.min(limits.receive_maximum));
        let outbound = Outbound {
            version: connection.version,
            rewrite: self.rewrite.clone(),
            qos: self.qos.min(limits.maximum_qos),
            limits,
        };
        let qos = outbound.qos;
        let mut sent = Sent::default();
        let mut group = BytesMut::with_capacity(GROUP_BYTES_MAX.min(batch.len() * 128));
        let mut next = 0;
        loop {
            let now = Instant::now();
            while next < batch.len() && inflight.len() < window && group.len() < GROUP_BYTES_MAX {
                let routed = &batch[next];
                let packet_id = match qos {
                    QoS::AtMostOnce => 0,
                    _ => self.next_packet_id(inflight),
                };
                let dup = self.unacknowledged.contains(&routed.offset);
                let encoded = match &self.envelope {
                    None => outbound.encode(routed, packet_id, dup, now, &mut group).map(|()| 1),
                    Some(topic) => outbound.encode_envelope(
                        topic,
                        &batch[next..],
                        packet_id,
                        dup,
                        now,
                        &mut group,
                    ),
                };
                match encoded {
                    Ok(count) if qos != QoS::AtMostOnce => {
                        inflight.insert(packet_id, Flight { index: next, count, released: false });
                        next += count;
                    }
                    Ok(count) => next += count,
                    Err(unsendable) => {
                        sent.rejected.push((routed.offset, unsendable.reason()));
                        next += 1;
                    }
                }
            }
            if !group.is_empty() {
                connection.write(group.split().freeze()).await?;
            }
            if inflight.is_empty() && next == batch.len() {
                return Ok(sent);
            }
            if inflight.len() < window && next < batch.len() {
                // The group filled up before the window did.
                continue;
            }
            let mut ack = Some(connection.next_ack(connection.ack_timeout).await?);
            while let Some(this) = ack {
                self.on_ack(this, batch, inflight, &mut sent, &mut group, connection)?;
                ack = connection.try_ack();
            }
        }
    }

    /// Applies one acknowledgement; a PUBREL it calls for goes into
    /// `group`, to leave with the next write.
    fn on_ack(
        &mut self,
        ack: Ack,
        batch: &[RoutedMessage],
        inflight: &mut HashMap<u16, Flight>,
        sent: &mut Sent,
        group: &mut BytesMut,
        connection: &Connection,
    ) -> Result<(), ConnectionError> {
        let unknown = |what: &str, packet_id: u16| {
            ConnectionError::Protocol(format!("{what} for packet id {packet_id}, not in flight"))
        };
        match ack {
            Ack::PubAck(ack) => {
                let flight = inflight
                    .remove(&ack.packet_id)
                    .ok_or_else(|| unknown("PUBACK", ack.packet_id))?;
                self.acknowledged(
                    &batch[flight.index..flight.index + flight.count],
                    ack.reason_code,
                    sent,
                );
            }
            Ack::PubRec(ack) => {
                let flight = inflight
                    .get_mut(&ack.packet_id)
                    .ok_or_else(|| unknown("PUBREC", ack.packet_id))?;
                if ack.reason_code.is_error() {
                    let flight = *flight;
                    inflight.remove(&ack.packet_id);
                    self.acknowledged(
                        &batch[flight.index..flight.index + flight.count],
                        ack.reason_code,
                        sent,
                    );
                } else if !flight.released {
                    flight.released = true;
                    let release = PubAck::new(ack.packet_id, ReasonCode::Success);
                    encode(&Packet::PubRel(release), connection.version, group)?;
                }
            }
            Ack::PubComp(ack) => {
                // One not in flight completes a release of an earlier
                // connection (`resume`).
                if inflight.get(&ack.packet_id).is_some_and(|flight| flight.released) {
                    let flight = inflight.remove(&ack.packet_id).expect("just found");
                    self.acknowledged(
                        &batch[flight.index..flight.index + flight.count],
                        ReasonCode::Success,
                        sent,
                    );
                }
            }
            Ack::SubAck(_) => {}
        }
        Ok(())
    }

    /// The remote answered for `messages` (one PUBLISH: a message, or an
    /// envelope of several).
    fn acknowledged(&mut self, messages: &[RoutedMessage], reason: ReasonCode, sent: &mut Sent) {
        for routed in messages {
            self.unacknowledged.remove(&routed.offset);
            if reason.is_error() {
                sent.rejected.push((routed.offset, REJECTED_BY_ENDPOINT));
            }
        }
    }

    /// Remembers what a failed connection left unacknowledged.
    fn failed(&mut self, batch: &[RoutedMessage], inflight: &HashMap<u16, Flight>, qos: QoS) {
        if self.unacknowledged.len() + inflight.len() > UNACKNOWLEDGED_MAX {
            self.unacknowledged.clear();
        }
        for (&packet_id, flight) in inflight {
            for routed in &batch[flight.index..flight.index + flight.count] {
                self.unacknowledged.insert(routed.offset);
            }
            if qos == QoS::ExactlyOnce {
                self.unreleased.push(packet_id);
            }
        }
    }
}

impl Sink for MqttSink {
    fn closed(&self) -> impl Future<Output = SinkError> + Send + 'static {
        self.connection_closed()
    }

    async fn connect(&mut self) -> Result<(), SinkError> {
        // Dropping the old connection ends its tasks (DISCONNECT first).
        self.connection = None;
        let mut connection = Connection::open(&self.options).await?;
        self.resume(&mut connection).await?;
        if connection.limits.maximum_qos < self.qos {
            tracing::warn!(
                endpoint = %self.options.inbound.endpoint,
                qos = ?self.qos,
                maximum_qos = ?connection.limits.maximum_qos,
                "the remote takes no higher QoS than its Maximum QoS: messages are sent with that"
            );
        }
        self.connection = Some(connection);
        Ok(())
    }

    async fn send(&mut self, batch: &[RoutedMessage]) -> Result<Sent, SinkError> {
        // Taken out for the send: should the flow drop this future half-way
        // (shutting down, say), the connection goes with it, and the acks
        // still coming on it cannot be taken for a later batch's.
        let Some(mut connection) = self.connection.take() else {
            return Err(SinkError::new("not connected"));
        };
        let qos = self.qos.min(connection.limits.maximum_qos);
        let mut inflight =
            HashMap::with_capacity(batch.len().min(usize::from(self.options.max_inflight)));
        match self.send_batch(&mut connection, batch, &mut inflight).await {
            Ok(sent) => {
                self.connection = Some(connection);
                Ok(sent)
            }
            Err(error) => {
                // The connection is dropped here: after an error its state
                // (what is in flight) is unknown.
                self.failed(batch, &inflight, qos);
                Err(error.into())
            }
        }
    }
}
