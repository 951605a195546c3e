//! The placeholders of what a source reads: `{{ header:NAME }}` (and, on
//! MQTT, `{{ source:address }}`, the topic a message came on) in an
//! enforcement's `input`, a `headerMapping` and a reply target's
//! `address`; `{{ entity:id }}` and
//! `{{ thing:id }}` (with `:namespace` and `:name`) in its `filters`, as
//! Ditto resolves them for an inbound message. Parsed once when the
//! connection is stored, so a placeholder Ferry cannot fill is refused
//! then rather than compared as text later. Each placeholder may pass
//! through Ditto's functions (`pipeline.rs`).

use super::pipeline::{self, Element, Expression, Part, TemplateError};
use crate::error::DittoError;
use serde_json::{Map, Value};

/// What a source's placeholders are filled from.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The message's transport headers, names in lower case.
    pub headers: &'a Map<String, Value>,
    /// The topic an MQTT message came on; `None` on Kafka, where Ditto
    /// has no `source:address`.
    pub address: Option<&'a str>,
}

/// Text with placeholders, e.g. `{{ header:device_id }}` or
/// `{{ thing:namespace }}:{{ thing:name }}`, each possibly passed through
/// Ditto's functions (`{{ header:id | fn:substring-after(':') }}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTemplate {
    parts: Vec<Part<Placeholder>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placeholder {
    Header(String),
    SourceAddress,
    Entity(EntityPart),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntityPart {
    Id,
    Namespace,
    Name,
}

/// Which placeholders a template may hold: the message's headers (for
/// what is read from it) or the command's entity (for what it is
/// compared against).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    Headers,
    Entity,
}

impl Holds {
    /// The placeholder `name`, when a template of this kind can fill it.
    pub(super) fn placeholder(self, name: &str) -> Option<Placeholder> {
        match (self, name.split_once(':')) {
            (Holds::Headers, Some(("header", header))) if !header.is_empty() => {
                // Ditto compares header names case-insensitively.
                Some(Placeholder::Header(header.to_ascii_lowercase()))
            }
            (Holds::Headers, Some(("source", "address"))) => Some(Placeholder::SourceAddress),
            (Holds::Entity, Some(("entity" | "thing" | "policy", part))) => {
                Some(Placeholder::Entity(match part {
                    "id" => EntityPart::Id,
                    "namespace" => EntityPart::Namespace,
                    "name" => EntityPart::Name,
                    _ => return None,
                }))
            }
            _ => None,
        }
    }
}

impl Received<'_> {
    /// What `placeholder` stands for in this message.
    pub(super) fn resolve(&self, placeholder: &Placeholder) -> Element {
        match placeholder {
            Placeholder::Header(name) => {
                Element::from_option(self.headers.get(name).and_then(Value::as_str))
            }
            Placeholder::SourceAddress => Element::from_option(self.address),
            Placeholder::Entity(_) => Element::Unresolved,
        }
    }
}

impl SourceTemplate {
    /// `field` names the setting in the error (`enforcement.input`).
    pub fn parse(text: &str, holds: Holds, field: &str) -> Result<SourceTemplate, DittoError> {
        let parts = pipeline::parse_template(text, field, &|name: &str| holds.placeholder(name))
            .map_err(|error| invalid(error, text, field, holds))?;
        Ok(SourceTemplate { parts })
    }

    /// The text with what the message carries filled in; `None` when a
    /// header it names is missing (Ditto's unresolved placeholder) or a
    /// function removed it.
    pub fn with_received(&self, received: Received<'_>) -> Option<String> {
        pipeline::render(&self.parts, &|placeholder| received.resolve(placeholder), push_str)
            .into_first()
    }

    /// The text with the command's entity id (`namespace:name`) filled in.
    pub fn with_entity(&self, entity_id: &str) -> Option<String> {
        let (namespace, name) = entity_id.split_once(':')?;
        let resolve = |placeholder: &Placeholder| match placeholder {
            Placeholder::Entity(EntityPart::Id) => Element::one(entity_id),
            Placeholder::Entity(EntityPart::Namespace) => Element::one(namespace),
            Placeholder::Entity(EntityPart::Name) => Element::one(name),
            Placeholder::Header(_) | Placeholder::SourceAddress => Element::Unresolved,
        };
        pipeline::render(&self.parts, &resolve, push_str).into_first()
    }
}

/// A source's `acknowledgementRequests.filter`: functions (no placeholder
/// of its own to start from) that decide per message, from its headers,
/// which acknowledgements its command requests, as Ditto's
/// `RequestedAcksFilter` runs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcksFilter {
    functions: Expression<Placeholder>,
}

impl AcksFilter {
    /// `named` names the source in the error.
    pub fn parse(text: &str, named: &str) -> Result<AcksFilter, DittoError> {
        let field = format!("acknowledgementRequests filter of the source '{named}'");
        let functions = Expression::parse(text, &|name: &str| Holds::Headers.placeholder(name))
            .map_err(|error| invalid(TemplateError::from(error), text, &field, Holds::Headers))?;
        if !functions.is_functions_only() {
            return Err(DittoError::connection_invalid(format!(
                "The {field} '{text}' must start with a function, e.g. fn:filter(header:qos,'ne','0')."
            )));
        }
        Ok(AcksFilter { functions })
    }

    /// The `requested-acks` a command read from `received` goes on with,
    /// given the one it has (`None` when it has none):
    /// - the filter run on what it has (`[]` when nothing); what it gives
    ///   is the new value, and nothing means that none are requested;
    /// - but a command that had none and passes keeps having none, unless
    ///   the filter alone gives a value (`fn:default('["…"]')`).
    pub fn requested(&self, current: Option<&str>, received: Received<'_>) -> Option<String> {
        let resolve = |placeholder: &Placeholder| received.resolve(placeholder);
        let start = Element::one(current.unwrap_or("[]"));
        let filtered = self.functions.continue_from(start, &resolve).into_first();
        match (filtered, current) {
            (None, _) => Some("[]".to_owned()),
            (Some(filtered), Some(_)) => Some(filtered),
            (Some(_), None) => self.functions.evaluate(&resolve).into_first(),
        }
    }
}

fn push_str(text: &mut String, value: &str) {
    text.push_str(value);
}

/// The error for a template refused, naming its setting.
pub(super) fn invalid(error: TemplateError, text: &str, field: &str, holds: Holds) -> DittoError {
    match error {
        TemplateError::Unclosed(error) => error,
        TemplateError::Placeholder(name) => {
            let supported = match holds {
                Holds::Headers => "header:<name> or source:address",
                Holds::Entity => "entity:id, thing:id, policy:id (and :namespace, :name)",
            };
            DittoError::connection_invalid(format!(
                "The placeholder '{name}' of the {field} '{text}' is not supported: use {supported}."
            ))
        }
        TemplateError::Invalid(why) => DittoError::connection_invalid(format!(
            "The {field} '{text}' is not a valid expression: {why}."
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_addresses_and_entities_are_filled_in() {
        let input =
            SourceTemplate::parse("{{ header:Device_Id }}", Holds::Headers, "input").unwrap();
        let mut headers = Map::new();
        headers.insert("device_id".into(), "org.acme:lamp-1".into());
        let received = Received { headers: &headers, address: Some("telemetry/org.acme:lamp-2") };
        assert_eq!(input.with_received(received).as_deref(), Some("org.acme:lamp-1"));
        let none = Received { headers: &Map::new(), address: None };
        assert_eq!(input.with_received(none), None);
        let address =
            SourceTemplate::parse("{{ source:address }}", Holds::Headers, "input").unwrap();
        assert_eq!(address.with_received(received).as_deref(), Some("telemetry/org.acme:lamp-2"));
        assert_eq!(address.with_received(none), None, "no address on Kafka");
        let filter =
            SourceTemplate::parse("{{thing:namespace}}:{{ entity:name }}", Holds::Entity, "filter")
                .unwrap();
        assert_eq!(filter.with_entity("org.acme:lamp-1").as_deref(), Some("org.acme:lamp-1"));
        assert_eq!(filter.with_entity("no-namespace"), None);
    }

    #[test]
    fn functions_transform_what_is_filled_in() {
        let input = SourceTemplate::parse(
            "{{ source:address | fn:substring-after('/') | fn:default(header:id) }}",
            Holds::Headers,
            "input",
        )
        .unwrap();
        let mut headers = Map::new();
        headers.insert("id".into(), "org.acme:from-header".into());
        let on = |address| Received { headers: &headers, address };
        assert_eq!(
            input.with_received(on(Some("t/org.acme:lamp"))).as_deref(),
            Some("org.acme:lamp")
        );
        assert_eq!(
            input.with_received(on(Some("no-slash"))).as_deref(),
            Some("org.acme:from-header")
        );
        let filter =
            SourceTemplate::parse("{{ thing:name | fn:upper() }}", Holds::Entity, "filter")
                .unwrap();
        assert_eq!(filter.with_entity("org.acme:lamp").as_deref(), Some("LAMP"));
    }

    /// Ditto's own cases for its `RequestedAcksFilter`.
    #[test]
    fn an_acknowledgement_filter_sets_what_a_command_requests() {
        let filter = |text: &str| AcksFilter::parse(text, "s").unwrap();
        let no_headers = Map::new();
        let plain = Received { headers: &no_headers, address: None };
        let passes = filter("fn:filter('2+2','ne','5')");
        assert_eq!(passes.requested(None, plain), None, "nothing requested stays so");
        assert_eq!(passes.requested(Some("[\"c:a\"]"), plain).as_deref(), Some("[\"c:a\"]"));
        let trips = filter("fn:filter('2+2','eq','5')");
        assert_eq!(trips.requested(None, plain).as_deref(), Some("[]"));
        let default = filter("fn:default('[\"twin-persisted\"]')");
        assert_eq!(default.requested(None, plain).as_deref(), Some("[\"twin-persisted\"]"));
        let replaced = filter("fn:filter('2+2','eq','5')|fn:default('[\"custom\"]')");
        assert_eq!(
            replaced.requested(Some("[\"twin-persisted\"]"), plain).as_deref(),
            Some("[\"custom\"]")
        );
        let mut headers = Map::new();
        headers.insert("qos".into(), "0".into());
        let at_qos_0 = Received { headers: &headers, address: None };
        let by_qos = filter("fn:filter(header:qos,'ne','0')");
        assert_eq!(by_qos.requested(None, at_qos_0).as_deref(), Some("[]"));
        assert_eq!(by_qos.requested(Some("[\"c:a\"]"), plain).as_deref(), Some("[\"c:a\"]"));
        for refused in
            ["fn:filter('2','+','2','eq','5')", "header:qos", "fn:filter(thing:id,'eq','x')"]
        {
            let error = AcksFilter::parse(refused, "s").unwrap_err();
            assert_eq!(error.error, "connectivity:connection.configuration.invalid", "{refused}");
        }
    }

    #[test]
    fn what_cannot_be_filled_in_is_refused() {
        for (text, holds) in [
            ("{{ entity:id }}", Holds::Headers),
            ("{{ header:x }}", Holds::Entity),
            ("{{ thing:revision }}", Holds::Entity),
            ("{{ header: }}", Holds::Headers),
            ("{{ header:x", Holds::Headers),
            ("{{ source:address }}", Holds::Entity),
            ("{{ source:qos }}", Holds::Headers),
        ] {
            let error = SourceTemplate::parse(text, holds, "filter").unwrap_err();
            assert_eq!(error.error, "connectivity:connection.configuration.invalid", "{text}");
        }
    }
}
