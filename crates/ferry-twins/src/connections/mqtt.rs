//! A running `mqtt` (or `mqtt-5`) connection. Two forms, by where its
//! `uri` points:
//!
//! - **This Ferry**, with targets only (a loopback host and the port of
//!   one of Ferry's MQTT listeners): twin events are handed to the broker
//!   in the process, as a client's publish would be, to every subscriber
//!   of the topic the target's address makes (`events/{{ thing:id }}`),
//!   the broker's retained store and durable sessions included. No
//!   socket, no credentials.
//! - **Any other broker**, or a connection with sources (even to this
//!   Ferry): a client connection to the broker (`mqtt/remote.rs`), the
//!   MQTT client of the routes' `mqtt` endpoint, which subscribes to the
//!   sources' addresses and applies each message as a Ditto protocol
//!   command, and publishes the targets' events and the replies.
//!
//! What each target sends is decided as for the other connection types
//! (`TargetSpec::outgoing`): its topics, and the READ rights of its
//! `authorizationContext`. A topic a thing's id cannot be part of (it
//! holds `+` or `#`) is counted as failed. A target with an
//! `issuedAcknowledgementLabel` acknowledges each event it published
//! with 204, once the broker has it.

mod remote;

use super::feed::Feed;
use super::live::LiveSignal;
use super::model::{text, ConnectionSpec, Owed};
use super::outgoing::{self, Outgoing};
use super::source::{SourceKind, SourceSpec, MAX_SOURCES};
use super::stats::ConnectionStats;
use super::template::{AddressTemplate, HeaderMapping};
use super::uri::{invalid, UriParts};
use crate::error::DittoError;
use crate::protocol::Envelope;
use crate::service::{ThingEvent, Twins};
use bytes::Bytes;
use ferry_broker::{Broker, Message};
use ferry_mqtt::{ByteStr, Properties, QoS};
use ferry_routes::endpoints::mqtt::{
    InlinePem, MqttEndpointConfig, MqttProtocol, MqttSubscription,
};
use ferry_routes::Secret;
use serde_json::{Map, Value};
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Ditto's default keep-alive of an MQTT connection, in seconds.
const DEFAULT_KEEP_ALIVE_SECS: u16 = 60;

/// An `mqtt` connection's broker, sources and targets, beside their
/// `TargetSpec`s.
#[derive(Debug)]
pub struct MqttSpec {
    pub targets: Vec<MqttTarget>,
    pub sources: Vec<SourceSpec>,
    /// Where the `uri` points.
    pub broker: BrokerAddress,
    /// The client's settings, when it dials: the uri's host, port and
    /// credentials, `specificConfig`'s client id and keep-alive, a
    /// subscription per source address.
    pub client: MqttEndpointConfig,
}

#[derive(Debug)]
pub struct MqttTarget {
    topic: AddressTemplate,
    qos: QoS,
    /// `headerMapping`, as MQTT 5 user properties.
    headers: HeaderMapping,
}

/// The host and port of a connection's `uri`.
#[derive(Debug, PartialEq, Eq)]
pub struct BrokerAddress {
    pub loopback: bool,
    pub port: u16,
}

impl BrokerAddress {
    /// Whether it is one of this Ferry's MQTT listeners, `own_ports`.
    fn is_this_ferry(&self, own_ports: &[u16]) -> bool {
        self.loopback && own_ports.contains(&self.port)
    }
}

impl MqttSpec {
    pub fn parse(
        id: &str,
        object: &Map<String, Value>,
        targets: &[Value],
    ) -> Result<MqttSpec, DittoError> {
        let uri = Uri::parse(text(object, "uri")?)?;
        let specific = match object.get("specificConfig") {
            None => Map::new(),
            Some(Value::Object(specific)) => specific.clone(),
            Some(_) => {
                return Err(DittoError::connection_invalid("'specificConfig' must be an object."))
            }
        };
        // Ditto writes every specificConfig value as a string.
        let setting = |key: &str| match specific.get(key) {
            Some(Value::String(value)) => Some(value.trim().to_owned()),
            Some(other) => Some(other.to_string()),
            None => None,
        };
        let sources = match object.get("sources") {
            None => Vec::new(),
            Some(Value::Array(sources)) if sources.len() <= MAX_SOURCES => sources
                .iter()
                .map(|source| SourceSpec::parse(id, source, SourceKind::Mqtt))
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => {
                return Err(DittoError::connection_invalid(format!(
                    "'sources' must be an array of at most {MAX_SOURCES}."
                )))
            }
        };
        let v5 = text(object, "connectionType")? == "mqtt-5";
        let targets: Vec<MqttTarget> =
            targets.iter().map(|target| MqttTarget::parse(target, v5)).collect::<Result<_, _>>()?;
        let keep_alive_secs = match setting("keepAlive") {
            None => DEFAULT_KEEP_ALIVE_SECS,
            Some(secs) => secs.parse().map_err(|_| {
                DittoError::connection_invalid(format!(
                    "The keepAlive '{secs}' is not a number of seconds (0 to 65535)."
                ))
            })?,
        };
        let clean_start = match setting("cleanSession").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(DittoError::connection_invalid(format!(
                    "The cleanSession '{other}' is not true or false."
                )))
            }
        };
        let tls = super::tls::TlsSettings::parse(object, uri.tls)?;
        let inline_pem = InlinePem { ca: tls.ca, client: tls.client };
        let subscribe = sources
            .iter()
            .flat_map(|source| {
                let qos = u8::from(source.at_least_once);
                source.addresses.iter().map(move |address| MqttSubscription {
                    remote: address.clone(),
                    local: address.clone(),
                    qos,
                })
            })
            .collect();
        let send_qos = targets.iter().map(|target| target.qos as u8).max().unwrap_or(0);
        let client = MqttEndpointConfig {
            url: format!("{}://{}:{}", if uri.tls { "mqtts" } else { "mqtt" }, uri.host, uri.port),
            protocol_version: match text(object, "connectionType")? {
                "mqtt-5" => MqttProtocol::V5,
                _ => MqttProtocol::V311,
            },
            client_id: Some(
                setting("clientId").filter(|id| !id.is_empty()).unwrap_or_else(|| id.to_owned()),
            ),
            username: uri.username,
            password: uri.password.map(Secret::new),
            ca_file: None,
            cert_file: None,
            key_file: None,
            keep_alive_secs,
            clean_start,
            session_expiry_secs: 86_400,
            qos: send_qos,
            max_inflight: 100,
            remote_prefix: String::new(),
            strip_prefix: String::new(),
            envelope_topic: None,
            subscribe,
            inline_pem,
        };
        client.validate().map_err(|error| {
            DittoError::connection_invalid(format!("The MQTT connection: {error}"))
        })?;
        Ok(MqttSpec {
            targets,
            sources,
            broker: BrokerAddress { loopback: uri.loopback, port: uri.port },
            client,
        })
    }
}

impl MqttTarget {
    /// `v5`: an `mqtt-5` connection, whose messages carry user properties.
    fn parse(json: &Value, v5: bool) -> Result<MqttTarget, DittoError> {
        // `TargetSpec::parse` has checked the address is a string.
        let address = json.get("address").and_then(Value::as_str).unwrap_or_default();
        let topic = AddressTemplate::parse(address, "address")?;
        let headers = HeaderMapping::parse(json)?;
        if !v5 && !headers.is_empty() {
            return Err(DittoError::connection_invalid(format!(
                "The headerMapping of target '{address}' needs an mqtt-5 connection: MQTT 3.1.1 has no headers to map to."
            )));
        }
        if address.contains(['+', '#']) || address.is_empty() {
            return Err(DittoError::connection_invalid(format!(
                "The address '{address}' is not an MQTT topic name (no wildcards)."
            )));
        }
        let qos = match json.get("qos") {
            None => QoS::AtMostOnce,
            Some(qos) => {
                qos.as_u64().and_then(|q| QoS::from_u8(u8::try_from(q).ok()?)).ok_or_else(|| {
                    DittoError::connection_invalid(format!(
                        "The qos of target '{address}' is not 0, 1 or 2."
                    ))
                })?
            }
        };
        Ok(MqttTarget { topic, qos, headers })
    }
}

/// `tcp://[user[:password]@]host[:port]` or `ssl://…` (Ditto's MQTT
/// schemes; the port is 1883 or 8883 when left out).
#[derive(Debug, PartialEq, Eq)]
struct Uri {
    tls: bool,
    /// Brackets kept for IPv6, as a URL writes it.
    host: String,
    port: u16,
    loopback: bool,
    username: Option<String>,
    password: Option<String>,
}

impl Uri {
    fn parse(uri: &str) -> Result<Uri, DittoError> {
        let parts = UriParts::split(uri).map_err(|why| invalid(uri, why))?;
        let tls = match parts.scheme {
            "tcp" => false,
            "ssl" => true,
            _ => return Err(invalid(uri, "is not tcp://host:port or ssl://host:port (ws:// and wss:// are not supported by Ferry)")),
        };
        if !matches!(parts.path, "" | "/") {
            return Err(invalid(uri, "has a path; an MQTT broker is host and port"));
        }
        Ok(Uri {
            tls,
            host: parts.url_host(),
            port: parts.port.unwrap_or(if tls { 8883 } else { 1883 }),
            loopback: parts.is_loopback(),
            username: parts.username,
            password: parts.password,
        })
    }
}

/// Starts the connection: the in-process feed when it only publishes on
/// this Ferry (whose MQTT listeners are on `own_ports`), else its client.
/// Aborting the handles stops it.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    broker: Weak<Broker>,
    own_ports: &[u16],
    events: Option<Feed>,
) -> Vec<AbortHandle> {
    let (mut tasks, signals) = super::live::signals(&twins, &spec);
    if mqtt.sources.is_empty() && mqtt.broker.is_this_ferry(own_ports) {
        if let Some(events) = events {
            let publish = feed(
                twins.clone(),
                spec.clone(),
                mqtt.clone(),
                stats.clone(),
                broker.clone(),
                events,
            );
            tasks.push(tokio::spawn(publish).abort_handle());
        }
        tasks.push(tokio::spawn(feed_live(twins, mqtt, stats, broker, signals)).abort_handle());
    } else {
        tasks.extend(remote::start(twins, spec, mqtt, stats, signals, events));
    }
    tasks
}

/// The topic target `index` publishes `envelope` on, counted as
/// dispatched. Without one, what the envelope is owed is answered:
/// - weakly, counted as dropped, when the target's address withholds it
///   (a function of it gives nothing);
/// - with 400, counted as failed and set as the connection's last
///   failure, when its thing id or subject would put a wildcard in it.
fn target_topic(
    twins: &Twins,
    mqtt: &MqttSpec,
    stats: &ConnectionStats,
    index: usize,
    envelope: &Envelope,
    owed: &mut Option<Owed>,
) -> Option<String> {
    let figures = &stats.targets[index];
    figures.dispatched.inc();
    let rendered = mqtt.targets[index].topic.render_raw(envelope);
    let topic = outgoing::unless_withheld(twins, figures, owed, rendered)?;
    if ferry_mqtt::topic::is_valid_topic_name(&topic) {
        return Some(topic);
    }
    figures.failed.inc();
    let failure = format!("'{topic}' is not an MQTT topic name");
    stats.set_failure(failure.clone());
    if let Some(owed) = owed.take() {
        owed.settle(twins, 400, Some(failure.into()));
    }
    None
}

/// The topic a live signal goes on for its target (see [`target_topic`]).
fn live_topic(
    twins: &Twins,
    mqtt: &MqttSpec,
    stats: &ConnectionStats,
    signal: &mut LiveSignal,
) -> Option<String> {
    target_topic(twins, mqtt, stats, signal.target, &signal.envelope, &mut signal.owed)
}

/// Publishes the live signals of a connection to this Ferry.
async fn feed_live(
    twins: Arc<Twins>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    broker: Weak<Broker>,
    mut signals: mpsc::Receiver<LiveSignal>,
) {
    while let Some(mut signal) = signals.recv().await {
        let Some(broker) = broker.upgrade() else { return };
        let Some(topic) = live_topic(&twins, &mqtt, &stats, &mut signal) else { continue };
        let LiveSignal { target, envelope, owed } = signal;
        broker.publish(target_message(&mqtt, target, topic, &envelope, mqtt.targets[target].qos));
        stats.targets[target].published.inc();
        stats.set_success();
        if let Some(owed) = owed {
            owed.settle(&twins, 204, None);
        }
    }
}

async fn feed(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    broker: Weak<Broker>,
    mut events: Feed,
) {
    // An event is settled once published: its ticket goes at the end of
    // each turn.
    while let Some((event, _ticket)) = events.next(&stats, &spec.id).await {
        let Some(broker) = broker.upgrade() else { return };
        for publication in publications(&twins, &spec, &mqtt, &stats, &event).await {
            let qos = mqtt.targets[publication.target].qos;
            let message = target_message(
                &mqtt,
                publication.target,
                publication.topic,
                &publication.envelope,
                qos,
            );
            broker.publish(message);
            stats.targets[publication.target].published.inc();
            stats.set_success();
            if let Some(owed) = publication.owed {
                owed.settle(&twins, 204, None);
            }
        }
    }
}

/// What one target publishes of an event.
struct Publication {
    /// Its index among the connection's targets.
    target: usize,
    topic: String,
    envelope: Envelope,
    /// The acknowledgement it owes, once published.
    owed: Option<Owed>,
}

/// What the targets publish of `event`, each counted as dispatched or
/// filtered; a target without a topic for it answers its acknowledgement
/// as [`target_topic`] says.
async fn publications(
    twins: &Twins,
    spec: &ConnectionSpec,
    mqtt: &MqttSpec,
    stats: &ConnectionStats,
    event: &ThingEvent,
) -> Vec<Publication> {
    let mut publications = Vec::new();
    for Outgoing { target, envelope, mut owed } in
        outgoing::of_event(twins, spec, stats, event).await
    {
        if let Some(topic) = target_topic(twins, mqtt, stats, target, &envelope, &mut owed) {
            publications.push(Publication { target, topic, envelope, owed });
        }
    }
    publications
}

/// The message that carries a Ditto protocol envelope on `topic`.
fn message(topic: String, envelope: &Envelope, qos: QoS) -> Message {
    with_properties(topic, envelope, qos, Vec::new())
}

/// The message target `index` publishes `envelope` with: its
/// `headerMapping` filled in as MQTT 5 user properties.
fn target_message(
    mqtt: &MqttSpec,
    index: usize,
    topic: String,
    envelope: &Envelope,
    qos: QoS,
) -> Message {
    let user_properties = mqtt.targets[index].headers.for_signal(envelope);
    with_properties(topic, envelope, qos, user_properties)
}

fn with_properties(
    topic: String,
    envelope: &Envelope,
    qos: QoS,
    user_properties: Vec<(String, String)>,
) -> Message {
    let mut properties = Properties::default();
    properties.content_type = Some(ByteStr::from(crate::protocol::DITTO_CONTENT_TYPE));
    properties.user_properties = user_properties
        .into_iter()
        .map(|(name, value)| (ByteStr::from(name), ByteStr::from(value)))
        .collect();
    let payload = Bytes::from(envelope.to_bytes());
    Message::new(ByteStr::from(topic), payload, qos, false, properties, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_gives_scheme_host_port_and_credentials() {
        let uri = Uri::parse("tcp://ditto:p%40ss@127.0.0.1:1884").unwrap();
        assert_eq!(
            uri,
            Uri {
                tls: false,
                host: "127.0.0.1".into(),
                port: 1884,
                loopback: true,
                username: Some("ditto".into()),
                password: Some("p@ss".into()),
            }
        );
        let uri = Uri::parse("ssl://broker.example.com").unwrap();
        assert_eq!((uri.tls, uri.port, uri.loopback), (true, 8883, false));
        let uri = Uri::parse("tcp://[::1]:1883").unwrap();
        assert_eq!((uri.host.as_str(), uri.port, uri.loopback), ("[::1]", 1883, true));
        assert!(Uri::parse("tcp://localhost").unwrap().loopback);
        for bad in ["http://127.0.0.1:1883", "tcp://", "tcp://host:port", "ws://h:80", "tcp://h/x"]
        {
            assert!(Uri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_loopback_address_on_an_own_port_is_this_ferry() {
        let own = BrokerAddress { loopback: true, port: 1883 };
        assert!(own.is_this_ferry(&[1883, 8883]));
        assert!(!own.is_this_ferry(&[1884]), "another broker on this host");
        assert!(!BrokerAddress { loopback: false, port: 1883 }.is_this_ferry(&[1883]));
    }
}
