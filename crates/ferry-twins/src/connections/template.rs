//! A target address's path with Ditto's placeholders (`/{{ thing:id }}`),
//! parsed once when the connection is stored and filled in per event.
//! Placeholders Ferry cannot fill are refused then, not sent as text.
//! Each placeholder may pass through Ditto's functions (`pipeline.rs`).

use super::pipeline::{self, Element, Part, TemplateError};
use crate::error::DittoError;

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

/// The placeholders of a twin event's target address (Ditto's `thing:`
/// and `topic:` placeholders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placeholder {
    ThingId,
    ThingNamespace,
    ThingName,
    TopicFull,
    TopicNamespace,
    TopicEntityName,
    TopicGroup,
    TopicChannel,
    TopicCriterion,
    TopicAction,
}

/// What the placeholders of one event stand for.
pub struct Event<'a> {
    /// `namespace/name/things/twin/events/modified`
    pub topic: &'a str,
}

impl AddressTemplate {
    pub fn parse(text: &str) -> Result<AddressTemplate, DittoError> {
        let parts = pipeline::parse_template(text, "address", &Placeholder::parse).map_err(|error| match error {
            TemplateError::Unclosed(error) => error,
            TemplateError::Placeholder(name) => DittoError::connection_invalid(format!(
                "The placeholder '{name}' of the address '{text}' is not supported: use thing:id, thing:namespace, thing:name or topic:full|namespace|entityName|group|channel|criterion|action."
            )),
            TemplateError::Invalid(why) => DittoError::connection_invalid(format!(
                "The address '{text}' is not a valid expression: {why}."
            )),
        })?;
        Ok(AddressTemplate { text: text.to_owned(), parts })
    }

    /// The text for `event`, placeholders filled in as they are (an MQTT
    /// topic's levels need no encoding; the caller checks the result).
    pub fn render_raw(&self, event: &Event<'_>) -> Result<String, Unresolved> {
        self.rendered(event, |text, value| text.push_str(value))
    }

    /// The path for `event`, each placeholder's value percent-encoded as
    /// a path segment needs.
    pub fn render(&self, event: &Event<'_>) -> Result<String, Unresolved> {
        self.rendered(event, encode_segment)
    }

    fn rendered(
        &self,
        event: &Event<'_>,
        push: impl FnMut(&mut String, &str),
    ) -> Result<String, Unresolved> {
        let resolve = |placeholder: &Placeholder| Element::one(placeholder.value(event.topic));
        pipeline::render(&self.parts, &resolve, push).into_first().ok_or_else(|| Unresolved {
            why: format!("the address '{}' gives nothing for {}", self.text, event.topic),
        })
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
        Some(match name {
            "thing:id" => Placeholder::ThingId,
            "thing:namespace" => Placeholder::ThingNamespace,
            "thing:name" => Placeholder::ThingName,
            "topic:full" => Placeholder::TopicFull,
            "topic:namespace" => Placeholder::TopicNamespace,
            "topic:entityName" => Placeholder::TopicEntityName,
            "topic:group" => Placeholder::TopicGroup,
            "topic:channel" => Placeholder::TopicChannel,
            "topic:criterion" => Placeholder::TopicCriterion,
            "topic:action" => Placeholder::TopicAction,
            _ => return None,
        })
    }

    fn value<'a>(self, topic: &'a str) -> std::borrow::Cow<'a, str> {
        let level = |index: usize| topic.split('/').nth(index).unwrap_or_default();
        match self {
            Placeholder::ThingId => format!("{}:{}", level(0), level(1)).into(),
            Placeholder::ThingNamespace | Placeholder::TopicNamespace => level(0).into(),
            Placeholder::ThingName | Placeholder::TopicEntityName => level(1).into(),
            Placeholder::TopicFull => topic.into(),
            Placeholder::TopicGroup => level(2).into(),
            Placeholder::TopicChannel => level(3).into(),
            Placeholder::TopicCriterion => level(4).into(),
            Placeholder::TopicAction => level(5).into(),
        }
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
        let event = Event { topic: "org.acme/lamp 1/things/twin/events/modified" };
        let template = AddressTemplate::parse("/{{ thing:id }}/{{topic:action}}/x").unwrap();
        assert_eq!(template.render(&event).unwrap(), "/org.acme:lamp%201/modified/x");
        let full = AddressTemplate::parse("/e/{{ topic:full }}").unwrap();
        assert_eq!(
            full.render(&event).unwrap(),
            "/e/org.acme%2Flamp%201%2Fthings%2Ftwin%2Fevents%2Fmodified"
        );
        assert_eq!(AddressTemplate::parse("/plain").unwrap().render(&event).unwrap(), "/plain");
    }

    #[test]
    fn functions_shape_or_withhold_the_address() {
        let event = Event { topic: "org.acme/Lamp 1/things/twin/events/modified" };
        let lower = AddressTemplate::parse("t/{{ thing:name | fn:lower() }}").unwrap();
        assert_eq!(lower.render_raw(&event).unwrap(), "t/lamp 1");
        assert_eq!(lower.render(&event).unwrap(), "t/lamp%201", "encoded after the functions");
        let only_created =
            AddressTemplate::parse("t/{{ thing:id | fn:filter(topic:action, 'eq', 'created') }}")
                .unwrap();
        let unresolved = only_created.render_raw(&event).unwrap_err();
        assert!(unresolved.why.contains("gives nothing"), "{}", unresolved.why);
        let created = Event { topic: "org.acme/Lamp 1/things/twin/events/created" };
        assert_eq!(only_created.render_raw(&created).unwrap(), "t/org.acme:Lamp 1");
    }

    #[test]
    fn unknown_or_unclosed_placeholders_are_refused() {
        for bad in ["/{{ header:device_id }}", "/{{ thing:id ", "/{{ thing:id | fn:nope() }}"] {
            let error = AddressTemplate::parse(bad).unwrap_err();
            assert_eq!(error.error, "connectivity:connection.configuration.invalid", "{bad}");
        }
    }
}
