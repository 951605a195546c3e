//! A target address's path with Ditto's placeholders (`/{{ thing:id }}`),
//! parsed once when the connection is stored and filled in per event.
//! Placeholders Ferry cannot fill are refused then, not sent as text.
//! Each placeholder may pass through Ditto's functions (`pipeline.rs`).

use super::pipeline::{self, Element, Part, TemplateError};
use crate::error::DittoError;
use crate::protocol::{Envelope, ORIGINATOR};
use crate::rql::{Placeholders, TimePlaceholders};
use serde_json::Value;
use std::time::SystemTime;

/// A piece of a template's text: literal text, or the trimmed name
/// between `{{` and `}}`.
pub(super) enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// `text` cut into its pieces, in order; `field` names the setting in the
/// error for an unclosed `{{`.
pub(super) fn pieces<'a>(text: &'a str, field: &str) -> Result<Vec<Piece<'a>>, DittoError> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            pieces.push(Piece::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| {
            DittoError::connection_invalid(format!("The {field} '{text}' has an unclosed '{{{{'."))
        })?;
        pieces.push(Piece::Placeholder(after[..end].trim()));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Ok(pieces)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressTemplate {
    text: String,
    parts: Vec<Part<Placeholder>>,
}

/// The placeholders of a target's address or header, Ditto's for
/// connections, filled from the signal sent.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placeholder {
    /// One of the signal's Ditto headers (`correlation-id`).
    Header(String),
    /// `thing:id`, or `entity:id`, which is the same for a thing's signal
    /// and the policy's id for a policy's.
    EntityId,
    EntityNamespace,
    EntityName,
    /// The feature the signal is about: the one in its path, or, for a
    /// change of the whole thing or of all its features, each feature in
    /// its value.
    FeatureId,
    /// `request:subjectId`: who caused the signal (`ditto-originator`).
    RequestSubject,
    TopicFull,
    TopicNamespace,
    TopicEntityName,
    TopicGroup,
    TopicChannel,
    TopicCriterion,
    /// None for a message, whose last level is its subject.
    TopicAction,
    /// A message's subject; none for other signals.
    TopicSubject,
    TopicActionSubject,
    /// `thing`, `policy` or `message`.
    ResourceType,
    ResourcePath,
    TimeNow,
    TimeNowEpochMillis,
}

/// The supported placeholders, for the error that refuses another.
const SUPPORTED: &str = "header:<name>, entity:id|namespace|name, thing:id|namespace|name, \
    feature:id, request:subjectId, \
    topic:full|namespace|entityName|group|channel|criterion|action|subject|action-subject, \
    resource:type|path or time:now|now_epoch_millis";

impl AddressTemplate {
    /// `field` names the setting in the error (`address`, `headerMapping`).
    pub fn parse(text: &str, field: &str) -> Result<AddressTemplate, DittoError> {
        let parts = pipeline::parse_template(text, field, &Placeholder::parse).map_err(|error| match error {
            TemplateError::Unclosed(error) => error,
            TemplateError::Placeholder(name) => DittoError::connection_invalid(format!(
                "The placeholder '{name}' of the {field} '{text}' is not supported: use {SUPPORTED}."
            )),
            TemplateError::Invalid(why) => DittoError::connection_invalid(format!(
                "The {field} '{text}' is not a valid expression: {why}."
            )),
        })?;
        Ok(AddressTemplate { text: text.to_owned(), parts })
    }

    /// The text for `signal`, placeholders filled in as they are (an MQTT
    /// topic's levels need no encoding; the caller checks the result).
    pub fn render_raw(&self, signal: &Envelope) -> Result<String, Unresolved> {
        self.rendered(signal, |text, value| text.push_str(value))
    }

    /// The path for `signal`, each placeholder's value percent-encoded as
    /// a path segment needs.
    pub fn render(&self, signal: &Envelope) -> Result<String, Unresolved> {
        self.rendered(signal, encode_segment)
    }

    fn rendered(
        &self,
        signal: &Envelope,
        push: impl FnMut(&mut String, &str),
    ) -> Result<String, Unresolved> {
        let resolve = |placeholder: &Placeholder| placeholder.value(signal);
        pipeline::render(&self.parts, &resolve, push).into_first().ok_or_else(|| Unresolved {
            why: format!("'{}' gives nothing for {}", self.text, signal.topic),
        })
    }
}

/// The most headers one target's `headerMapping` may set: a handful is
/// what any receiver needs.
const MAX_TARGET_HEADERS: usize = 32;

/// Headers a mapping may not set: the transport's own framing.
const FRAMING_HEADERS: [&str; 4] = ["host", "content-length", "transfer-encoding", "connection"];

/// A target's `headerMapping`: each header's value a template over the
/// signal sent (`{{ header:correlation-id }}`, `{{ thing:id }}`), set on
/// the HTTP request or Kafka record that carries it.
#[derive(Debug, Default)]
pub struct HeaderMapping {
    headers: Vec<(String, AddressTemplate)>,
}

impl HeaderMapping {
    /// The target's `headerMapping`; names in lower case, each a valid
    /// HTTP header name other than the framing ones.
    pub fn parse(target: &Value) -> Result<HeaderMapping, DittoError> {
        let invalid = |why: String| DittoError::connection_invalid(why);
        let mapping = match target.get("headerMapping") {
            None | Some(Value::Null) => return Ok(HeaderMapping::default()),
            Some(Value::Object(mapping)) if mapping.len() <= MAX_TARGET_HEADERS => mapping,
            Some(_) => {
                return Err(invalid(format!(
                    "A target's headerMapping is an object of at most {MAX_TARGET_HEADERS} headers."
                )))
            }
        };
        let headers = mapping
            .iter()
            .map(|(name, value)| {
                let name = name.to_ascii_lowercase();
                if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err()
                    || FRAMING_HEADERS.contains(&name.as_str())
                {
                    return Err(invalid(format!(
                        "The headerMapping header '{name}' is not a header a target may set."
                    )));
                }
                let value = value
                    .as_str()
                    .ok_or_else(|| invalid("A headerMapping's values are strings.".to_owned()))?;
                Ok((name, AddressTemplate::parse(value, "headerMapping")?))
            })
            .collect::<Result<_, _>>()?;
        Ok(HeaderMapping { headers })
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// The headers for `signal`; one whose template gives nothing is
    /// left out, as Ditto leaves out an unresolved mapped header.
    pub fn for_signal(&self, signal: &Envelope) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter_map(|(name, value)| Some((name.clone(), value.render_raw(signal).ok()?)))
            .collect()
    }
}

/// An address whose functions left nothing (`fn:filter` that did not
/// hold, `fn:delete()`): the event is not sent to that target, as Ditto
/// drops it there.
#[derive(Debug)]
pub struct Unresolved {
    pub why: String,
}

impl Placeholder {
    fn parse(name: &str) -> Option<Placeholder> {
        if let Some(header) = name.strip_prefix("header:").filter(|header| !header.is_empty()) {
            return Some(Placeholder::Header(header.to_ascii_lowercase()));
        }
        Some(match name {
            "thing:id" | "entity:id" => Placeholder::EntityId,
            "thing:namespace" | "entity:namespace" => Placeholder::EntityNamespace,
            "thing:name" | "entity:name" => Placeholder::EntityName,
            "feature:id" => Placeholder::FeatureId,
            "request:subjectId" => Placeholder::RequestSubject,
            "topic:full" => Placeholder::TopicFull,
            "topic:namespace" => Placeholder::TopicNamespace,
            "topic:entityName" => Placeholder::TopicEntityName,
            "topic:group" => Placeholder::TopicGroup,
            "topic:channel" => Placeholder::TopicChannel,
            "topic:criterion" => Placeholder::TopicCriterion,
            "topic:action" => Placeholder::TopicAction,
            "topic:subject" => Placeholder::TopicSubject,
            "topic:action-subject" => Placeholder::TopicActionSubject,
            "resource:type" => Placeholder::ResourceType,
            "resource:path" => Placeholder::ResourcePath,
            "time:now" => Placeholder::TimeNow,
            "time:now_epoch_millis" => Placeholder::TimeNowEpochMillis,
            _ => return None,
        })
    }

    fn value(&self, signal: &Envelope) -> Element {
        let topic = Levels::of(&signal.topic);
        let message = topic.criterion == "messages";
        let present = |level: &str| Element::from_option(Some(level).filter(|l| !l.is_empty()));
        match self {
            Placeholder::Header(name) => Element::from_option(signal.header(name)),
            Placeholder::EntityId => Element::one(format!("{}:{}", topic.namespace, topic.name)),
            Placeholder::EntityNamespace | Placeholder::TopicNamespace => present(topic.namespace),
            Placeholder::EntityName | Placeholder::TopicEntityName => present(topic.name),
            Placeholder::FeatureId => feature_ids(signal),
            Placeholder::RequestSubject => Element::from_option(signal.header(ORIGINATOR)),
            Placeholder::TopicFull => Element::one(signal.topic.as_str()),
            Placeholder::TopicGroup => present(topic.group),
            Placeholder::TopicChannel => Element::from_option(topic.channel),
            Placeholder::TopicCriterion => present(topic.criterion),
            Placeholder::TopicAction if message => Element::Unresolved,
            Placeholder::TopicSubject if !message => Element::Unresolved,
            Placeholder::TopicAction
            | Placeholder::TopicSubject
            | Placeholder::TopicActionSubject => present(topic.last),
            Placeholder::ResourceType => Element::one(match topic.group {
                "policies" => "policy",
                _ if message => "message",
                _ => "thing",
            }),
            Placeholder::ResourcePath => Element::one(signal.path.as_str()),
            Placeholder::TimeNow => time("now"),
            Placeholder::TimeNowEpochMillis => time("now_epoch_millis"),
        }
    }
}

/// `time:{name}` now, written as in RQL filters.
fn time(name: &str) -> Element {
    Element::from_option(TimePlaceholders::at(SystemTime::now()).resolve("time", name))
}

/// A signal's topic cut into Ditto's levels, without copying: policies
/// have no channel, and a message's subject is the rest, slashes and all.
struct Levels<'a> {
    namespace: &'a str,
    name: &'a str,
    group: &'a str,
    channel: Option<&'a str>,
    criterion: &'a str,
    /// The action, or a message's subject.
    last: &'a str,
}

impl<'a> Levels<'a> {
    fn of(topic: &'a str) -> Levels<'a> {
        let mut levels = topic.splitn(4, '/');
        let mut next = || levels.next().unwrap_or_default();
        let (namespace, name, group, rest) = (next(), next(), next(), next());
        let (channel, rest) = match group {
            "policies" => (None, rest),
            _ => match rest.split_once('/') {
                Some((channel, rest)) => (Some(channel), rest),
                None => (Some(rest), ""),
            },
        };
        let (criterion, last) = rest.split_once('/').unwrap_or((rest, ""));
        Levels { namespace, name, group, channel, criterion, last }
    }
}

/// Ditto's `feature:id`: the feature in the signal's path
/// (`/features/lamp/properties/on`, `/features/lamp/inbox/messages/x`);
/// for the whole thing or all of its features, every feature in the
/// value, in its order.
fn feature_ids(signal: &Envelope) -> Element {
    let mut segments = signal.path.split('/').filter(|segment| !segment.is_empty());
    let features = match (segments.next(), segments.next()) {
        (Some("features"), Some(feature)) => return Element::one(feature),
        (Some("features"), None) => signal.value.as_ref(),
        (None, _) => signal.value.as_ref().and_then(|thing| thing.get("features")),
        _ => None,
    };
    match features.and_then(Value::as_object) {
        Some(features) => Element::of(features.keys().cloned().collect()),
        None => Element::Unresolved,
    }
}

/// Appends `value` as one path segment: unreserved characters and the
/// sub-delimiters and `:` and `@` RFC 3986 allows in a segment stay, the
/// rest (a `/` of `topic:full` included) is `%XX`.
fn encode_segment(path: &mut String, value: &str) {
    for byte in value.bytes() {
        let keep = byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
            );
        if keep {
            path.push(byte as char);
        } else {
            path.push_str(&format!("%{byte:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_from_the_events_topic() {
        let event = Envelope::new("org.acme/lamp 1/things/twin/events/modified", "/");
        let template =
            AddressTemplate::parse("/{{ thing:id }}/{{topic:action}}/x", "address").unwrap();
        assert_eq!(template.render(&event).unwrap(), "/org.acme:lamp%201/modified/x");
        let full = AddressTemplate::parse("/e/{{ topic:full }}", "address").unwrap();
        assert_eq!(
            full.render(&event).unwrap(),
            "/e/org.acme%2Flamp%201%2Fthings%2Ftwin%2Fevents%2Fmodified"
        );
        assert_eq!(
            AddressTemplate::parse("/plain", "address").unwrap().render(&event).unwrap(),
            "/plain"
        );
        let mut with_header = event.clone();
        with_header.headers.insert("correlation-id".into(), "c/1".into());
        let header = AddressTemplate::parse("/{{ header:Correlation-Id }}", "address").unwrap();
        assert_eq!(header.render(&with_header).unwrap(), "/c%2F1");
        assert!(header.render(&event).is_err(), "a missing header gives nothing");
    }

    #[test]
    fn every_placeholder_ditto_offers_a_connection_is_filled() {
        let render = |template: &str, signal: &Envelope| {
            AddressTemplate::parse(template, "address").unwrap().render_raw(signal).ok()
        };
        let mut event = Envelope::new(
            "org.acme/lamp/things/twin/events/modified",
            "/features/light/properties/on",
        );
        event.headers.insert(ORIGINATOR.into(), "nginx:ditto".into());
        let all = "{{entity:id}} {{entity:namespace}} {{entity:name}} {{feature:id}} \
                   {{request:subjectId}} {{topic:channel}} {{topic:criterion}} \
                   {{topic:action-subject}} {{resource:type}} {{resource:path}}";
        assert_eq!(
            render(all, &event).unwrap(),
            "org.acme:lamp org.acme lamp light nginx:ditto twin events modified thing \
             /features/light/properties/on"
        );
        assert_eq!(render("{{ topic:subject }}", &event), None, "an event has no subject");

        let message = Envelope::new(
            "org.acme/lamp/things/live/messages/switch/on",
            "/features/light/inbox/messages/switch/on",
        );
        assert_eq!(
            render(
                "{{topic:subject}} {{topic:action-subject}} {{resource:type}} {{feature:id}}",
                &message
            )
            .unwrap(),
            "switch/on switch/on message light"
        );
        assert_eq!(render("{{ topic:action }}", &message), None, "a message has no action");
        assert_eq!(render("{{ request:subjectId }}", &message), None, "no originator header");

        let mut created = Envelope::new("org.acme/lamp/things/twin/events/created", "/");
        created.value = Some(serde_json::json!({"features": {"light": {}, "fan": {}}}));
        assert_eq!(render("{{ feature:id }}", &created).unwrap(), "light", "the first of them");
        created.value = Some(serde_json::json!({"attributes": {}}));
        assert_eq!(render("{{ feature:id }}", &created), None);

        let announcement =
            Envelope::new("org.acme/lamp-policy/policies/announcements/subjectDeletion", "/");
        assert_eq!(
            render("{{entity:id}} {{topic:channel | fn:default('none')}} {{topic:criterion}} {{resource:type}}", &announcement)
                .unwrap(),
            "org.acme:lamp-policy none announcements policy"
        );

        let millis: u128 = render("{{ time:now_epoch_millis }}", &event).unwrap().parse().unwrap();
        let now = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        assert!(millis <= now && now - millis < 60_000, "{millis} against {now}");
        let iso = render("{{ time:now }}", &event).unwrap();
        assert!(iso.ends_with('Z') && iso.contains('T'), "{iso}");
    }

    #[test]
    fn functions_shape_or_withhold_the_address() {
        let event = Envelope::new("org.acme/Lamp 1/things/twin/events/modified", "/");
        let lower = AddressTemplate::parse("t/{{ thing:name | fn:lower() }}", "address").unwrap();
        assert_eq!(lower.render_raw(&event).unwrap(), "t/lamp 1");
        assert_eq!(lower.render(&event).unwrap(), "t/lamp%201", "encoded after the functions");
        let only_created = AddressTemplate::parse(
            "t/{{ thing:id | fn:filter(topic:action, 'eq', 'created') }}",
            "address",
        )
        .unwrap();
        let unresolved = only_created.render_raw(&event).unwrap_err();
        assert!(unresolved.why.contains("gives nothing"), "{}", unresolved.why);
        let created = Envelope::new("org.acme/Lamp 1/things/twin/events/created", "/");
        assert_eq!(only_created.render_raw(&created).unwrap(), "t/org.acme:Lamp 1");
    }

    #[test]
    fn unknown_or_unclosed_placeholders_are_refused() {
        for bad in ["/{{ policy:id }}", "/{{ thing:id ", "/{{ thing:id | fn:nope() }}"] {
            let error = AddressTemplate::parse(bad, "address").unwrap_err();
            assert_eq!(error.error, "connectivity:connection.configuration.invalid", "{bad}");
        }
    }
}
