//! A connection as Ditto's connectivity API writes it, checked and read
//! into what Ferry runs. The JSON is kept as given (with its `id`), so a
//! retrieve returns what was stored, fields Ferry does not use included.
//!
//! Ferry runs `http-push` connections with targets on twin events
//! (`_/_/things/twin/events`, with `filter`, `namespaces` and
//! `extraFields`), and `kafka` connections with such targets and with
//! sources of Ditto protocol commands (`kafka/spec.rs`). Other connection
//! types and topics are refused with Ditto's configuration error naming
//! what is not supported yet, rather than accepted and silently idle.

#[cfg(feature = "kafka")]
use super::kafka::KafkaSpec;
use super::source::SourceSpec;
use super::template::{AddressTemplate, HeaderMapping};
use super::uri::{invalid, UriParts};
use crate::error::DittoError;
use crate::live::Kind;
use crate::service::{Caller, ThingEvent, Twins};
use crate::ws::events::EventOptions;
use base64::Engine;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Requests one connection may have on its way at once (its
/// `specificConfig.parallelism`): each is one kept-alive HTTP connection
/// to the receiver.
pub const MAX_PARALLELISM: usize = 64;

/// Targets of one connection: each filters every twin event.
pub const MAX_TARGETS: usize = 32;

/// A checked connection.
#[derive(Debug)]
pub struct ConnectionSpec {
    pub id: String,
    /// `connectionStatus`: whether it should run.
    pub open: bool,
    /// What each target selects; where it sends is the transport's.
    pub targets: Vec<TargetSpec>,
    pub transport: Transport,
    /// The labels its sources declared (`declaredAcks`), each once: the
    /// acknowledgements its devices send back through a source.
    pub source_acks: Vec<String>,
    /// The connection as given, with its id: what a retrieve returns.
    pub json: Value,
}

/// What a connection talks to, by its `connectionType`.
#[derive(Debug)]
pub enum Transport {
    HttpPush(Arc<HttpPush>),
    Mqtt(Arc<super::mqtt::MqttSpec>),
    #[cfg(feature = "kafka")]
    Kafka(Arc<KafkaSpec>),
}

/// An `http-push` connection's receiver and requests.
#[derive(Debug)]
pub struct HttpPush {
    pub receiver: Receiver,
    pub parallelism: usize,
    /// Each target's request, in the order of `ConnectionSpec::targets`.
    pub requests: Vec<HttpRequest>,
}

/// The request an `http-push` target sends: its address.
#[derive(Debug)]
pub struct HttpRequest {
    pub method: axum::http::Method,
    pub path: AddressTemplate,
    /// `headerMapping`: request headers besides the content type.
    pub headers: HeaderMapping,
}

/// Where an `http-push` connection sends: its `uri`.
#[derive(Debug, Clone)]
pub struct Receiver {
    pub https: bool,
    pub host: String,
    pub port: u16,
    /// The uri's path, before every target's address path.
    pub base_path: String,
    /// `Basic …` from the uri's user info; never logged.
    pub authorization: Option<String>,
    /// The `Host` header of every request: the host, and the port unless
    /// it is the scheme's.
    pub authority: axum::http::HeaderValue,
}

#[derive(Debug)]
pub struct TargetSpec {
    /// As written (`POST:/{{ thing:id }}`): the name of its figures.
    pub address: String,
    /// Its twin event topics.
    pub topics: Vec<EventOptions>,
    /// Its live topics (`_/_/things/live/messages`, …): each kind, with
    /// the namespaces it is limited to (empty: all).
    pub live: Vec<(Kind, Vec<String>)>,
    /// `_/_/policies/announcements`: the namespaces of the policies whose
    /// announcements of its subjects it sends (empty: all), or `None`.
    pub announcements: Option<Vec<String>>,
    /// `authorizationContext`: whose view of each event it sends.
    pub caller: Caller,
    /// `issuedAcknowledgementLabel`, its `{{connection:id}}` filled in:
    /// the label the target acknowledges each event it delivered with.
    pub issued_ack: Option<String>,
    /// `issuedAcknowledgementLabel: "live-response"` (http-push only):
    /// the receiver's HTTP answer to a live message or command is its
    /// response.
    pub live_response: bool,
}

impl ConnectionSpec {
    /// Checks `json` as the connection `id`.
    pub fn parse(id: &str, mut json: Value) -> Result<ConnectionSpec, DittoError> {
        check_id(id)?;
        let Value::Object(object) = &mut json else {
            return Err(DittoError::connection_invalid("A connection must be a JSON object."));
        };
        object.insert("id".into(), Value::String(id.to_owned()));
        let kind = text(object, "connectionType")?.to_owned();
        if !matches!(kind.as_str(), "http-push" | "kafka" | "mqtt" | "mqtt-5") {
            return Err(DittoError::connection_invalid(format!(
                "The connection type '{kind}' is not supported by Ferry yet; http-push, kafka, mqtt and mqtt-5 are."
            )));
        }
        let open = match text(object, "connectionStatus")? {
            "open" => true,
            "closed" => false,
            other => {
                return Err(DittoError::connection_invalid(format!(
                    "The connectionStatus '{other}' is not one of: open, closed."
                )))
            }
        };
        let no_targets = Vec::new();
        let targets = match object.get("targets") {
            None => &no_targets,
            Some(Value::Array(targets)) => targets,
            Some(_) => return Err(DittoError::connection_invalid("'targets' must be an array.")),
        };
        if targets.len() > MAX_TARGETS {
            return Err(DittoError::connection_invalid(format!(
                "A connection may have at most {MAX_TARGETS} targets."
            )));
        }
        let parsed = targets
            .iter()
            .map(|target| TargetSpec::parse(id, target))
            .collect::<Result<Vec<_>, _>>()?;
        if kind != "http-push" {
            if let Some(target) = parsed.iter().find(|target| target.live_response) {
                return Err(DittoError::connection_invalid(format!(
                    "The issuedAcknowledgementLabel of target '{}' is '{LIVE_RESPONSE}', which only http-push targets issue (the HTTP answer as the live response).",
                    target.address
                )));
            }
        }
        let transport = match kind.as_str() {
            "kafka" => kafka_transport(id, object, targets)?,
            "mqtt" | "mqtt-5" => {
                Transport::Mqtt(Arc::new(super::mqtt::MqttSpec::parse(id, object, targets)?))
            }
            _ => Transport::HttpPush(Arc::new(HttpPush::parse(object, targets)?)),
        };
        let source_acks =
            labels_once(transport.sources().iter().flat_map(|source| &source.declared_acks));
        Ok(ConnectionSpec {
            id: id.to_owned(),
            open,
            targets: parsed,
            transport,
            source_acks,
            json,
        })
    }

    /// The addresses of each source it reads.
    pub fn source_addresses(&self) -> Vec<&[String]> {
        self.transport.sources().iter().map(|source| source.addresses.as_slice()).collect()
    }

    /// Every label the connection declares: its targets' issued ones and
    /// its sources' declared ones, each once.
    pub fn declared_acks(&self) -> Vec<String> {
        let issued = self.targets.iter().filter_map(|target| target.issued_ack.as_ref());
        labels_once(self.source_acks.iter().chain(issued))
    }
}

/// `labels` in their order, each once.
pub(super) fn labels_once<'a>(labels: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut once: Vec<String> = Vec::new();
    for label in labels {
        if !once.contains(label) {
            once.push(label.clone());
        }
    }
    once
}

impl Transport {
    fn sources(&self) -> &[SourceSpec] {
        match self {
            #[cfg(feature = "kafka")]
            Transport::Kafka(kafka) => &kafka.sources,
            Transport::Mqtt(mqtt) => &mqtt.sources,
            Transport::HttpPush(_) => &[],
        }
    }
}

#[cfg(feature = "kafka")]
fn kafka_transport(
    id: &str,
    object: &Map<String, Value>,
    targets: &[Value],
) -> Result<Transport, DittoError> {
    Ok(Transport::Kafka(Arc::new(KafkaSpec::parse(id, object, targets)?)))
}

/// This build has no Kafka client: the connection is refused, naming the
/// cargo feature that would have it, rather than kept and never run.
#[cfg(not(feature = "kafka"))]
fn kafka_transport(
    _id: &str,
    _object: &Map<String, Value>,
    _targets: &[Value],
) -> Result<Transport, DittoError> {
    Err(DittoError::connection_invalid(
        "The connection type 'kafka' is not in this build of Ferry: it needs the `kafka` cargo feature (on by default; left out of the edge build).",
    ))
}

impl HttpPush {
    fn parse(object: &Map<String, Value>, targets: &[Value]) -> Result<HttpPush, DittoError> {
        let receiver = Receiver::parse(text(object, "uri")?)?;
        if object
            .get("sources")
            .and_then(Value::as_array)
            .is_some_and(|sources| !sources.is_empty())
        {
            return Err(DittoError::connection_invalid(
                "An http-push connection has no sources: it only sends.",
            ));
        }
        let requests = targets.iter().map(HttpRequest::parse).collect::<Result<Vec<_>, _>>()?;
        let parallelism = parallelism(object.get("specificConfig"))?;
        Ok(HttpPush { receiver, parallelism, requests })
    }
}

impl HttpRequest {
    fn parse(json: &Value) -> Result<HttpRequest, DittoError> {
        // `TargetSpec::parse` has checked the address is a string.
        let address = json.get("address").and_then(Value::as_str).unwrap_or_default();
        let (method, path) = match address.split_once(':') {
            Some((method, path)) if !method.is_empty() && !method.contains('/') => {
                let method = axum::http::Method::from_bytes(method.as_bytes()).map_err(|_| {
                    DittoError::connection_invalid(format!(
                        "The address '{address}' names no valid HTTP method."
                    ))
                })?;
                (method, path)
            }
            _ => (axum::http::Method::POST, address),
        };
        Ok(HttpRequest {
            method,
            path: AddressTemplate::parse(path, "address")?,
            headers: HeaderMapping::parse(json)?,
        })
    }
}

impl Receiver {
    fn parse(uri: &str) -> Result<Receiver, DittoError> {
        let parts = UriParts::split(uri).map_err(|why| invalid(uri, why))?;
        let https = match parts.scheme {
            "http" => false,
            "https" => true,
            _ => return Err(invalid(uri, "is not an http:// or https:// URI")),
        };
        let default_port = if https { 443 } else { 80 };
        let port = parts.port.unwrap_or(default_port);
        let authorization = parts.username.as_ref().map(|username| {
            let password = parts.password.as_deref().unwrap_or_default();
            let credentials = format!("{username}:{password}");
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials))
        });
        let authority = if port == default_port {
            parts.url_host()
        } else {
            format!("{}:{port}", parts.url_host())
        };
        let authority = axum::http::HeaderValue::from_str(&authority)
            .map_err(|_| invalid(uri, "has a host that cannot be a Host header"))?;
        Ok(Receiver {
            https,
            host: parts.host.to_owned(),
            port,
            base_path: parts.path.trim_end_matches('/').to_owned(),
            authorization,
            authority,
        })
    }
}

impl TargetSpec {
    /// What the target sends of `event`: the envelope of its first topic
    /// that lets the event through, as its subjects may see it; `None`
    /// when no topic does (the event is filtered out).
    pub async fn envelope_for(
        &self,
        twins: &Twins,
        event: &ThingEvent,
    ) -> Option<crate::protocol::Envelope> {
        for topic in &self.topics {
            let envelope = topic.envelope_for(twins, &self.caller, event.clone()).await;
            if envelope.is_some() {
                return envelope;
            }
        }
        None
    }

    /// `envelope_for`, with the acknowledgement the target owes for it.
    /// The envelope carries the command's `correlation-id` and, in
    /// `requested-acks`, what the receiver is to acknowledge: the target's
    /// issued label when the command requested it, and `device_acks` (the
    /// requested labels the connection's sources declared, which the
    /// device answers). An event the target does not send although it
    /// owes one is weakly acknowledged here, as Ditto's publisher does.
    pub async fn outgoing(
        &self,
        twins: &Twins,
        event: &ThingEvent,
        device_acks: &[String],
    ) -> Option<(crate::protocol::Envelope, Option<Owed>)> {
        let owed = self.issued_ack.as_ref().and_then(|label| {
            let requested = event.acks.as_ref()?;
            Owed::if_requested(label, &requested.labels, &requested.correlation_id)
        });
        let Some(mut envelope) = self.envelope_for(twins, event).await else {
            if let Some(owed) = owed {
                owed.weakly(twins);
            }
            return None;
        };
        let labels = labels_once(owed.iter().map(|owed| &owed.label).chain(device_acks));
        if let Some(acks) = event.acks.as_ref().filter(|_| !labels.is_empty()) {
            envelope.headers.insert("requested-acks".into(), labels.into());
            envelope.headers.insert("correlation-id".into(), acks.correlation_id.clone().into());
        }
        Some((envelope, owed))
    }

    fn parse(connection_id: &str, json: &Value) -> Result<TargetSpec, DittoError> {
        let Value::Object(target) = json else {
            return Err(DittoError::connection_invalid("A target must be a JSON object."));
        };
        let address = text(target, "address")?;
        let topics = match target.get("topics") {
            Some(Value::Array(topics)) if !topics.is_empty() => topics,
            _ => {
                return Err(DittoError::connection_invalid(format!(
                    "The target '{address}' needs at least one topic."
                )))
            }
        };
        let mut events = Vec::new();
        let mut live = Vec::new();
        let mut announcements = None;
        for topic in topics {
            match target_topic(topic)? {
                TargetTopic::Events(options) => events.push(*options),
                TargetTopic::Live(kind, namespaces) => live.push((kind, namespaces)),
                TargetTopic::Announcements(namespaces) => announcements = Some(namespaces),
            }
        }
        let caller = authorization_context(target).ok_or_else(|| {
            DittoError::connection_invalid(format!(
                "The target '{address}' needs an authorizationContext: the subjects whose view of each event it sends."
            ))
        })??;
        let label = target.get("issuedAcknowledgementLabel");
        let live_response = label.and_then(Value::as_str) == Some(LIVE_RESPONSE);
        let issued_ack = label
            .filter(|_| !live_response)
            .map(|label| {
                let what = format!("The issuedAcknowledgementLabel of target '{address}'");
                connection_label(connection_id, &what, label)
            })
            .transpose()?;
        Ok(TargetSpec {
            address: address.to_owned(),
            topics: events,
            live,
            announcements,
            caller,
            issued_ack,
            live_response,
        })
    }
}

/// The acknowledgement a target owes for an event it sends.
#[derive(Debug, Clone)]
pub struct Owed {
    pub label: String,
    pub correlation_id: String,
}

impl Owed {
    /// What the issuer of `label` owes a signal that requested `requested`
    /// under `correlation_id`: nothing unless its label is among them.
    pub fn if_requested(label: &str, requested: &[String], correlation_id: &str) -> Option<Owed> {
        requested
            .iter()
            .any(|asked| asked == label)
            .then(|| Owed { label: label.to_owned(), correlation_id: correlation_id.to_owned() })
    }

    /// Answers for a signal the target does not send on purpose: a weak
    /// acknowledgement, as Ditto's publisher gives one.
    pub fn weakly(self, twins: &Twins) {
        let weak = crate::acks::weak_ack(&self.label, &self.correlation_id);
        twins.ack_hub().deliver(&self.correlation_id, weak);
    }

    /// Hands the outcome of the delivery to the command waiting for it.
    pub fn settle(self, twins: &Twins, status: u16, payload: Option<Value>) {
        let headers = crate::acks::correlation_headers(&self.correlation_id);
        let ack = crate::acks::Ack { label: self.label, status, payload, headers };
        twins.ack_hub().deliver(&self.correlation_id, ack);
    }
}

/// The built-in label an http-push target may issue for live signals.
const LIVE_RESPONSE: &str = "live-response";

/// A target's `issuedAcknowledgementLabel` or one of a source's
/// `declaredAcks` (`what` names it in an error): Ditto requires it to
/// start with the connection's id (or `{{connection:id}}`, filled in
/// here) and a colon, so that two connections cannot declare one label.
pub(super) fn connection_label(
    connection_id: &str,
    what: &str,
    label: &Value,
) -> Result<String, DittoError> {
    let label = any_label(connection_id, what, label)?;
    if !label.starts_with(&format!("{connection_id}:")) {
        return Err(DittoError::connection_invalid(format!(
            "{what} '{label}' must be the connection id, a colon and 1 to 164 of a-zA-Z0-9-_:."
        )));
    }
    Ok(label)
}

/// An acknowledgement label in a connection's JSON, its leading
/// `{{connection:id}}` filled in: any label, the built-in ones too.
pub(super) fn any_label(
    connection_id: &str,
    what: &str,
    label: &Value,
) -> Result<String, DittoError> {
    let invalid = |why: &str| DittoError::connection_invalid(format!("{what} {why}."));
    let Value::String(label) = label else { return Err(invalid("is not a string")) };
    let label = match label.strip_prefix("{{") {
        Some(rest) => match rest.split_once("}}") {
            Some((placeholder, after)) if placeholder.trim() == "connection:id" => {
                format!("{connection_id}{after}")
            }
            _ => return Err(invalid("has a placeholder other than {{connection:id}}")),
        },
        None => label.clone(),
    };
    if !crate::acks::is_label(&label) {
        return Err(invalid(&format!("'{label}' is not 3 to 165 of a-zA-Z0-9-_:")));
    }
    Ok(label)
}

/// A source's or target's `authorizationContext`: `None` when there is
/// none (or it is empty), an error when it lists something else than ids.
pub fn authorization_context(object: &Map<String, Value>) -> Option<Result<Caller, DittoError>> {
    match object.get("authorizationContext") {
        Some(Value::Array(subjects)) if !subjects.is_empty() => Some(
            subjects
                .iter()
                .map(|subject| subject.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Caller::new)
                .ok_or_else(|| {
                    DittoError::connection_invalid("An authorizationContext lists subject ids.")
                }),
        ),
        _ => None,
    }
}

/// What a target's topic selects.
enum TargetTopic {
    /// Twin events, with the options of a WebSocket's `START-SEND-EVENTS`.
    Events(Box<EventOptions>),
    /// A kind of live signal, in the namespaces given (empty: all).
    Live(Kind, Vec<String>),
    /// Policy announcements of the target's subjects, in the namespaces
    /// given (empty: all).
    Announcements(Vec<String>),
}

fn target_topic(topic: &Value) -> Result<TargetTopic, DittoError> {
    let topic = topic
        .as_str()
        .ok_or_else(|| DittoError::connection_invalid("A target's topics are strings."))?;
    let name = topic.split_once('?').map_or(topic, |(name, _)| name);
    let live = match name {
        "_/_/things/twin/events" | "_/_/policies/announcements" => None,
        "_/_/things/live/messages" => Some(Kind::Messages),
        "_/_/things/live/commands" => Some(Kind::LiveCommands),
        "_/_/things/live/events" => Some(Kind::LiveEvents),
        _ => {
            return Err(DittoError::connection_invalid(format!(
                "The topic '{name}' is not supported by Ferry yet; _/_/things/twin/events, _/_/things/live/messages, commands and events, and _/_/policies/announcements are."
            )))
        }
    };
    let params = crate::ws::control::params(topic).map_err(|malformed| {
        DittoError::connection_invalid(format!("The topic '{topic}' has {}.", malformed.0))
    })?;
    if name == "_/_/things/twin/events" {
        return EventOptions::parse(&params).map(|options| TargetTopic::Events(Box::new(options)));
    }
    let mut namespaces = Vec::new();
    for (key, value) in &params {
        match key.as_str() {
            "namespaces" => namespaces.extend(
                value.split(',').filter(|namespace| !namespace.is_empty()).map(str::to_owned),
            ),
            other => {
                return Err(DittoError::connection_invalid(format!(
                    "The parameter '{other}' of the topic '{name}' is not supported by Ferry yet; namespaces is."
                )))
            }
        }
    }
    Ok(match live {
        Some(kind) => TargetTopic::Live(kind, namespaces),
        None => TargetTopic::Announcements(namespaces),
    })
}

/// `specificConfig.parallelism`: a number or a numeral (Ditto writes
/// `"1"`), 1 by default.
fn parallelism(specific: Option<&Value>) -> Result<usize, DittoError> {
    let value = specific.and_then(|specific| specific.get("parallelism"));
    let parallelism = match value {
        None => return Ok(1),
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(text)) => text.trim().parse().ok(),
        Some(_) => None,
    };
    match parallelism.and_then(|n| usize::try_from(n).ok()) {
        Some(n @ 1..=MAX_PARALLELISM) => Ok(n),
        _ => Err(DittoError::connection_invalid(format!(
            "specificConfig.parallelism must be a number from 1 to {MAX_PARALLELISM}."
        ))),
    }
}

pub(super) fn text<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a str, DittoError> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(DittoError::connection_invalid(format!("'{key}' must be a string."))),
        None => Err(DittoError::json_field_missing(format!(
            "JSON did not include required </{key}> field!"
        ))),
    }
}

/// Ditto's `ConnectionId`: `[a-zA-Z0-9-_:]{1,100}`.
pub fn check_id(id: &str) -> Result<(), DittoError> {
    let valid = (1..=100).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':'));
    if valid {
        Ok(())
    } else {
        Err(DittoError::connection_id_invalid(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seed_connection() -> Value {
        // The Ditto benchmark's HTTP push connection (../seeds/ditto-benchmark.txt).
        json!({
            "name": "http-push-connection",
            "connectionType": "http-push",
            "connectionStatus": "open",
            "uri": "http://mmock-service:80",
            "sources": [],
            "targets": [{
                "address": "POST:/{{ thing:id }}",
                "topics": ["_/_/things/twin/events?filter=eq(topic:action,'modified')"],
                "authorizationContext": ["nginx:ditto"],
                "headerMapping": {}
            }],
            "clientCount": 1,
            "failoverEnabled": true,
            "validateCertificates": true,
            "processorPoolSize": 1,
            "specificConfig": {"parallelism": "1"},
            "tags": ["benchmark"]
        })
    }

    #[test]
    fn the_seeds_connection_is_read_as_ditto_writes_it() {
        let spec = ConnectionSpec::parse("a70c0749", seed_connection()).unwrap();
        assert!(spec.open);
        // Without the kafka feature http-push is the only transport.
        #[allow(irrefutable_let_patterns)]
        let Transport::HttpPush(http) = &spec.transport
        else {
            panic!("an http-push connection")
        };
        assert_eq!((http.receiver.host.as_str(), http.receiver.port), ("mmock-service", 80));
        assert_eq!(http.parallelism, 1);
        assert_eq!(http.requests[0].method, axum::http::Method::POST);
        assert_eq!(spec.targets[0].caller.subjects, ["nginx:ditto"]);
        assert_eq!(spec.json["id"], "a70c0749");
        assert_eq!(spec.json["tags"], json!(["benchmark"]));
    }

    #[test]
    fn what_ferry_cannot_run_is_refused_with_dittos_error() {
        for (key, value) in [
            ("connectionType", json!("amqp-091")),
            ("connectionStatus", json!("half")),
            ("uri", json!("tcp://broker:9092")),
            ("sources", json!([{"addresses": ["a"]}])),
            ("specificConfig", json!({"parallelism": "0"})),
        ] {
            let mut connection = seed_connection();
            connection[key] = value;
            let error = ConnectionSpec::parse("c", connection).unwrap_err();
            assert_eq!(error.error, "connectivity:connection.configuration.invalid", "{key}");
        }
        let mut live = seed_connection();
        live["targets"][0]["topics"] = json!(["_/_/things/live/messages"]);
        live["targets"][0]["issuedAcknowledgementLabel"] = json!("live-response");
        let spec = ConnectionSpec::parse("c", live.clone()).unwrap();
        assert!(spec.targets[0].live_response && spec.targets[0].issued_ack.is_none());
        live["connectionType"] = json!("mqtt");
        live["uri"] = json!("tcp://127.0.0.1:1883");
        live["specificConfig"] = json!({});
        let refused = ConnectionSpec::parse("c", live).unwrap_err();
        assert!(refused.message.contains("only http-push"), "{}", refused.message);
        assert_eq!(
            ConnectionSpec::parse("a b", seed_connection()).unwrap_err().error,
            "connectivity:connection.id.invalid"
        );
        let mut missing = seed_connection();
        missing.as_object_mut().unwrap().remove("uri");
        assert_eq!(ConnectionSpec::parse("c", missing).unwrap_err().error, "json.field.missing");
    }

    #[test]
    fn sources_declare_labels_of_the_connections_own_beside_its_targets() {
        let mut connection = json!({
            "connectionType": "mqtt",
            "connectionStatus": "open",
            "uri": "tcp://127.0.0.1:1883",
            "sources": [{
                "addresses": ["telemetry/#"],
                "authorizationContext": ["nginx:ditto"],
                "declaredAcks": ["{{connection:id}}:applied", "devices:applied", "devices:seen"],
            }],
            "targets": [{
                "address": "events/{{ thing:id }}",
                "topics": ["_/_/things/twin/events"],
                "authorizationContext": ["nginx:ditto"],
                "issuedAcknowledgementLabel": "devices:published",
            }],
        });
        let spec = ConnectionSpec::parse("devices", connection.clone()).unwrap();
        assert_eq!(spec.source_acks, ["devices:applied", "devices:seen"]);
        assert_eq!(spec.declared_acks(), ["devices:applied", "devices:seen", "devices:published"]);
        connection["sources"][0]["declaredAcks"] = json!(["other:applied"]);
        let error = ConnectionSpec::parse("devices", connection.clone()).unwrap_err();
        assert_eq!(error.error, "connectivity:connection.configuration.invalid");
        assert!(error.message.contains("source 'telemetry/#'"), "{}", error.message);
        connection["sources"][0]["declaredAcks"] = json!("devices:applied");
        assert!(ConnectionSpec::parse("devices", connection).is_err());
    }

    #[test]
    fn a_uri_with_credentials_authenticates_and_is_redacted_in_errors() {
        let receiver = Receiver::parse("https://user:secret@example.com:8443/base/").unwrap();
        assert!(receiver.https);
        assert_eq!((receiver.host.as_str(), receiver.port), ("example.com", 8443));
        assert_eq!(receiver.base_path, "/base");
        assert_eq!(receiver.authorization.as_deref(), Some("Basic dXNlcjpzZWNyZXQ="));
        assert_eq!(receiver.authority, "example.com:8443");
        assert_eq!(Receiver::parse("http://[::1]:8080").unwrap().authority, "[::1]:8080");
        assert_eq!(Receiver::parse("https://h.example:443/").unwrap().authority, "h.example");
        let error = Receiver::parse("http://user:secret@h:port").unwrap_err();
        assert!(!error.message.contains("secret"), "{}", error.message);
    }
}
