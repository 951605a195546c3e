//! Ditto protocol commands applied to the twin service: the same service
//! calls, enforcement and errors as the HTTP API, in and out of envelopes.
//!
//! As Ditto's protocol adapters (`ThingModifyCommandAdapter`,
//! `ThingQueryCommandAdapter`, `PolicyModifyCommandAdapter`, …) map them:
//! - `things/twin/commands/create` at `/` creates a thing that must not
//!   exist (409 `things:thing.conflict`), answered 201 with the thing;
//! - `modify` puts the value at `path` (201 with the value when it created
//!   the resource, else 204), `merge` applies a merge patch (204),
//!   `delete` removes (204), `retrieve` answers 200 with the caller's
//!   view, narrowed by the envelope's `fields`; `_/_/things/twin/commands/
//!   retrieve` with `{"thingIds":[…]}` retrieves several;
//! - `policies/commands/create|modify|retrieve|delete` likewise for
//!   policies;
//! - a response is on the command's topic with its `status`, the error of
//!   a failed one on `…/errors` with the error as `value`, both echoing
//!   `correlation-id`. A success is not answered with `response-required:
//!   false`; a failure always is, so nothing fails silently.
//! - Preconditions come from the headers `if-match`, `if-none-match` and
//!   `condition`, as the HTTP API's.

use super::envelope::Envelope;
use super::topic::{Channel, Criterion, Group, Topic};
use crate::acks::{self, Ack, EventAcks, Requested};
use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::id::ThingId;
use crate::live::smart;
use crate::pointer::JsonPointer;
use crate::policy::Written as PolicyWritten;
use crate::service::{
    Caller, Conditions, IfEqual, PolicyResource, Refused, TagMatch, ThingWrite, ThingWritten, Twins,
};
use crate::thing::metadata_headers::DITTO_METADATA;
use crate::thing::{EntityTag, MetadataHeaders, ThingBody, ThingResource};
use serde_json::{Map, Value};
use std::sync::Arc;

/// What a command answers: a response, or an error with the entity's tag
/// where a failed precondition has one.
type Answer = Result<Response, Refused>;

struct Response {
    status: u16,
    value: Option<Value>,
    etag: Option<EntityTag>,
    /// `ditto-metadata`, the answer to `get-metadata`: a JSON object in
    /// the headers, as Ditto writes a header of its type.
    metadata: Option<Value>,
    /// Whether the twin met a retrieve's `live-channel-condition`
    /// (`live/smart.rs`), when it had one.
    live_channel_matched: Option<bool>,
}

impl Response {
    fn new(status: u16, value: Option<Value>) -> Response {
        Response { status, value, etag: None, metadata: None, live_channel_matched: None }
    }
}

impl Twins {
    /// Applies the Ditto protocol message `bytes` from `caller` and returns
    /// what goes back to it: the response, the error, or nothing (a
    /// success nobody asked to hear of).
    pub async fn apply_protocol(&self, caller: &Caller, bytes: &[u8]) -> Option<Envelope> {
        let envelope = match Envelope::parse(bytes) {
            Ok(envelope) => envelope,
            Err(error) => return Some(error_response(None, &Map::new(), &error)),
        };
        self.apply_envelope(caller, &envelope).await
    }

    /// `apply_protocol` for a message already read.
    pub async fn apply_envelope(&self, caller: &Caller, envelope: &Envelope) -> Option<Envelope> {
        let topic = match Topic::parse(&envelope.topic) {
            Ok(topic) => topic,
            Err(error) => return Some(error_response(None, &envelope.headers, &error)),
        };
        // A modifying twin command's acknowledgements (`acks.rs`).
        let modifying = (topic.group, topic.channel, topic.criterion)
            == (Group::Things, Channel::Twin, Criterion::Commands)
            && topic.entity_id().is_some()
            && matches!(topic.action.as_str(), "create" | "modify" | "merge" | "delete");
        let requested = match modifying.then(|| Requested::of_protocol_headers(&envelope.headers)) {
            Some(Err(error)) => {
                return Some(error_response(Some(&topic), &envelope.headers, &error))
            }
            Some(Ok(requested)) => Some(requested),
            None => None,
        };
        // Made up only for an answer of acknowledgements, which carries
        // one: not a random draw on every command.
        let correlation_id = match envelope.header("correlation-id") {
            Some(id) => id,
            None if requested.as_ref().is_none_or(Requested::plain) => String::new(),
            None => crate::id::random_uuid(),
        };
        let event_acks =
            requested.as_ref().and_then(|r| r.event_acks(&correlation_id)).map(Arc::new);
        // Registered before the command runs: an acknowledgement that
        // comes back at once is not missed.
        let waiter = match event_acks.as_deref().map(|acks| self.ack_hub().expect(acks)) {
            Some(Err(error)) => {
                return Some(error_response(Some(&topic), &envelope.headers, &error))
            }
            Some(Ok(waiter)) => Some(waiter),
            None => None,
        };
        let answer = match (topic.group, topic.channel, topic.criterion) {
            (Group::Things, Channel::Twin, Criterion::Commands) => {
                self.thing_command(caller, &topic, envelope, event_acks).await
            }
            (Group::Policies, _, Criterion::Commands) => {
                self.policy_command(caller, &topic, envelope).await.map_err(Refused::from)
            }
            _ => Err(super::topic::unknown_topic_path(&envelope.topic).into()),
        };
        match answer {
            Ok(response) => match requested {
                Some(requested) if !requested.plain() => {
                    let received = match waiter {
                        Some(waiter) => waiter.collect(requested.timeout).await,
                        None => Vec::new(),
                    };
                    acknowledgements(
                        &topic,
                        envelope,
                        &requested,
                        response,
                        received,
                        &correlation_id,
                    )
                }
                Some(requested) if !requested.response_required => None,
                None if !envelope.response_required() => None,
                _ => {
                    let matched = response.live_channel_matched;
                    let mut twin = response_envelope(&topic, envelope, response);
                    match matched {
                        Some(true) => {
                            return Some(
                                self.retrieve_from_device(caller, &topic, envelope, twin).await,
                            )
                        }
                        Some(false) => smart::mark(&mut twin, "twin", false),
                        None => {}
                    }
                    Some(twin)
                }
            },
            Err(refused) => {
                let mut error = error_response(Some(&topic), &envelope.headers, &refused.error);
                if let Some(etag) = refused.etag {
                    error.headers.insert("etag".into(), etag.as_str().into());
                }
                Some(error)
            }
        }
    }

    async fn thing_command(
        &self,
        caller: &Caller,
        topic: &Topic,
        envelope: &Envelope,
        acks: Option<Arc<EventAcks>>,
    ) -> Answer {
        let action = topic.action.as_str();
        let Some(thing_id) = topic.entity_id() else {
            if action == "retrieve" && envelope.path == "/" {
                return self.retrieve_several(caller, envelope).await.map_err(Refused::from);
            }
            return Err(super::topic::unknown_topic_path(&envelope.topic).into());
        };
        let thing_id = ThingId::parse(&thing_id)?;
        let pointer = JsonPointer::parse(&envelope.path)?;
        let resource = ThingResource::from_pointer(&pointer)?
            .filter(|resource| !(action == "delete" && *resource == ThingResource::PolicyId))
            .ok_or_else(|| unknown_path(&envelope.path))?;
        let conditions = Conditions { acks, ..conditions(envelope, action == "retrieve")? };
        if action != "retrieve" && conditions.live_channel_condition.is_some() {
            return Err(DittoError::live_channel_condition_not_allowed().into());
        }
        let value = || envelope.value.as_ref().ok_or_else(|| missing_value(&topic.to_string()));
        let written = match action {
            "retrieve" => {
                let fields = envelope.fields.as_deref().map(FieldSelector::parse).transpose()?;
                let retrieved = self
                    .retrieve_thing(caller, &thing_id, &resource, fields.as_ref(), &conditions)
                    .await?;
                return Ok(Response {
                    status: 200,
                    value: Some(retrieved.value),
                    etag: retrieved.etag,
                    metadata: retrieved.metadata,
                    live_channel_matched: retrieved.live_channel_matched,
                });
            }
            "create" => {
                if resource != ThingResource::Thing {
                    return Err(unknown_path(&envelope.path).into());
                }
                let body = ThingBody::for_put(&thing_id, value()?)?;
                self.write_thing(caller, &thing_id, &resource, ThingWrite::Post(&body), &conditions)
                    .await?
            }
            "modify" => {
                let value = value()?;
                self.write_thing(caller, &thing_id, &resource, ThingWrite::Put(value), &conditions)
                    .await?
            }
            "merge" => {
                let value = value()?;
                self.write_thing(
                    caller,
                    &thing_id,
                    &resource,
                    ThingWrite::Merge(value),
                    &conditions,
                )
                .await?
            }
            "delete" => {
                self.write_thing(caller, &thing_id, &resource, ThingWrite::Delete, &conditions)
                    .await?
            }
            _ => return Err(unknown_command(&topic.to_string()).into()),
        };
        let response = match written.written {
            ThingWritten::Created(value) => Response::new(201, Some(value)),
            ThingWritten::Modified | ThingWritten::Deleted => Response::new(204, None),
        };
        Ok(Response { etag: written.etag, ..response })
    }

    /// `_/_/things/twin/commands/retrieve` with `{"thingIds":[…]}`.
    async fn retrieve_several(
        &self,
        caller: &Caller,
        envelope: &Envelope,
    ) -> Result<Response, DittoError> {
        let ids = envelope
            .value
            .as_ref()
            .and_then(|value| value.get("thingIds"))
            .and_then(Value::as_array)
            .ok_or_else(|| {
                DittoError::json_field_missing("JSON did not include required </thingIds> field!")
            })?;
        let ids = ids
            .iter()
            .map(|id| {
                id.as_str().map(ThingId::parse).unwrap_or_else(|| Err(DittoError::json_invalid(id)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let fields = envelope.fields.as_deref().map(FieldSelector::parse).transpose()?;
        let found = self.retrieve_things(caller, &ids, fields.as_ref()).await?;
        Ok(Response::new(200, Some(Value::Array(found))))
    }

    async fn policy_command(
        &self,
        caller: &Caller,
        topic: &Topic,
        envelope: &Envelope,
    ) -> Result<Response, DittoError> {
        let policy_id =
            topic.entity_id().ok_or_else(|| super::topic::unknown_topic_path(&envelope.topic))?;
        let resource = PolicyResource::parse(&envelope.path)
            .unwrap_or_else(|| Err(unknown_path(&envelope.path)))?;
        let value = || envelope.value.as_ref().ok_or_else(|| missing_value(&topic.to_string()));
        match topic.action.as_str() {
            "retrieve" => {
                let retrieved = self.retrieve_policy(caller, &policy_id, &resource).await?;
                Ok(Response::new(200, Some(retrieved.value)))
            }
            "create" => {
                if resource != PolicyResource::Policy {
                    return Err(unknown_path(&envelope.path));
                }
                if self.policy(&policy_id).await?.is_some() {
                    return Err(DittoError::policy_conflict(&policy_id));
                }
                let (_, created) =
                    self.modify_policy(caller, &policy_id, &resource, value()?).await?;
                Ok(Response::new(201, Some(created)))
            }
            "modify" => {
                Ok(match self.modify_policy(caller, &policy_id, &resource, value()?).await? {
                    (PolicyWritten::Created, created) => Response::new(201, Some(created)),
                    (PolicyWritten::Modified, _) => Response::new(204, None),
                })
            }
            "delete" => {
                self.delete_policy(caller, &policy_id, &resource).await?;
                Ok(Response::new(204, None))
            }
            _ => Err(unknown_command(&topic.to_string())),
        }
    }
}

fn conditions(envelope: &Envelope, retrieve: bool) -> Result<Conditions, DittoError> {
    let if_equal = envelope.header("if-equal").as_deref().map(IfEqual::parse).transpose()?;
    Ok(Conditions {
        metadata: MetadataHeaders::read(|name| envelope.header(name), retrieve)?,
        if_match: envelope.header("if-match").as_deref().map(TagMatch::parse),
        if_none_match: envelope.header("if-none-match").as_deref().map(TagMatch::parse),
        condition: envelope.header("condition"),
        live_channel_condition: envelope.header(smart::CONDITION),
        if_equal: if_equal.unwrap_or_default(),
        acks: None,
        correlation_id: envelope.header("correlation-id").map(Arc::from),
    })
}

/// The headers every answer carries back: the command's correlation id.
pub(super) fn answer_headers(request: &Map<String, Value>) -> Map<String, Value> {
    let mut headers = Map::new();
    if let Some(id) = request.get("correlation-id") {
        headers.insert("correlation-id".into(), id.clone());
    }
    headers
}

/// A committed command's requested acknowledgements (`received`: the
/// subscribers') as Ditto's aggregated `…/things/twin/acks` message, or
/// nothing when no response was required and all succeeded.
fn acknowledgements(
    topic: &Topic,
    command: &Envelope,
    requested: &Requested,
    response: Response,
    received: Vec<Ack>,
    correlation_id: &str,
) -> Option<Envelope> {
    let mut headers = acks::correlation_headers(correlation_id);
    if let Some(etag) = &response.etag {
        headers.insert("etag".into(), etag.as_str().into());
    }
    let persisted = Ack {
        label: acks::TWIN_PERSISTED.into(),
        status: response.status,
        payload: response.value,
        headers,
    };
    let mut fulfilled = requested.fulfil(Some(persisted), received, correlation_id);
    let status = acks::combined_status(&fulfilled);
    if !requested.response_required {
        if (200..300).contains(&status) {
            return None;
        }
        fulfilled = acks::minimized(&fulfilled);
    }
    let mut envelope = Envelope::new(topic.with(Criterion::Acks, "").to_string(), "/");
    envelope.headers = answer_headers(&command.headers);
    envelope.value = Some(acks::protocol_value(&fulfilled));
    envelope.status = Some(status);
    Some(envelope)
}

fn response_envelope(topic: &Topic, command: &Envelope, response: Response) -> Envelope {
    let mut envelope = Envelope::new(topic.to_string(), command.path.clone());
    envelope.headers = answer_headers(&command.headers);
    if response.value.is_some() {
        envelope.headers.insert("content-type".into(), "application/json".into());
    }
    if let Some(etag) = response.etag {
        envelope.headers.insert("etag".into(), etag.as_str().into());
    }
    if let Some(metadata) = response.metadata {
        envelope.headers.insert(DITTO_METADATA.into(), metadata);
    }
    envelope.value = response.value;
    envelope.status = Some(response.status);
    envelope
}

/// A failure as Ditto's error response: on the entity's `…/errors` topic
/// (`unknown/unknown/things/twin/errors` when the topic could not be
/// read, as Ditto's `AbstractErrorResponse.FALLBACK_ID`), at `/`, with
/// the error as the value.
pub fn error_response(
    topic: Option<&Topic>,
    request: &Map<String, Value>,
    error: &DittoError,
) -> Envelope {
    let topic = match topic {
        Some(topic) => topic.with(Criterion::Errors, "").to_string(),
        None => "unknown/unknown/things/twin/errors".to_owned(),
    };
    let mut envelope = Envelope::new(topic, "/");
    envelope.headers = answer_headers(request);
    envelope.value = Some(error.to_json());
    envelope.status = Some(error.status);
    envelope
}

/// Ditto's `ConnectionSignalIdEnforcementFailedException`: a device held
/// to its own thing sent a command for another entity.
pub fn id_enforcement_failed(entity_id: &str) -> DittoError {
    DittoError::new(
        400,
        "connectivity:connection.id.enforcement.failed",
        format!("The configured filters could not be matched against the given target with ID '{entity_id}'."),
        "Either modify the configured filter or ensure that the message is sent via the correct ID."
            .to_string(),
    )
}

/// Ditto's `UnknownPathException`.
pub(crate) fn unknown_path(path: &str) -> DittoError {
    DittoError::new(
        400,
        "protocoladapter:unknown.path",
        format!("The path '{path}' does not correspond to any known command, response or event."),
        "Check if the path is correct.".to_string(),
    )
}

/// Ditto's `UnknownCommandException`.
pub(crate) fn unknown_command(topic: &str) -> DittoError {
    DittoError::new(
        400,
        "protocoladapter:unknown.command",
        format!("The command '{topic}' is not supported by the adapter."),
        "Check if the command is correct.".to_string(),
    )
}

/// A modify or create without the `value` it needs.
fn missing_value(topic: &str) -> DittoError {
    DittoError::json_field_missing(format!(
        "JSON did not include required </value> field! (topic '{topic}')"
    ))
}
