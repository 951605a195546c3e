//! The placeholders of what a source reads: `{{ header:NAME }}` (and, on
//! MQTT, `{{ source:address }}`, the topic a message came on) in an
//! enforcement's `input`, a `headerMapping` and a reply target's
//! `address`; `{{ entity:id }}` and
//! `{{ thing:id }}` (with `:namespace` and `:name`) in its `filters`, as
//! Ditto resolves them for an inbound message. Parsed once when the
//! connection is stored, so a placeholder Ferry cannot fill is refused
//! then rather than compared as text later.

use super::template::{pieces, Piece};
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
/// `{{ thing:namespace }}:{{ thing:name }}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Header(String),
    SourceAddress,
    Entity(EntityPart),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntityPart {
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

impl SourceTemplate {
    /// `field` names the setting in the error (`enforcement.input`).
    pub fn parse(text: &str, holds: Holds, field: &str) -> Result<SourceTemplate, DittoError> {
        let mut parts = Vec::new();
        for piece in pieces(text, field)? {
            let name = match piece {
                Piece::Text(literal) => {
                    parts.push(Part::Text(literal.to_owned()));
                    continue;
                }
                Piece::Placeholder(name) => name,
            };
            let part = match (holds, name.split_once(':')) {
                (Holds::Headers, Some(("header", header))) if !header.is_empty() => {
                    // Ditto compares header names case-insensitively.
                    Part::Header(header.to_ascii_lowercase())
                }
                (Holds::Headers, Some(("source", "address"))) => Part::SourceAddress,
                (Holds::Entity, Some(("entity" | "thing" | "policy", part))) => {
                    Part::Entity(match part {
                        "id" => EntityPart::Id,
                        "namespace" => EntityPart::Namespace,
                        "name" => EntityPart::Name,
                        _ => return Err(unsupported(name, text, field, holds)),
                    })
                }
                _ => return Err(unsupported(name, text, field, holds)),
            };
            parts.push(part);
        }
        Ok(SourceTemplate { parts })
    }

    /// The text with what the message carries filled in; `None` when a
    /// header it names is missing (Ditto's unresolved placeholder).
    pub fn with_received(&self, received: Received<'_>) -> Option<String> {
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Text(literal) => text.push_str(literal),
                Part::Header(name) => {
                    text.push_str(received.headers.get(name).and_then(Value::as_str)?)
                }
                Part::SourceAddress => text.push_str(received.address?),
                Part::Entity(_) => return None,
            }
        }
        Some(text)
    }

    /// The text with the command's entity id (`namespace:name`) filled in.
    pub fn with_entity(&self, entity_id: &str) -> Option<String> {
        let (namespace, name) = entity_id.split_once(':')?;
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Text(literal) => text.push_str(literal),
                Part::Entity(EntityPart::Id) => text.push_str(entity_id),
                Part::Entity(EntityPart::Namespace) => text.push_str(namespace),
                Part::Entity(EntityPart::Name) => text.push_str(name),
                Part::Header(_) | Part::SourceAddress => return None,
            }
        }
        Some(text)
    }
}

fn unsupported(name: &str, text: &str, field: &str, holds: Holds) -> DittoError {
    let supported = match holds {
        Holds::Headers => "header:<name> or source:address",
        Holds::Entity => "entity:id, thing:id, policy:id (and :namespace, :name)",
    };
    DittoError::connection_invalid(format!(
        "The placeholder '{name}' of the {field} '{text}' is not supported: use {supported}."
    ))
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
