//! The protocol state of one connected client and the handling of every
//! packet it sends. I/O stays in `connection.rs`; this file turns packets
//! into broker operations and responses appended to the write buffer.

use crate::answer::Answer;
use crate::authenticate::admitted;
use crate::backpressure::{self, Pace};
use crate::broker::{publish_reason, Broker, Routed};
use crate::close::Close;
use crate::config::BrokerConfig;
use crate::connection_info::ConnectionInfo;
use crate::durable::record::{Record, StoredSubscription};
use crate::durable::Store;
use crate::encode_publish::{encode_publish, PublishShape};
use crate::envelope;
use crate::held::{self, HeldPublish};
use crate::listener::Refusal;
use crate::message::Message;
use crate::origin::Origin;
use crate::publish_limits::{Over, PublishLimits, MEMORY_PAUSE};
use crate::service::{ServiceReply, ServiceRequest};
use crate::session::{Inflight, Reply, Session};
use crate::stats::AuthMethod;
use crate::will::PendingWill;
use bytes::BytesMut;
use ferry_auth::Principal;
use ferry_auth::SubscribeVerdict;
use ferry_mqtt::{
    topic, ByteStr, ConnAck, Connect, Packet, Properties, PropertyValues, ProtocolVersion, PubAck,
    Publish, QoS, ReasonCode, SubAck, Subscribe, UnsubAck, Unsubscribe,
};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Topic aliases of one connection. A fixed hasher rather than a random
/// one saves 16 bytes in every client; the tables hold at most the
/// configured alias maximum (64 by default), too few entries for crafted
/// collisions to cost anything.
type AliasMap<K, V> = HashMap<K, V, BuildHasherDefault<DefaultHasher>>;

/// Both directions' topic aliases, boxed together and made on first use:
/// most clients never use one, and two empty tables inline cost every
/// idle connection 64 bytes. Kept with the client's other `Particulars`.
#[derive(Default)]
struct Aliases {
    /// Topic aliases the client set toward us.
    inbound: AliasMap<u16, ByteStr>,
    /// Topic aliases we set toward the client, at most `outbound_alias_max`.
    outbound: AliasMap<ByteStr, u16>,
}

/// A client after a successful CONNECT.
pub(crate) struct Client {
    pub version: ProtocolVersion,
    pub session: Arc<Session>,
    generation: u64,
    will: Option<PendingWill>,
    /// Outbound in-flight window: min(client's receive maximum, our cap).
    send_window: u16,
    /// The client's maximum packet size; larger messages are not sent to it.
    max_outgoing_packet_bytes: u32,
    outbound_alias_max: u16,
    /// What a v5 client's Request Problem Information asked for.
    problem_information: ProblemInformation,
    /// A Mosquitto-style bridge (`Connect::bridge`): its subscriptions are
    /// No Local and Retain As Published.
    bridge: bool,
    /// Whether input is paused, or taking a turn, because a subscriber is
    /// congested.
    pace: Pace,
    /// Answers this connection put in line in the session's replies and has
    /// not sent yet. While there are any, every answer joins the line.
    replies_held: u32,
    /// Offsets of stored deliveries that ended and are not recorded yet.
    delivered: Vec<u64>,
    /// Some of them are QoS 2 deliveries whose packet ids wait for that
    /// record (`Inflight::Ending`).
    ending: bool,
    /// Who authentication proved the client to be; `None` for an
    /// anonymous client, whose principal is its client id alone (and is
    /// then made only when an ACL asks, to keep idle clients small).
    /// Who the client proved to be and its publish limits: `None` for an
    /// anonymous client of a broker without limits, most of them.
    particulars: Option<Box<Particulars>>,
    /// What the admin API sees of this connection; its counters are this
    /// connection's own.
    pub info: Arc<ConnectionInfo>,
}

/// What a publish is answered with once routed (or stored).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Acknowledge {
    /// Nothing: QoS 0, or a message of a batch envelope (the envelope is
    /// answered as a whole).
    No,
    PubAck,
    PubRec,
}

/// What only some clients carry, boxed together so that the others pay
/// one pointer for all.
#[derive(Default)]
struct Particulars {
    aliases: Option<Box<Aliases>>,
    /// `None` for an anonymous client, whose principal is its client id
    /// alone (made only when an ACL asks).
    principal: Option<Arc<Principal>>,
    /// Publish rate and bandwidth limits, when configured, and a pause.
    limits: Option<PublishLimits>,
}

/// A client attached to its session, its CONNACK not sent yet: that waits
/// for the session's record, when one was made (`Attached::stored`).
struct Accepted {
    client: Client,
    connack: Packet,
    stored: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// Deliveries read back from the durable log at a time when the queue of
/// a session with messages there runs dry.
const LOAD_CHUNK: usize = 256;

/// Source of assigned client identifiers: unique within the process, and
/// the prefix keeps them apart from ids clients choose themselves.
static NEXT_ASSIGNED_ID: AtomicU64 = AtomicU64::new(1);

/// What a v5 client's Request Problem Information asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProblemInformation {
    /// 0: no reason strings.
    Refused,
    /// Absent (1 by default): reason strings on acknowledgements.
    Default,
    /// Present and 1: on the broker's DISCONNECT too.
    Asked,
}

fn reason_string(explanation: Option<String>) -> Properties {
    PropertyValues { reason_string: explanation.map(ByteStr::from), ..PropertyValues::default() }
        .into()
}

impl Client {
    /// Reads the CONNECT, attaches the session and appends the CONNACK.
    pub(crate) async fn accept<R: AsyncRead + Unpin>(
        broker: &Arc<Broker>,
        origin: &Origin,
        reader: &mut R,
        rbuf: &mut BytesMut,
        wbuf: &mut BytesMut,
    ) -> Result<Client, Close> {
        let packet = loop {
            // The protocol version is unknown until CONNECT is decoded, and
            // CONNECT decodes whatever version is passed.
            match Packet::decode(rbuf, ProtocolVersion::V5, broker.config.max_packet_size_bytes) {
                Ok(Some(packet)) => break packet,
                Ok(None) => {}
                Err(error) => {
                    // A CONNECT whose fault is answered (`Connect::decode`
                    // decides which, and in which version's format).
                    if let Some((reason_code, format)) = error.connack() {
                        let properties = Properties::default();
                        let connack = ConnAck { session_present: false, reason_code, properties };
                        let _ = Packet::ConnAck(connack).encode(format, wbuf);
                    }
                    return Err(Close::Malformed(error));
                }
            }
            rbuf.reserve(256);
            match reader.read_buf(rbuf).await {
                Ok(0) if !rbuf.is_empty() => return Err(Close::Truncated(rbuf.len())),
                Ok(0) => return Err(Close::PeerClosed),
                Ok(read) => broker.stats.bytes_received.add(read as u64),
                Err(_) => return Err(Close::Io),
            }
        };
        let Packet::Connect(connect) = packet else {
            return Err(Close::protocol(
                ReasonCode::ProtocolError,
                format!("first packet is {:?}, not CONNECT", packet.packet_type()),
            ));
        };
        broker.stats.messages_received.inc();
        let refused = |reason, explanation: &str, wbuf: &mut BytesMut| {
            broker.stats.clients_refused.inc();
            origin.listener.count_refusal(Refusal::Connack);
            let refused = Packet::ConnAck(ConnAck {
                session_present: false,
                reason_code: reason,
                properties: Properties::default(),
            });
            let _ = refused.encode(connect.protocol, wbuf);
            let user = connect.username.as_ref().map_or("", |name| name.as_str());
            Err(Close::protocol(reason, format!("{explanation} (user {user:?})")))
        };
        // Ferry implements no authentication method (no AUTH exchange), and
        // a server that does not support the client's must close the
        // connection [MQTT-4.12.0-1]. CONNACK 0x8C says why first, as
        // Mosquitto does; no credentials are checked for a CONNECT that
        // cannot succeed.
        if let Some(method) = &connect.properties.authentication_method {
            let explanation =
                format!("authentication method {:?} is not supported", method.as_str());
            broker.stats.authentication_failure(AuthMethod::Enhanced).inc();
            return refused(ReasonCode::BadAuthenticationMethod, &explanation, wbuf);
        }
        let verdict =
            broker.authentication.verdict(origin.listener.auth, origin.credentials(&connect)).await;
        let identity = match admitted(verdict) {
            Ok(identity) => identity,
            Err((reason, explanation)) => {
                let credentials = origin.credentials(&connect);
                let method = broker.authentication.method(origin.listener.auth, &credentials);
                broker.stats.authentication_failure(method.into()).inc();
                return refused(reason, explanation, wbuf);
            }
        };
        let valid_until = identity.valid_until;
        let principal = match origin.principal(&connect, identity) {
            Ok(principal) => principal,
            Err(explanation) => {
                return refused(ReasonCode::ClientIdentifierNotValid, explanation, wbuf)
            }
        };
        if let Some(will) = &connect.will {
            if !broker.authorization.may_publish(&principal, &will.topic) {
                broker.stats.acl_denied.inc();
                broker.shed_log.refused(
                    &principal.client_id,
                    "will denied by the ACL",
                    &will.topic,
                );
                return refused(ReasonCode::NotAuthorized, "the will's topic is not allowed", wbuf);
            }
        }
        // (An empty id is assigned a new one: no session to take over.)
        if !principal.client_id.is_empty() {
            broker.settle_previous(&principal.client_id).await;
        }
        // What the connect line says of the user: the proven name, else the
        // one the CONNECT claimed (never its password).
        let user = principal
            .username
            .clone()
            .or_else(|| connect.username.as_ref().map(|name| Arc::from(name.as_str())));
        let Accepted { client, connack, stored } =
            Client::connect(broker, origin, *connect, principal, valid_until, wbuf)?;
        if let Some(stored) = stored {
            // Answered even when the store fails (the session then lasts
            // until a restart, and that is logged): never left hanging.
            let _ = stored.await;
        }
        if !client.encode(&connack, wbuf) {
            // The client could not read it: as Mosquitto, close instead.
            let limit = client.max_outgoing_packet_bytes;
            let explanation =
                format!("CONNACK does not fit the client's Maximum Packet Size ({limit} bytes)");
            client.finish(broker, Close::protocol(ReasonCode::PacketTooLarge, explanation.clone()));
            return Err(Close::protocol(ReasonCode::PacketTooLarge, explanation));
        }
        tracing::info!(
            client_id = %client.session.client_id,
            user = user.as_deref().unwrap_or(""),
            peer = %origin.peer,
            protocol = client.version.name(),
            listener = %origin.listener.name,
            "client connected"
        );
        Ok(client)
    }

    /// `valid_until`: Unix seconds at which the client's credentials
    /// expire (a JWT's), and it is disconnected.
    fn connect(
        broker: &Arc<Broker>,
        origin: &Origin,
        connect: Connect,
        mut principal: Principal,
        valid_until: Option<u64>,
        wbuf: &mut BytesMut,
    ) -> Result<Accepted, Close> {
        let config = &broker.config;
        let version = connect.protocol;
        let v5 = version.is_v5();
        let mut connack_properties = Properties::default();

        let id_refusal = match version {
            // 3.1 §3.1 asks for 1 to 23 characters, but Mosquitto (and so
            // the 3.1 devices in the field) refuses only the empty id.
            ProtocolVersion::V31 if principal.client_id.is_empty() => {
                Some("empty client id in an MQTT 3.1 CONNECT")
            }
            // 3.1.1 §3.1.3-8: an empty id needs Clean Session 1.
            ProtocolVersion::V311 if principal.client_id.is_empty() && !connect.clean_start => {
                Some("empty client id with clean session 0")
            }
            _ => None,
        };
        if let Some(explanation) = id_refusal {
            let refusal = Packet::ConnAck(ConnAck {
                session_present: false,
                reason_code: ReasonCode::ClientIdentifierNotValid,
                properties: Properties::default(),
            });
            let _ = refusal.encode(version, wbuf);
            return Err(Close::protocol(ReasonCode::ClientIdentifierNotValid, explanation));
        }
        if principal.client_id.is_empty() {
            principal.client_id =
                format!("ferry-{:016x}", NEXT_ASSIGNED_ID.fetch_add(1, Ordering::Relaxed)).into();
        }
        if v5 && connect.client_id.is_empty() {
            connack_properties.assigned_client_identifier =
                Some(ByteStr::from(&*principal.client_id));
        }
        let client_id = principal.client_id.clone();

        let keep_alive_secs =
            if connect.keep_alive == 0 || connect.keep_alive > config.max_keep_alive_secs {
                if config.max_keep_alive_secs == u16::MAX && connect.keep_alive == 0 {
                    0
                } else {
                    config.max_keep_alive_secs
                }
            } else {
                connect.keep_alive
            };
        if v5 && keep_alive_secs != connect.keep_alive {
            connack_properties.server_keep_alive = Some(keep_alive_secs);
        }

        let requested_expiry = if v5 {
            connect.properties.session_expiry_interval.unwrap_or(0)
        } else if connect.clean_start {
            0
        } else {
            u32::MAX
        };
        let expiry_secs = requested_expiry.min(config.max_session_expiry_secs);
        if v5 && expiry_secs != requested_expiry {
            connack_properties.session_expiry_interval = Some(expiry_secs);
        }

        let attached = broker.attach(&client_id, connect.clean_start, expiry_secs);
        let keep_alive =
            (keep_alive_secs > 0).then(|| Duration::from_millis(u64::from(keep_alive_secs) * 1500));
        let now_ms = broker.now_ms();
        // On the broker's clock: the wall clock is read once, here.
        let credentials_end_ms = valid_until.map(|secs| {
            now_ms.saturating_add(secs.saturating_mul(1000).saturating_sub(crate::clock::unix_ms()))
        });
        attached.session.liveness.arm(now_ms, keep_alive, credentials_end_ms);
        let will = connect.will.map(|will| PendingWill::from_connect(will, attached.session.id));
        let particulars = Particulars::of(principal, config);
        let info = Arc::new(ConnectionInfo::new(
            origin.peer,
            origin.listener.clone(),
            particulars.as_ref().and_then(|particulars| particulars.principal.clone()),
            version,
            keep_alive_secs,
            connect.clean_start,
        ));

        if v5 {
            connack_properties.receive_maximum = Some(config.receive_maximum);
            connack_properties.maximum_packet_size = Some(config.max_packet_size_bytes);
            connack_properties.topic_alias_maximum = Some(config.topic_alias_maximum);
            if !config.retain_available {
                connack_properties.retain_available = Some(0);
            }
        }
        let client = Client {
            version,
            generation: attached.generation,
            session: attached.session,
            will,
            send_window: connect
                .properties
                .receive_maximum
                .unwrap_or(u16::MAX)
                .min(config.max_inflight_messages),
            max_outgoing_packet_bytes: connect.properties.maximum_packet_size.unwrap_or(u32::MAX),
            outbound_alias_max: connect
                .properties
                .topic_alias_maximum
                .unwrap_or(0)
                .min(config.outbound_topic_alias_maximum),
            problem_information: match connect.properties.request_problem_information {
                Some(0) => ProblemInformation::Refused,
                Some(_) => ProblemInformation::Asked,
                None => ProblemInformation::Default,
            },
            bridge: connect.bridge,
            pace: Pace::Free,
            replies_held: 0,
            delivered: Vec::new(),
            ending: false,
            particulars,
            info,
        };
        if attached.session_present && broker.authorization.is_active() {
            broker.recheck_subscriptions(&client.session, &client.shared_principal());
        }
        if attached.session_present {
            broker.renew_viewers(&client.session, &client.shared_principal());
        }
        let connack = Packet::ConnAck(ConnAck {
            session_present: attached.session_present,
            reason_code: ReasonCode::Success,
            properties: connack_properties,
        });
        Ok(Accepted { client, connack, stored: attached.stored })
    }

    /// Appends `packet` for the client, within its Maximum Packet Size
    /// [MQTT-3.1.2-24]: without the reason string and user properties if
    /// that is what it takes, not at all if even that is too large.
    /// Returns whether it went out.
    pub(crate) fn encode(&self, packet: &Packet, wbuf: &mut BytesMut) -> bool {
        let limit = self.max_outgoing_packet_bytes as usize;
        let fitted;
        let unlimited = self.max_outgoing_packet_bytes == u32::MAX;
        let packet = if unlimited || packet.encoded_len(self.version) <= limit {
            packet
        } else {
            let mut smaller = packet.clone();
            smaller.drop_diagnostics();
            if smaller.encoded_len(self.version) > limit {
                tracing::debug!(client_id = %self.session.client_id, limit, "{:?} not sent: larger than the client's Maximum Packet Size", packet.packet_type());
                return false;
            }
            fitted = smaller;
            &fitted
        };
        if let Err(error) = packet.encode(self.version, wbuf) {
            tracing::error!(client_id = %self.session.client_id, %error, "failed to encode {:?}", packet.packet_type());
            return false;
        }
        true
    }

    /// Reason string properties for an error answer, unless the client
    /// asked for none.
    pub(crate) fn problem_properties(&self, explanation: Option<String>) -> Properties {
        let wanted = self.problem_information != ProblemInformation::Refused;
        reason_string(explanation.filter(|_| wanted))
    }

    /// The properties of the broker's DISCONNECT. For a malformed packet or
    /// a protocol error, a reason string only for a client that asked for
    /// problem information outright: others get the reason code alone, as
    /// from Mosquitto, whose test suite compares the bytes (the why is in
    /// the broker's log line). Every other reason (a takeover, a keep-alive
    /// timeout, an administrator) keeps its reason string: paho-mqtt 2.1
    /// reads a DISCONNECT's reason code only when properties follow it, and
    /// would report a bare takeover as a normal disconnection.
    pub(crate) fn disconnect_properties(&self, close: &Close) -> Properties {
        let wanted = match close.reason_code() {
            Some(ReasonCode::MalformedPacket | ReasonCode::ProtocolError) => {
                self.problem_information == ProblemInformation::Asked
            }
            _ => self.problem_information != ProblemInformation::Refused,
        };
        reason_string(close.explanation().filter(|_| wanted))
    }

    /// Applies one packet from the client.
    pub(crate) fn handle(
        &mut self,
        broker: &Arc<Broker>,
        packet: Packet,
        wbuf: &mut BytesMut,
    ) -> Result<(), Close> {
        match packet {
            Packet::Publish(publish) => self.on_publish(broker, publish, wbuf),
            Packet::PubAck(ack) => self.on_puback(broker, ack),
            Packet::PubRec(rec) => self.on_pubrec(broker, rec, wbuf),
            Packet::PubRel(rel) => {
                self.on_pubrel(broker, rel, wbuf);
                Ok(())
            }
            Packet::PubComp(comp) => self.on_pubcomp(broker, comp),
            Packet::Subscribe(subscribe) => {
                self.on_subscribe(broker, subscribe, wbuf);
                Ok(())
            }
            Packet::Unsubscribe(unsubscribe) => {
                self.on_unsubscribe(broker, unsubscribe, wbuf);
                Ok(())
            }
            Packet::PingReq => {
                self.encode(&Packet::PingResp, wbuf);
                Ok(())
            }
            Packet::Disconnect(disconnect) => {
                if let Some(expiry) = disconnect.properties.session_expiry_interval {
                    let mut state = self.session.lock();
                    // §3.14.2.2.2: a session created with expiry 0 cannot be given one now.
                    if state.expiry_secs == 0 && expiry != 0 {
                        return Err(Close::protocol(
                            ReasonCode::ProtocolError,
                            "session expiry set on DISCONNECT after 0 on CONNECT",
                        ));
                    }
                    let expiry = expiry.min(broker.config.max_session_expiry_secs);
                    let changed = state.expiry_secs != expiry;
                    state.expiry_secs = expiry;
                    drop(state);
                    // Set to 0 the session ends when the connection does,
                    // which records that.
                    if changed && expiry > 0 {
                        // Nothing to answer: the connection is closing.
                        drop(broker.persist_expiry(&self.session, expiry));
                    }
                }
                Err(Close::Disconnected {
                    publish_will: disconnect.reason_code == ReasonCode::DisconnectWithWillMessage,
                })
            }
            Packet::Connect(_) => {
                Err(Close::protocol(ReasonCode::ProtocolError, "second CONNECT on a connection"))
            }
            Packet::Auth(_) => Err(Close::protocol(
                ReasonCode::BadAuthenticationMethod,
                "extended authentication is not supported",
            )),
            other => Err(Close::protocol(
                ReasonCode::ProtocolError,
                format!("{:?} is only sent by servers", other.packet_type()),
            )),
        }
    }

    fn on_publish(
        &mut self,
        broker: &Arc<Broker>,
        mut publish: Publish,
        wbuf: &mut BytesMut,
    ) -> Result<(), Close> {
        broker.stats.publishes_received.at(publish.qos).inc();
        broker.stats.payload_bytes_received.at(publish.qos).add(publish.payload.len() as u64);
        ConnectionInfo::add(&self.info.messages_in, 1);
        if !publish.properties.subscription_identifiers.is_empty() {
            // [MQTT-3.3.4-6]: only the server's PUBLISH names subscriptions.
            return Err(Close::protocol(
                ReasonCode::ProtocolError,
                "a client's PUBLISH carries a Subscription Identifier",
            ));
        }
        if let Some(alias) = publish.properties.topic_alias {
            if alias == 0 || alias > broker.config.topic_alias_maximum {
                return Err(Close::protocol(
                    ReasonCode::TopicAliasInvalid,
                    format!("topic alias {alias} out of range"),
                ));
            }
            if publish.topic.is_empty() {
                match self.aliases().and_then(|aliases| aliases.inbound.get(&alias)) {
                    Some(topic) => publish.topic = topic.clone(),
                    None => {
                        return Err(Close::protocol(
                            ReasonCode::ProtocolError,
                            format!("unknown topic alias {alias}"),
                        ))
                    }
                }
            } else {
                Particulars::aliases(&mut self.particulars)
                    .inbound
                    .insert(alias, publish.topic.clone());
            }
        }
        if publish.retain && !broker.config.retain_available {
            return Err(Close::protocol(
                ReasonCode::RetainNotSupported,
                "retained messages are disabled",
            ));
        }
        if let Some(refused) = self.admit_publish(broker, &publish)? {
            return self.refuse_publish(&publish, refused, wbuf);
        }
        if self.version.is_v5() && envelope::is_envelope(&publish) {
            return self.on_envelope(broker, publish, wbuf);
        }
        let packet_id = publish.packet_id;
        match publish.qos {
            QoS::AtMostOnce => {
                self.publish(broker, publish, Acknowledge::No);
            }
            QoS::AtLeastOnce => {
                if let Some(reason) = self.publish(broker, publish, Acknowledge::PubAck) {
                    self.acknowledge(Packet::PubAck(PubAck::new(packet_id, reason)), wbuf)?;
                }
            }
            QoS::ExactlyOnce => {
                let first_time = {
                    let mut state = self.session.lock();
                    if state.holds_inbound(packet_id) {
                        false
                    } else if state.inbound_held() >= usize::from(broker.config.receive_maximum) {
                        return Err(Close::protocol(
                            ReasonCode::ReceiveMaximumExceeded,
                            format!(
                                "more than {} QoS 2 publishes awaiting release",
                                broker.config.receive_maximum
                            ),
                        ));
                    } else {
                        state.hold_inbound(packet_id);
                        true
                    }
                };
                // A retransmission of a QoS 2 PUBLISH we already took must
                // not be routed again: that is what makes it exactly once.
                if first_time {
                    if let Some(reason) = self.publish(broker, publish, Acknowledge::PubRec) {
                        self.acknowledge(Packet::PubRec(PubAck::new(packet_id, reason)), wbuf)?;
                    }
                } else {
                    self.acknowledge_retransmission(broker, packet_id, wbuf);
                }
            }
        }
        Ok(())
    }

    /// PUBREC for a QoS 2 PUBLISH sent again. The original may have come
    /// on a connection that has since gone, its record still on the way to
    /// the disk and its PUBREC dropped with that connection. Answered at
    /// once, a crash before that record is stored would lose the message:
    /// the client, holding PUBREC, would only send PUBREL. So a persistent
    /// session's answer follows a record of the packet id, which the log
    /// stores after the original's.
    fn acknowledge_retransmission(&mut self, broker: &Broker, packet_id: u16, wbuf: &mut BytesMut) {
        let pubrec = Packet::PubRec(PubAck::new(packet_id, ReasonCode::Success));
        match broker.store_for(&self.session) {
            Some(store) => {
                let record = Record::InboundReceived { session: self.session.id, packet_id };
                self.reply_when_stored(broker, store, record, pubrec);
            }
            None => self.reply(pubrec, wbuf),
        }
    }

    /// A batch envelope (`envelope.rs`, from another Ferry's uplink): each
    /// of its messages is checked and published as if sent alone, at the
    /// envelope's QoS, and the envelope is acknowledged once all of them
    /// are stored. A malformed envelope, or one with a message this client
    /// may not publish, is refused whole. QoS 2 envelopes are not taken:
    /// an uplink sends at QoS 1.
    fn on_envelope(
        &mut self,
        broker: &Arc<Broker>,
        envelope: Publish,
        wbuf: &mut BytesMut,
    ) -> Result<(), Close> {
        let client_id = self.session.client_id.clone();
        if envelope.qos == QoS::ExactlyOnce {
            broker.shed_log.refused(&client_id, "a batch envelope at QoS 2", &envelope.topic);
            return self.refuse_publish(&envelope, ReasonCode::ImplementationSpecificError, wbuf);
        }
        let messages = match envelope::unpack(&envelope.payload) {
            Ok(messages) => messages,
            Err(error) => {
                broker.shed_log.refused(
                    &client_id,
                    &format!("a malformed batch envelope: {error}"),
                    &envelope.topic,
                );
                return self.refuse_publish(&envelope, ReasonCode::PayloadFormatInvalid, wbuf);
            }
        };
        for message in &messages {
            if let Some(refused) = self.admit_publish(broker, message)? {
                return self.refuse_publish(&envelope, refused, wbuf);
            }
        }
        let (mut storing, mut refused) = (false, None);
        for mut message in messages {
            message.qos = envelope.qos;
            match self.publish(broker, message, Acknowledge::No) {
                None => storing = true,
                Some(reason) if reason.is_error() => refused = Some(reason),
                Some(_) => {}
            }
        }
        if envelope.qos == QoS::AtMostOnce {
            return Ok(());
        }
        let puback =
            Packet::PubAck(PubAck::new(envelope.packet_id, refused.unwrap_or(ReasonCode::Success)));
        match broker.store.as_ref().filter(|_| storing && refused.is_none()) {
            // After its messages' records: the log answers in order.
            Some(store) => self.reply_when_stored(broker, store, Record::Barrier, puback),
            None => self.reply(puback, wbuf),
        }
        Ok(())
    }

    /// Checks a PUBLISH against the topic limits, the ACL, the client's
    /// rate limits and the memory watermark. Returns the reason to refuse
    /// it with, if it is refused; a 3.1.1 client over a limit that MQTT
    /// 3.1.1 cannot express is closed (topic limits) or paused (rates).
    fn admit_publish(
        &mut self,
        broker: &Broker,
        publish: &Publish,
    ) -> Result<Option<ReasonCode>, Close> {
        let config = &broker.config;
        let client_id = &*self.session.client_id;
        if let Err(problem) = check_topic_limits(config, &publish.topic) {
            broker.stats.publishes_limited.inc();
            broker.shed_log.refused(client_id, "PUBLISH beyond the topic limits", &publish.topic);
            if !self.version.is_v5() {
                return Err(Close::protocol(ReasonCode::TopicNameInvalid, problem));
            }
            return Ok(Some(ReasonCode::TopicNameInvalid));
        }
        // `$SYS` is the broker's own (§4.7.2): a client writing there could
        // fake its figures for everyone who reads them. Mosquitto refuses
        // the same way, whatever its ACL says.
        if publish.topic.starts_with(topic::SYS_PREFIX) {
            broker.stats.acl_denied.inc();
            broker.shed_log.refused(
                client_id,
                "PUBLISH to $SYS, which only the broker writes",
                &publish.topic,
            );
            return Ok(Some(ReasonCode::NotAuthorized));
        }
        // The flag first: without an ACL not even an anonymous principal
        // is made, on the path of every message.
        if broker.authorization.is_active()
            && !self.with_principal(|principal| {
                broker.authorization.may_publish(principal, &publish.topic)
            })
        {
            broker.stats.acl_denied.inc();
            broker.shed_log.refused(client_id, "PUBLISH denied by the ACL", &publish.topic);
            return Ok(Some(ReasonCode::NotAuthorized));
        }
        let now = Instant::now();
        if broker.memory_high.load(Ordering::Relaxed) {
            let particulars = self.particulars.get_or_insert_with(Box::default);
            let limits = particulars.limits.get_or_insert_with(|| PublishLimits::new(config, now));
            limits.pause_until(now + MEMORY_PAUSE);
        }
        let Some(limits) = self.particulars.as_mut().and_then(|p| p.limits.as_mut()) else {
            return Ok(None);
        };
        let bytes = publish.topic.len() + publish.payload.len();
        if !self.version.is_v5() || publish.qos == QoS::AtMostOnce {
            if limits.charge(bytes, now) {
                broker.stats.publishers_throttled.inc();
                broker.shed_log.publisher_limited(&self.session.client_id, "slowed");
            }
            return Ok(None);
        }
        // MQTT 5's 0x96 (Message rate too high) is for DISCONNECT only;
        // an acknowledgement says 0x97 for either limit.
        let (reason, what) = match limits.admit(bytes, now) {
            None => return Ok(None),
            Some(Over::Rate) => (ReasonCode::QuotaExceeded, "max_publish_rate"),
            Some(Over::Bandwidth) => (ReasonCode::QuotaExceeded, "max_publish_bytes_rate"),
        };
        broker.stats.publishes_limited.inc();
        broker.shed_log.publisher_limited(&self.session.client_id, what);
        Ok(Some(reason))
    }

    /// Answers a refused PUBLISH: a v5 client's QoS 1/2 message gets the
    /// reason; a QoS 0 message, and any 3.1.1 one (which has no negative
    /// acknowledgement: MQTT 3.1.1 §3.3.5), is acknowledged as usual and
    /// dropped.
    fn refuse_publish(
        &mut self,
        publish: &Publish,
        reason: ReasonCode,
        wbuf: &mut BytesMut,
    ) -> Result<(), Close> {
        let reason = if self.version.is_v5() { reason } else { ReasonCode::Success };
        let ack = PubAck::new(publish.packet_id, reason);
        // A 3.1.1 PUBREL for an id we hold no state for is answered with
        // PUBCOMP all the same, so a dropped QoS 2 message needs none.
        match publish.qos {
            QoS::AtMostOnce => Ok(()),
            QoS::AtLeastOnce => self.acknowledge(Packet::PubAck(ack), wbuf),
            QoS::ExactlyOnce => self.acknowledge(Packet::PubRec(ack), wbuf),
        }
    }

    /// Checks a filter against the subscription limits and the ACL. On
    /// success, gives the principal whose read permission each message
    /// must be checked against, when the ACL grants only part of the
    /// filter.
    fn admit_subscription(
        &self,
        broker: &Broker,
        filter: &str,
    ) -> Result<Option<Arc<Principal>>, ReasonCode> {
        let config = &broker.config;
        let refused = |what, reason| {
            broker.stats.subscriptions_refused.inc();
            broker.shed_log.refused(&self.session.client_id, what, filter);
            Err(reason)
        };
        if check_topic_limits(config, filter).is_err() {
            return refused("SUBSCRIBE beyond the topic limits", ReasonCode::TopicFilterInvalid);
        }
        if wildcard_depth(filter).is_some_and(|depth| depth < config.min_wildcard_depth) {
            return refused("SUBSCRIBE above min_wildcard_depth", ReasonCode::NotAuthorized);
        }
        let subscriptions = self.session.lock().subscriptions.len();
        if subscriptions >= config.max_subscriptions_per_client {
            return refused(
                "SUBSCRIBE beyond max_subscriptions_per_client",
                ReasonCode::QuotaExceeded,
            );
        }
        match self.with_principal(|principal| broker.authorization.may_subscribe(principal, filter))
        {
            SubscribeVerdict::Allowed => Ok(None),
            SubscribeVerdict::Filtered => Ok(Some(self.shared_principal())),
            SubscribeVerdict::Denied => {
                broker.stats.acl_denied.inc();
                broker.shed_log.refused(
                    &self.session.client_id,
                    "SUBSCRIBE denied by the ACL",
                    filter,
                );
                Err(ReasonCode::NotAuthorized)
            }
        }
    }

    fn shared_principal(&self) -> Arc<Principal> {
        match self.particulars.as_ref().and_then(|particulars| particulars.principal.as_ref()) {
            Some(principal) => principal.clone(),
            None => Arc::new(Principal {
                client_id: self.session.client_id.clone(),
                ..Principal::default()
            }),
        }
    }

    /// Runs `check` with the client's principal: the proven one, or, for
    /// an anonymous client, one of its client id alone.
    fn with_principal<R>(&self, check: impl FnOnce(&Principal) -> R) -> R {
        match self.particulars.as_ref().and_then(|particulars| particulars.principal.as_ref()) {
            Some(principal) => check(principal),
            None => check(&Principal {
                client_id: self.session.client_id.clone(),
                ..Principal::default()
            }),
        }
    }

    /// The instant input may resume, if the client is paused by its
    /// publish limits or the memory watermark, or the next try of a held
    /// publish.
    pub(crate) fn paused_until(&mut self) -> Option<Instant> {
        if let Pace::Held(held) = &self.pace {
            return Some(held.next_try);
        }
        self.particulars.as_mut()?.limits.as_mut()?.paused_until(Instant::now())
    }

    /// Routes a client's message and returns the reason code to answer it
    /// with, or `None` if it is being stored first (its answer then waits
    /// in line) or held for a full endpoint (answered when it is retried).
    /// Pauses this client's input if a subscriber's queue is congested, if
    /// its turn at one is over, or while the message is held.
    fn publish(
        &mut self,
        broker: &Broker,
        publish: Publish,
        acknowledge: Acknowledge,
    ) -> Option<ReasonCode> {
        let packet_id = publish.packet_id;
        let message = Arc::new(Message::from_publish(publish, self.session.id));
        self.route(broker, message, acknowledge, packet_id, None)
    }

    /// `publish` for a message already made: first sent, or held and
    /// tried again before `held_until_ms`.
    fn route(
        &mut self,
        broker: &Broker,
        message: Arc<Message>,
        acknowledge: Acknowledge,
        packet_id: u16,
        held_until_ms: Option<u64>,
    ) -> Option<ReasonCode> {
        let answer = (acknowledge != Acknowledge::No).then(|| Answer {
            session: self.session.clone(),
            generation: self.generation,
            packet_id,
            exactly_once: acknowledge == Acknowledge::PubRec,
            relay: crate::relay::here(),
        });
        let acknowledged = answer.is_some();
        if let Some(service) = broker.services.for_topic(&message.topic) {
            if let Some(answer) = &answer {
                self.session.lock().hold_reply(answer.generation, Reply::Waiting);
                self.replies_held += 1;
            }
            let principal = self.shared_principal();
            service.take(ServiceRequest { message, principal, reply: ServiceReply::new(answer) });
            return None;
        }
        let username = self
            .particulars
            .as_ref()
            .and_then(|particulars| particulars.principal.as_ref())
            .and_then(|principal| principal.username.as_deref());
        let routed = broker.publish_from(message, &self.session, username, answer);
        let (congested, reason) = match routed {
            Routed::Now(published) => {
                (published.congested, Some(publish_reason(published.delivered)))
            }
            Routed::Storing { congested, .. } => {
                self.replies_held += u32::from(acknowledged);
                (congested, None)
            }
            Routed::Refused(reason) => return Some(reason),
            Routed::Held { message, timeout } => {
                self.hold(broker, message, acknowledge, packet_id, held_until_ms, timeout);
                return None;
            }
        };
        if let Some(target) = congested {
            self.block(broker, target);
        } else if let Pace::Turn { target, left } = &mut self.pace {
            *left -= 1;
            if *left == 0 {
                let target = target.clone();
                self.end_turn(broker, target);
            }
        }
        reason
    }

    /// Pauses input with `message` unanswered until a full endpoint it is
    /// routed to has room. A QoS 2 packet id is let go meanwhile: if the
    /// connection ends while it waits, the client's resend on its next one
    /// must be taken as new, since nothing of it was stored.
    fn hold(
        &mut self,
        broker: &Broker,
        message: Arc<Message>,
        acknowledge: Acknowledge,
        packet_id: u16,
        held_until_ms: Option<u64>,
        timeout: Duration,
    ) {
        let now_ms = broker.now_ms();
        let exactly_once = acknowledge == Acknowledge::PubRec;
        if exactly_once {
            self.session.lock().release_inbound(packet_id);
        }
        let deadline_ms = held_until_ms.unwrap_or_else(|| {
            broker.stats.held_endpoint_full.inc();
            broker.shed_log.refused(
                &self.session.client_id,
                &format!(
                    "PUBLISH held for up to {timeout:?}: a route endpoint holds its max_bytes"
                ),
                &message.topic,
            );
            now_ms.saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
        });
        self.pace = Pace::Held(Box::new(HeldPublish {
            message,
            packet_id,
            exactly_once,
            deadline_ms,
            next_try: Instant::now() + held::RETRY_PERIOD,
        }));
    }

    /// Tries a held publish again once its retry time has come: it goes
    /// through if its endpoints have room, and is refused (0x97; the
    /// connection closed for 3.1.1) once its deadline has passed.
    pub(crate) fn retry_held(&mut self, broker: &Broker, wbuf: &mut BytesMut) -> Result<(), Close> {
        match &self.pace {
            Pace::Held(held) if Instant::now() >= held.next_try => {}
            _ => return Ok(()),
        }
        let now_ms = broker.now_ms();
        let Pace::Held(held) = std::mem::take(&mut self.pace) else { return Ok(()) };
        // The client is waiting on us, not silent.
        self.session.liveness.touch(now_ms);
        let HeldPublish { message, packet_id, exactly_once, deadline_ms, .. } = *held;
        let acknowledge = if exactly_once { Acknowledge::PubRec } else { Acknowledge::PubAck };
        let reason = if now_ms >= deadline_ms {
            broker.stats.refused_endpoint_full.inc();
            broker.shed_log.refused(
                &self.session.client_id,
                "PUBLISH refused: a route endpoint held its max_bytes past block_timeout",
                &message.topic,
            );
            Some(ReasonCode::QuotaExceeded)
        } else {
            if exactly_once {
                self.session.lock().hold_inbound(packet_id);
            }
            self.route(broker, message, acknowledge, packet_id, Some(deadline_ms))
        };
        let Some(reason) = reason else { return Ok(()) };
        let ack = PubAck::new(packet_id, reason);
        self.acknowledge(if exactly_once { Packet::PubRec(ack) } else { Packet::PubAck(ack) }, wbuf)
    }

    /// Sends an answer to the client, behind those still waiting for the
    /// durable log if there are any.
    fn reply(&mut self, packet: Packet, wbuf: &mut BytesMut) {
        if self.replies_held == 0 {
            self.encode(&packet, wbuf);
        } else {
            self.session.lock().hold_reply(self.generation, Reply::Ready(packet));
            self.replies_held += 1;
        }
    }

    /// Answers a PUBLISH: a reply, unless it is a refusal a 3.1.1 client
    /// cannot be told of, which closes the connection.
    fn acknowledge(&mut self, ack: Packet, wbuf: &mut BytesMut) -> Result<(), Close> {
        if self.replies_held == 0 {
            if let Some(refusal) = self.refusal_without_reason_codes(&ack) {
                return Err(refusal);
            }
        }
        self.reply(ack, wbuf);
        Ok(())
    }

    /// Appends `record` and sends `packet` once it is stored. If it cannot
    /// be, the answer goes anyway (the change holds until a restart) and
    /// the failure is logged and counted.
    fn reply_when_stored(
        &mut self,
        broker: &Broker,
        store: &Store,
        record: Record,
        packet: Packet,
    ) {
        self.session.lock().hold_reply(self.generation, Reply::Waiting);
        self.replies_held += 1;
        let session = self.session.clone();
        let generation = self.generation;
        let failures = broker.me();
        store.append(record, move |result| {
            if let Err(error) = result {
                if let Some(broker) = failures.upgrade() {
                    broker.stats.store_failures.inc();
                }
                tracing::warn!(client_id = %session.client_id, %error, "session change not stored; it holds until a restart");
            }
            session.fill_reply(generation, packet);
        });
    }

    fn block(&mut self, broker: &Broker, target: Arc<Session>) {
        let since_ms = broker.now_ms().max(1);
        self.session.liveness.set_blocked_since(since_ms);
        self.pace = Pace::Blocked { target };
    }

    /// After a turn: waits again, at the back, if `target` is still above
    /// the low watermark; goes on freely if it caught up.
    fn end_turn(&mut self, broker: &Broker, target: Arc<Session>) {
        let low = backpressure::low_watermark(broker.config.online_queue());
        let congested = {
            let mut state = target.lock();
            let congested =
                state.backlog() > low && !state.stalled && !state.ended && target.is_online();
            if congested {
                state.add_waiter(&self.session);
            }
            congested
        };
        if congested {
            self.block(broker, target);
        } else {
            self.pace = Pace::Free;
        }
    }

    /// True while the client's input is paused for back-pressure.
    /// Nothing of this client waits on the connection's task: no input
    /// waiting for a congested subscriber or a full endpoint, no answer in
    /// line, no delivery whose end is unrecorded. It may park.
    pub(crate) fn is_quiet(&self) -> bool {
        matches!(self.pace, Pace::Free | Pace::Turn { .. })
            && self.replies_held == 0
            && self.delivered.is_empty()
    }

    pub(crate) fn is_blocked(&self) -> bool {
        matches!(self.pace, Pace::Blocked { .. } | Pace::Held(_))
    }

    /// Resumes input once the congested subscriber released us (our turn),
    /// went away, or kept us waiting too long (it is then marked stalled).
    pub(crate) fn check_blocked(&mut self, broker: &Broker) {
        let Pace::Blocked { target } = &self.pace else { return };
        let since_ms = self.session.liveness.blocked_since_ms();
        let waited_too_long =
            broker.now_ms().saturating_sub(since_ms) >= backpressure::MAX_WAIT.as_millis() as u64;
        let target = target.clone();
        let released = {
            let mut state = target.lock();
            let gone = state.ended || !target.is_online();
            let released = !state.is_waiting(self.session.id);
            if !gone && !released {
                if !waited_too_long {
                    // Woken for another reason: still in the line.
                    return;
                }
                state.stalled = true;
                state.stop_waiting(self.session.id);
                tracing::info!(
                    client_id = %target.client_id,
                    "subscriber not draining its queue for {:?}; publishers stop waiting for it",
                    backpressure::MAX_WAIT
                );
            }
            released && !gone
        };
        self.session.liveness.set_blocked_since(0);
        self.pace =
            if released { Pace::Turn { target, left: backpressure::TURN } } else { Pace::Free };
    }

    /// PUBACK: the QoS 1 delivery is over. An acknowledgement of another
    /// kind than the delivery's QoS asks for (here and in `on_pubrec`,
    /// `on_pubcomp`) is a protocol error, as with Mosquitto: taking it would
    /// end a delivery the client never received as it should, and the
    /// message would be lost; closing keeps it for the next connection.
    fn on_puback(&mut self, broker: &Broker, ack: PubAck) -> Result<(), Close> {
        let mut state = self.session.lock();
        let Some(index) = state.inflight_position(ack.packet_id) else { return Ok(()) };
        match &state.inflight[index] {
            Inflight::Publish { delivery, .. } if delivery.qos == QoS::AtLeastOnce => {}
            _ => return Err(wrong_acknowledgement("PUBACK", ack.packet_id)),
        }
        if let Some(Inflight::Publish { delivery, .. }) = state.inflight.remove(index) {
            drop(state);
            self.delivery_over(broker, delivery.offset);
        }
        Ok(())
    }

    fn on_pubrec(
        &mut self,
        broker: &Broker,
        rec: PubAck,
        wbuf: &mut BytesMut,
    ) -> Result<(), Close> {
        let (reason, offset) = {
            let mut state = self.session.lock();
            match state.inflight_position(rec.packet_id) {
                Some(index)
                    if matches!(&state.inflight[index], Inflight::Publish { delivery, .. }
                        if delivery.qos != QoS::ExactlyOnce) =>
                {
                    return Err(wrong_acknowledgement("PUBREC", rec.packet_id));
                }
                Some(index) if rec.reason_code.is_error() => {
                    if let Some(Inflight::Publish { delivery, .. }) = state.inflight.remove(index) {
                        drop(state);
                        self.delivery_over(broker, delivery.offset);
                    }
                    return Ok(());
                }
                Some(index) => {
                    let offset = match &state.inflight[index] {
                        Inflight::Publish { delivery, .. } => delivery.offset,
                        Inflight::Release { offset, .. } => *offset,
                        Inflight::Ending { offset, .. } => Some(*offset),
                    };
                    state.inflight[index] = Inflight::Release { packet_id: rec.packet_id, offset };
                    (ReasonCode::Success, offset)
                }
                // A failed PUBREC ends its exchange (§4.3.3): nothing to
                // release, known or not.
                None if rec.reason_code.is_error() => return Ok(()),
                None => (ReasonCode::PacketIdentifierNotFound, None),
            }
        };
        let pubrel = Packet::PubRel(PubAck::new(rec.packet_id, reason));
        // Once PUBREL is out the client may forget the packet id, so a
        // restart must not send the PUBLISH again: the log hears of the
        // PUBREC first.
        match (offset, broker.store_for(&self.session)) {
            (Some(offset), Some(store)) => {
                let record = Record::Released {
                    session: self.session.id,
                    offset: offset.get(),
                    packet_id: rec.packet_id,
                };
                self.reply_when_stored(broker, store, record, pubrel);
            }
            _ => self.reply(pubrel, wbuf),
        }
        Ok(())
    }

    /// PUBCOMP: the QoS 2 delivery is over. A stored one is recorded with
    /// the others of this turn, and its packet id is not used again until
    /// that record is stored (`Inflight::Ending`); a PUBCOMP sent again
    /// meanwhile changes nothing.
    fn on_pubcomp(&mut self, broker: &Broker, comp: PubAck) -> Result<(), Close> {
        let stored = broker.store_for(&self.session).is_some();
        let mut state = self.session.lock();
        let Some(index) = state.inflight_position(comp.packet_id) else { return Ok(()) };
        let offset = match &state.inflight[index] {
            Inflight::Release { offset, .. } => *offset,
            Inflight::Ending { .. } => return Ok(()),
            Inflight::Publish { .. } => {
                return Err(wrong_acknowledgement("PUBCOMP", comp.packet_id))
            }
        };
        match offset {
            Some(offset) if stored => {
                state.end_release(index, offset);
                drop(state);
                self.delivered.push(offset.get());
                self.ending = true;
            }
            _ => {
                state.inflight.remove(index);
                drop(state);
                self.delivery_over(broker, offset);
            }
        }
        Ok(())
    }

    fn on_pubrel(&mut self, broker: &Broker, rel: PubAck, wbuf: &mut BytesMut) {
        let known = self.session.lock().release_inbound(rel.packet_id);
        let reason = if known { ReasonCode::Success } else { ReasonCode::PacketIdentifierNotFound };
        let pubcomp = Packet::PubComp(PubAck::new(rel.packet_id, reason));
        // After PUBCOMP the client may use the id for a new message, which
        // a restart must not take for a retransmission of this one.
        match broker.store_for(&self.session).filter(|_| known) {
            Some(store) => {
                let record =
                    Record::InboundReleased { session: self.session.id, packet_id: rel.packet_id };
                self.reply_when_stored(broker, store, record, pubcomp);
            }
            None => self.reply(pubcomp, wbuf),
        }
    }

    fn on_subscribe(
        &mut self,
        broker: &Arc<Broker>,
        mut subscribe: Subscribe,
        wbuf: &mut BytesMut,
    ) {
        if self.bridge {
            // As Mosquitto does for a bridge: the other broker does not get
            // its own messages back, nor lose their retained flags. Not for
            // a shared subscription, where No Local is a protocol error.
            for (filter, options) in &mut subscribe.filters {
                if !topic::is_shared_filter(filter) {
                    options.no_local = true;
                    options.retain_as_published = true;
                }
            }
        }
        let identifier = subscribe.properties.subscription_identifiers.first().copied();
        let reason_codes: Vec<ReasonCode> = subscribe
            .filters
            .iter()
            .map(|(filter, options)| match self.admit_subscription(broker, filter) {
                Ok(reader) => {
                    let viewer =
                        broker.services.may_signal(filter).then(|| self.shared_principal());
                    let granted = broker.subscribe(
                        &self.session,
                        filter,
                        *options,
                        identifier,
                        reader,
                        viewer.clone(),
                    );
                    if let Some(viewer) = viewer.filter(|_| !granted.is_error()) {
                        broker.services.subscribed(filter, &viewer);
                    }
                    granted
                }
                Err(reason) => reason,
            })
            .collect();
        let refused: Vec<&str> = subscribe
            .filters
            .iter()
            .zip(&reason_codes)
            .filter(|(_, reason)| reason.is_error())
            .map(|((filter, _), _)| filter.as_str())
            .collect();
        let explanation = (!refused.is_empty())
            .then(|| format!("subscribing to {} is not allowed", refused.join(", ")));
        let properties = if self.version.is_v5() {
            self.problem_properties(explanation)
        } else {
            Properties::default()
        };
        let granted: Vec<StoredSubscription> = subscribe
            .filters
            .iter()
            .zip(&reason_codes)
            .filter(|(_, reason)| !reason.is_error())
            .map(|((filter, options), _)| StoredSubscription {
                filter: filter.to_string(),
                options: *options,
                identifier,
            })
            .collect();
        let suback =
            Packet::SubAck(SubAck { packet_id: subscribe.packet_id, properties, reason_codes });
        match broker.store_for(&self.session).filter(|_| !granted.is_empty()) {
            Some(store) => {
                let record =
                    Record::Subscribed { session: self.session.id, subscriptions: granted };
                self.reply_when_stored(broker, store, record, suback);
            }
            None => self.reply(suback, wbuf),
        }
    }

    fn on_unsubscribe(
        &mut self,
        broker: &Arc<Broker>,
        unsubscribe: Unsubscribe,
        wbuf: &mut BytesMut,
    ) {
        let reason_codes = unsubscribe
            .filters
            .iter()
            .map(|filter| {
                if broker.unsubscribe(&self.session, filter) {
                    ReasonCode::Success
                } else {
                    ReasonCode::NoSubscriptionExisted
                }
            })
            .collect();
        let unsuback = Packet::UnsubAck(UnsubAck {
            packet_id: unsubscribe.packet_id,
            properties: Properties::default(),
            reason_codes,
        });
        match broker.store_for(&self.session) {
            Some(store) => {
                let filters = unsubscribe.filters.iter().map(ToString::to_string).collect();
                let record = Record::Unsubscribed { session: self.session.id, filters };
                self.reply_when_stored(broker, store, record, unsuback);
            }
            None => self.reply(unsuback, wbuf),
        }
    }

    /// Retransmits what the previous connection of this session left
    /// unacknowledged: PUBLISH with DUP set, or PUBREL (§4.4).
    pub(crate) fn resend_inflight(
        &self,
        broker: &Broker,
        wbuf: &mut BytesMut,
    ) -> Result<(), Close> {
        let now = Instant::now();
        let state = self.session.lock();
        if state.ended || state.generation != self.generation {
            return Err(Close::TakenOver);
        }
        for entry in &state.inflight {
            match entry {
                Inflight::Publish { packet_id, delivery } => {
                    let shape = PublishShape {
                        version: self.version,
                        qos: delivery.qos,
                        retain: delivery.retain,
                        dup: true,
                        packet_id: *packet_id,
                        subscription_ids: &delivery.subscription_ids,
                        topic_alias: None,
                    };
                    encode_publish(&delivery.message, &shape, now, wbuf);
                    broker.stats.count_sent(delivery.qos, delivery.message.payload.len());
                }
                Inflight::Release { packet_id, .. } => {
                    self.encode(
                        &Packet::PubRel(PubAck::new(*packet_id, ReasonCode::Success)),
                        wbuf,
                    );
                }
                // Completed by the client: nothing to resend.
                Inflight::Ending { .. } => {}
            }
        }
        Ok(())
    }

    /// Moves queued deliveries into the write buffer while the client's
    /// in-flight window and our write buffer have room.
    pub(crate) fn drain(&mut self, broker: &Broker, wbuf: &mut BytesMut) -> Result<(), Close> {
        let now = Instant::now();
        let write_cap = broker.config.write_buffer_bytes;
        if broker.is_shutting_down() {
            return Err(Close::ServerShuttingDown);
        }
        if self.session.liveness.is_expired() {
            return Err(Close::KeepAliveTimeout);
        }
        if self.session.liveness.credentials_expired() {
            return Err(Close::CredentialsExpired);
        }
        let mut state = self.session.lock();
        if let Some(reason) = state.close_requested(self.generation) {
            return Err(Close::Administrative(reason.to_owned()));
        }
        if state.ended || state.generation != self.generation {
            return Err(Close::TakenOver);
        }
        while self.replies_held > 0 {
            let Some(packet) = state.take_ready_reply() else { break };
            self.replies_held -= 1;
            if let Some(refusal) = self.refusal_without_reason_codes(&packet) {
                return Err(refusal);
            }
            self.encode(&packet, wbuf);
        }
        while wbuf.len() < write_cap {
            if state.queue.is_empty() && !state.on_disk.is_empty() {
                // Enough to fill the window and the write buffer a few
                // times over, not the whole backlog.
                broker.load_from_disk(&self.session, &mut state, LOAD_CHUNK);
            }
            let Some(front) = state.queue.front() else { break };
            // A QoS 0 message behind a blocked QoS 1 message waits too, so
            // the client sees messages in the order they were published.
            if front.qos != QoS::AtMostOnce && state.in_window() >= usize::from(self.send_window) {
                break;
            }
            // An id chosen when the message was stored may still be in
            // flight (after 65,535 others, or after a restart, which starts
            // the count again while older deliveries still hold ids), or
            // waiting for its end to be stored: wait for it like a full
            // window.
            let chosen = front.packet_id;
            if chosen != 0 && state.inflight.iter().any(|entry| entry.packet_id() == chosen) {
                break;
            }
            let Some(delivery) = state.pop_queued() else { break };
            if delivery.message.is_expired(now) {
                broker.stats.dropped_expired.inc();
                delivery_over(&mut self.delivered, broker, &self.session, delivery.offset);
                continue;
            }
            let packet_id = match delivery.qos {
                QoS::AtMostOnce => 0,
                _ if chosen != 0 => chosen,
                _ => state.next_packet_id(),
            };
            let alias = self.outbound_alias(&delivery.message.topic);
            let shape = PublishShape {
                version: self.version,
                qos: delivery.qos,
                retain: delivery.retain,
                dup: delivery.restored,
                packet_id,
                subscription_ids: &delivery.subscription_ids,
                topic_alias: alias,
            };
            let start = wbuf.len();
            let written = encode_publish(&delivery.message, &shape, now, wbuf);
            if written == 0 || written > self.max_outgoing_packet_bytes as usize {
                // §3.1.2.11.4: a packet over the client's maximum is
                // discarded as if it had been delivered.
                wbuf.truncate(start);
                broker.stats.dropped_too_large.inc();
                delivery_over(&mut self.delivered, broker, &self.session, delivery.offset);
                continue;
            }
            if let Some((alias, true)) = alias {
                Particulars::aliases(&mut self.particulars)
                    .outbound
                    .insert(delivery.message.topic.clone(), alias);
            }
            broker.stats.count_sent(delivery.qos, delivery.message.payload.len());
            broker
                .stats
                .delivery_latency
                .observe(now.saturating_duration_since(delivery.message.received_at));
            broker.stats.messages_sent.inc();
            ConnectionInfo::add(&self.info.messages_out, 1);
            if delivery.qos != QoS::AtMostOnce {
                let delivery = Box::new(delivery);
                state.inflight.push_back(Inflight::Publish { packet_id, delivery });
            }
        }
        let max_queued = broker.config.online_queue();
        if state.backlog() <= backpressure::low_watermark(max_queued) {
            state.stalled = false;
            state.release_turns(backpressure::turns_per_release(max_queued));
        }
        Ok(())
    }

    /// A 3.1.1 acknowledgement cannot say a publish was refused: the
    /// connection is closed instead, so the client sends it again later.
    fn refusal_without_reason_codes(&self, packet: &Packet) -> Option<Close> {
        let (Packet::PubAck(ack) | Packet::PubRec(ack)) = packet else { return None };
        (!self.version.is_v5() && ack.reason_code.is_error())
            .then(|| Close::protocol(ack.reason_code, "a message could not be stored"))
    }

    /// The alias to use for `topic`: an existing one, a new one while the
    /// client's maximum allows (sent with the topic once), or none.
    fn aliases(&self) -> Option<&Aliases> {
        self.particulars.as_ref()?.aliases.as_deref()
    }

    fn outbound_alias(&self, topic: &ByteStr) -> Option<(u16, bool)> {
        if self.outbound_alias_max == 0 {
            return None;
        }
        let outbound = self.aliases().map(|aliases| &aliases.outbound);
        if let Some(alias) = outbound.and_then(|outbound| outbound.get(topic)) {
            return Some((*alias, false));
        }
        let next = u16::try_from(outbound.map_or(0, HashMap::len) + 1).ok()?;
        (next <= self.outbound_alias_max).then_some((next, true))
    }

    /// A stored delivery to this client is over (acknowledged, expired or
    /// discarded): recorded with the others that end in the same turn of
    /// the connection's loop, in one record.
    fn delivery_over(&mut self, broker: &Broker, offset: Option<NonZeroU64>) {
        delivery_over(&mut self.delivered, broker, &self.session, offset);
    }

    /// Records the deliveries that ended since the last call. Until then a
    /// crash only sends them again, which QoS 1 allows and QoS 2 survives:
    /// its PUBREL is what is resent, and the client answers PUBCOMP, as
    /// long as the packet id was not used for another message meanwhile,
    /// which is why the ids of QoS 2 deliveries that ended wait for this
    /// record (`Inflight::Ending`). The record takes its place in the
    /// log's next group commit; nothing waits for it but those ids.
    pub(crate) fn record_delivered(&mut self, broker: &Broker) {
        let ending = std::mem::take(&mut self.ending);
        if self.delivered.is_empty() {
            return;
        }
        let record = Record::delivered(self.session.id, std::mem::take(&mut self.delivered));
        let Record::Delivered { offsets, .. } = &record else { unreachable!() };
        match broker.store_for(&self.session) {
            Some(store) if ending => {
                let ended = offsets.clone();
                let session = self.session.clone();
                store.append(record, move |result| {
                    if let Err(error) = result {
                        tracing::warn!(client_id = %session.client_id, %error, "end of a delivery not stored; a restart may resend its PUBREL");
                    }
                    session.ends_stored(&ended);
                });
            }
            Some(store) => store.note(record),
            // No longer persistent: nothing to wait for.
            None if ending => self.session.ends_stored(offsets),
            None => {}
        }
    }

    /// Hands the session back to the broker after the connection closed.
    /// Ends the connection's part: the session is detached (or was taken
    /// over), and a connection waiting to take it over may go on.
    pub(crate) fn finish(self, broker: &Arc<Broker>, close: Close) {
        let session = self.session.clone();
        session.detach_connection(&self.info);
        self.end(broker, close);
        session.settled();
    }

    fn end(mut self, broker: &Arc<Broker>, close: Close) {
        self.record_delivered(broker);
        let will = self.will.filter(|_| close.publishes_will());
        if let Close::TakenOver = close {
            // The new connection replaced the session (so it ended and the
            // will is due now) or resumed it: then v5 sends an undelayed
            // will (§3.1.4) and cancels a delayed one (§3.1.3.2.2), while
            // 3.1.1 names no takeover among the will's occasions, and
            // Mosquitto sends none.
            if let Some(will) = will {
                let ended = self.session.lock().ended;
                if ended || (self.version.is_v5() && will.delay_secs == 0) {
                    broker.publish(*will.message);
                }
            }
            return;
        }
        broker.detach(&self.session, self.generation, will);
    }
}

/// Puts a stored delivery that ended in `delivered`, to be recorded with
/// the others of the same turn (a free function so that `Client::drain`
/// can call it while it holds the session's lock).
fn delivery_over(
    delivered: &mut Vec<u64>,
    broker: &Broker,
    session: &Session,
    offset: Option<NonZeroU64>,
) {
    if let Some(offset) = offset.filter(|_| broker.store_for(session).is_some()) {
        delivered.push(offset.get());
    }
}

impl Particulars {
    /// The client's topic aliases, made now if it had none (a field
    /// apart from the client, whose session may be locked meanwhile).
    fn aliases(particulars: &mut Option<Box<Particulars>>) -> &mut Aliases {
        let particulars = particulars.get_or_insert_with(Box::default);
        particulars.aliases.get_or_insert_with(Box::default)
    }

    fn of(principal: Principal, config: &BrokerConfig) -> Option<Box<Particulars>> {
        let proven = principal.username.is_some()
            || principal.certificate.is_some()
            || !principal.groups.is_empty();
        let particulars = Particulars {
            aliases: None,
            principal: proven.then(|| Arc::new(principal)),
            limits: PublishLimits::from_config(config, Instant::now()),
        };
        (particulars.principal.is_some() || particulars.limits.is_some())
            .then(|| Box::new(particulars))
    }
}

/// Whether a topic name or filter is within the configured length and
/// depth; the problem for the log if not.
fn check_topic_limits(config: &BrokerConfig, topic: &str) -> Result<(), String> {
    if topic.len() > config.max_topic_bytes {
        return Err(format!(
            "topic of {} bytes; max_topic_bytes is {}",
            topic.len(),
            config.max_topic_bytes
        ));
    }
    // A topic of n bytes has at most n + 1 levels: most need no count.
    if topic.len() < config.max_topic_levels {
        return Ok(());
    }
    let levels = topic.bytes().filter(|&byte| byte == b'/').count() + 1;
    if levels > config.max_topic_levels {
        return Err(format!(
            "topic of {levels} levels; max_topic_levels is {}",
            config.max_topic_levels
        ));
    }
    Ok(())
}

/// The close for an acknowledgement that does not fit its delivery's
/// exchange: PUBACK for QoS 2, PUBREC for QoS 1, PUBCOMP before PUBREC.
fn wrong_acknowledgement(kind: &str, packet_id: u16) -> Close {
    Close::protocol(
        ReasonCode::ProtocolError,
        format!("{kind} for packet id {packet_id}, whose delivery expects another acknowledgement"),
    )
}

/// How many levels a filter has before its first wildcard (`$share/group/`
/// aside); `None` for a filter without wildcards.
fn wildcard_depth(filter: &str) -> Option<usize> {
    let filter = topic::split_shared(filter).map_or(filter, |(_, filter)| filter);
    filter.split('/').position(|level| level == "+" || level == "#")
}
