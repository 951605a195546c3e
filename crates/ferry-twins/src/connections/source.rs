//! A connection's `sources` as Ditto's connectivity API writes them: where
//! Ditto protocol commands are read from (Kafka topics, MQTT topic
//! filters), whose rights they run with, which device may command which
//! thing, the headers set from the message, and where the responses go.
//! One parser for both kinds, since Ditto's source is one model; what only
//! one kind has is said at its field.

use super::enforcement::Enforcement;
use super::model::{any_label, authorization_context, connection_label, labels_once};
use super::placeholder::{AcksFilter, Holds, Received, SourceTemplate};
use crate::error::DittoError;
use crate::protocol::Envelope;
use crate::service::Caller;
use serde_json::{Map, Value};

/// Sources one connection may have.
pub const MAX_SOURCES: usize = 16;

/// Kafka consumers one source may run (`consumerCount`): each is a
/// librdkafka client with its own threads and fetch buffers.
pub const MAX_CONSUMERS: usize = 8;

/// Addresses (topics, or topic filters) one source may read.
const MAX_ADDRESSES: usize = 64;

/// Headers one `headerMapping` may set.
const MAX_HEADER_MAPPINGS: usize = 32;

/// Labels one source may declare (`declaredAcks`): as many as one
/// command may request (`acks.rs`).
const MAX_DECLARED_ACKS: usize = 32;

/// What the source reads from, which decides what its addresses are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    #[cfg(feature = "kafka")]
    Kafka,
    Mqtt,
}

#[derive(Debug)]
pub struct SourceSpec {
    /// The topics (Kafka) or topic filters (MQTT), as written: the name of
    /// its figures too.
    pub addresses: Vec<String>,
    /// Kafka: consumers in the group. MQTT: 1 (one client per connection).
    pub consumer_count: usize,
    /// `qos: 1`: a message is acknowledged (a Kafka offset committed, an
    /// MQTT PUBACK sent) only once its command was applied: persisted, or
    /// refused for good.
    pub at_least_once: bool,
    /// `authorizationContext`: whose rights the commands run with.
    pub caller: Caller,
    pub enforcement: Option<Enforcement>,
    /// `headerMapping`: Ditto headers set from the message's headers.
    pub header_mapping: Vec<(String, SourceTemplate)>,
    /// Where responses go, when `replyTarget.enabled`.
    pub reply_target: Option<ReplyTarget>,
    /// `declaredAcks`, each `{{connection:id}}` filled in: the labels of
    /// the acknowledgements the source's devices send back for the events
    /// the connection's targets carry to them.
    pub declared_acks: Vec<String>,
    /// `acknowledgementRequests.includes`, each `{{connection:id}}` filled
    /// in: labels every command read here requests besides its own, so
    /// that its message is acknowledged (at qos 1) only once they all
    /// succeeded.
    pub requested_acks: Vec<String>,
    /// `acknowledgementRequests.filter`, run on each command's requests
    /// after `requested_acks` were added.
    pub acks_filter: Option<AcksFilter>,
}

/// A source's `replyTarget`: the topic its command's answer is published
/// on (on Kafka `topic` or `topic/key`), filled in from the message
/// (`{{ header:reply-to }}`), and which answers go
/// (`expectedResponseTypes`).
#[derive(Debug)]
pub struct ReplyTarget {
    address: SourceTemplate,
    pub takes: AnswerKinds,
}

/// Which answers a reply target takes (`expectedResponseTypes`): small
/// enough to go along with a live call waiting for its answer.
#[derive(Debug, Clone, Copy)]
pub struct AnswerKinds {
    responses: bool,
    errors: bool,
}

impl AnswerKinds {
    /// Whether `answer` is of a kind taken: an error response (status 400
    /// and up) or another response.
    pub fn answer(self, answer: &Envelope) -> bool {
        let error = answer.status.is_some_and(|status| status >= 400);
        if error {
            self.errors
        } else {
            self.responses
        }
    }
}

impl ReplyTarget {
    /// The address for the answer to `payload`, received with `received`:
    /// filled in from the message's transport headers, else from the
    /// command's own Ditto headers (`"headers": {"reply-to": …}`), as
    /// Ditto maps them in before it resolves the reply target. `None` when
    /// it does not resolve.
    pub fn address_for(&self, received: Received<'_>, payload: &[u8]) -> Option<String> {
        self.address.with_received(received).or_else(|| {
            #[derive(serde::Deserialize)]
            struct HeadersOnly {
                #[serde(default)]
                headers: Map<String, Value>,
            }
            let command: HeadersOnly = serde_json::from_slice(payload).ok()?;
            let headers: Map<String, Value> = command
                .headers
                .into_iter()
                .map(|(name, value)| (name.to_ascii_lowercase(), value))
                .collect();
            self.address.with_received(Received { headers: &headers, address: received.address })
        })
    }
}

impl SourceSpec {
    /// Checks `json` as a source of the connection `connection_id`.
    pub fn parse(
        connection_id: &str,
        json: &Value,
        kind: SourceKind,
    ) -> Result<SourceSpec, DittoError> {
        let Value::Object(source) = json else {
            return Err(DittoError::connection_invalid("A source must be a JSON object."));
        };
        let addresses = addresses(source.get("addresses"), kind)?;
        let named = addresses.join(",");
        let consumer_count = match source.get("consumerCount") {
            None => 1,
            Some(count) if kind == SourceKind::Mqtt && count.as_u64() == Some(1) => 1,
            Some(_) if kind == SourceKind::Mqtt => {
                return Err(DittoError::connection_invalid(format!(
                    "The consumerCount of the MQTT source '{named}' must be 1: Ferry reads an MQTT connection's sources with one client."
                )))
            }
            Some(count) => count
                .as_u64()
                .and_then(|count| usize::try_from(count).ok())
                .filter(|count| (1..=MAX_CONSUMERS).contains(count))
                .ok_or_else(|| {
                    DittoError::connection_invalid(format!(
                        "The consumerCount of the source '{named}' must be 1 to {MAX_CONSUMERS}."
                    ))
                })?,
        };
        let at_least_once = match source.get("qos") {
            None => false,
            Some(qos) if qos.as_u64() == Some(0) => false,
            Some(qos) if qos.as_u64() == Some(1) => true,
            Some(_) => {
                return Err(DittoError::connection_invalid(format!(
                    "The qos of the source '{named}' must be 0 or 1."
                )))
            }
        };
        let caller = authorization_context(source).ok_or_else(|| {
            DittoError::connection_invalid(format!(
                "The source '{named}' needs an authorizationContext: the subjects whose rights its commands run with."
            ))
        })??;
        let enforcement = source.get("enforcement").map(Enforcement::parse).transpose()?;
        let header_mapping = header_mapping(source.get("headerMapping"))?;
        payload_mapping(source.get("payloadMapping"))?;
        let reply_target = reply_target(source.get("replyTarget"), &named)?;
        let declared_acks = declared_acks(connection_id, source.get("declaredAcks"), &named)?;
        let (requested_acks, acks_filter) =
            requested_acks(connection_id, source.get("acknowledgementRequests"), &named)?;
        Ok(SourceSpec {
            addresses,
            consumer_count,
            at_least_once,
            caller,
            enforcement,
            header_mapping,
            reply_target,
            declared_acks,
            requested_acks,
            acks_filter,
        })
    }
}

/// `acknowledgementRequests`: `{"includes": [labels], "filter": "fn:…"}`,
/// both optional.
fn requested_acks(
    connection_id: &str,
    json: Option<&Value>,
    named: &str,
) -> Result<(Vec<String>, Option<AcksFilter>), DittoError> {
    let invalid = |why: &str| {
        DittoError::connection_invalid(format!(
            "The acknowledgementRequests of the source '{named}' {why}."
        ))
    };
    let requests = match json {
        None | Some(Value::Null) => return Ok((Vec::new(), None)),
        Some(Value::Object(requests)) => requests,
        Some(_) => return Err(invalid("must be an object with includes")),
    };
    if let Some(unknown) = requests.keys().find(|key| *key != "includes" && *key != "filter") {
        return Err(invalid(&format!("have an unknown field '{unknown}'")));
    }
    let filter = match requests.get("filter") {
        None | Some(Value::Null) => None,
        Some(Value::String(filter)) => Some(AcksFilter::parse(filter, named)?),
        Some(_) => return Err(invalid("have a filter that is not a string")),
    };
    let labels = match requests.get("includes") {
        None if filter.is_some() => return Ok((Vec::new(), filter)),
        Some(Value::Array(labels)) if labels.len() <= MAX_DECLARED_ACKS => labels,
        _ => {
            return Err(invalid(&format!(
                "need includes: an array of at most {MAX_DECLARED_ACKS} labels"
            )))
        }
    };
    let what = format!("A label the source '{named}' requests");
    Ok((checked_once(labels, |label| any_label(connection_id, &what, label))?, filter))
}

/// `declaredAcks`: labels of the connection's own (`<id>:…`), each once.
fn declared_acks(
    connection_id: &str,
    json: Option<&Value>,
    named: &str,
) -> Result<Vec<String>, DittoError> {
    let labels = match json {
        None => return Ok(Vec::new()),
        Some(Value::Array(labels)) if labels.len() <= MAX_DECLARED_ACKS => labels,
        Some(_) => {
            return Err(DittoError::connection_invalid(format!(
                "The declaredAcks of the source '{named}' are an array of at most {MAX_DECLARED_ACKS} labels."
            )))
        }
    };
    let what = format!("A declaredAcks label of the source '{named}'");
    checked_once(labels, |label| connection_label(connection_id, &what, label))
}

/// Each label as `check` reads it, each once.
fn checked_once(
    labels: &[Value],
    check: impl Fn(&Value) -> Result<String, DittoError>,
) -> Result<Vec<String>, DittoError> {
    let checked: Vec<String> = labels.iter().map(check).collect::<Result<_, _>>()?;
    Ok(labels_once(&checked))
}

fn addresses(json: Option<&Value>, kind: SourceKind) -> Result<Vec<String>, DittoError> {
    let (valid, what): (fn(&str) -> bool, _) = match kind {
        #[cfg(feature = "kafka")]
        SourceKind::Kafka => (
            ferry_routes::endpoints::kafka::is_valid_kafka_topic,
            "Kafka topic names (a-z A-Z 0-9 . _ -)",
        ),
        SourceKind::Mqtt => {
            (ferry_mqtt::topic::is_valid_topic_filter, "MQTT topic filters (e.g. telemetry/#)")
        }
    };
    match json {
        Some(Value::Array(addresses))
            if !addresses.is_empty() && addresses.len() <= MAX_ADDRESSES =>
        {
            addresses
                .iter()
                .map(|address| address.as_str().filter(|address| valid(address)).map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    DittoError::connection_invalid(format!("A source's addresses are {what}."))
                })
        }
        _ => Err(DittoError::connection_invalid(format!(
            "A source needs 1 to {MAX_ADDRESSES} addresses: the topics it reads."
        ))),
    }
}

/// `headerMapping`: `{"name": "{{ header:x }}"}`, each a Ditto header
/// set from the message's headers.
fn header_mapping(json: Option<&Value>) -> Result<Vec<(String, SourceTemplate)>, DittoError> {
    let mapping = match json {
        None => return Ok(Vec::new()),
        Some(Value::Object(mapping)) if mapping.len() <= MAX_HEADER_MAPPINGS => mapping,
        Some(_) => {
            return Err(DittoError::connection_invalid(format!(
                "A headerMapping is an object of at most {MAX_HEADER_MAPPINGS} headers."
            )))
        }
    };
    mapping
        .iter()
        .map(|(name, value)| {
            let value = value.as_str().ok_or_else(|| {
                DittoError::connection_invalid("A headerMapping's values are strings.")
            })?;
            let template = SourceTemplate::parse(value, Holds::Headers, "headerMapping")?;
            Ok((name.to_ascii_lowercase(), template))
        })
        .collect()
}

/// `payloadMapping`: only Ditto's own (the message is a Ditto protocol
/// message). Ditto's other mappers (JavaScript, normalized,
/// implicitThingCreation, …) are refused by name.
fn payload_mapping(json: Option<&Value>) -> Result<(), DittoError> {
    let Some(mappings) = json else { return Ok(()) };
    let mappings = mappings.as_array().ok_or_else(|| {
        DittoError::connection_invalid("A payloadMapping is an array of mapping ids.")
    })?;
    let others: Vec<&str> = mappings
        .iter()
        .map(|mapping| mapping.as_str().unwrap_or("?"))
        .filter(|mapping| !mapping.eq_ignore_ascii_case("ditto"))
        .collect();
    if others.is_empty() {
        Ok(())
    } else {
        Err(DittoError::connection_invalid(format!(
            "The payload mapping(s) {} not supported by Ferry: a source reads Ditto protocol messages ('ditto').",
            others.iter().map(|other| format!("'{other}'")).collect::<Vec<_>>().join(", ") + if others.len() == 1 { " is" } else { " are" }
        )))
    }
}

/// `replyTarget`: off when absent or `enabled: false`. Ditto's default
/// `expectedResponseTypes` are responses and errors; its `nack` (an
/// acknowledgement that failed) has no counterpart here and is accepted
/// without effect. The reply target's own `headerMapping` is not
/// applied: the answer carries its Ditto headers.
fn reply_target(json: Option<&Value>, named: &str) -> Result<Option<ReplyTarget>, DittoError> {
    let Some(reply) = json else { return Ok(None) };
    if reply.get("enabled").and_then(Value::as_bool) == Some(false) {
        return Ok(None);
    }
    let address = reply.get("address").and_then(Value::as_str).ok_or_else(|| {
        DittoError::connection_invalid(format!(
            "The replyTarget of the source '{named}' needs an address, e.g. '{{{{ header:reply-to }}}}'."
        ))
    })?;
    let address = SourceTemplate::parse(address, Holds::Headers, "replyTarget address")?;
    let (mut responses, mut errors) = (true, true);
    if let Some(types) = reply.get("expectedResponseTypes") {
        let types = types.as_array().ok_or_else(|| {
            DittoError::connection_invalid("expectedResponseTypes lists response, error and nack.")
        })?;
        (responses, errors) = (false, false);
        for kind in types {
            match kind.as_str() {
                Some("response") => responses = true,
                Some("error") => errors = true,
                Some("nack") => {}
                _ => {
                    return Err(DittoError::connection_invalid(format!(
                        "The expectedResponseType {kind} is not one of: response, error, nack."
                    )))
                }
            }
        }
    }
    Ok(Some(ReplyTarget { address, takes: AnswerKinds { responses, errors } }))
}
