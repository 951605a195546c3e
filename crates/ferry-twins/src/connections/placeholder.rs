//! The placeholders of what a source reads: `{{ header:NAME }}` in an
//! enforcement's `input` and a `headerMapping`, `{{ entity:id }}` and
//! `{{ thing:id }}` (with `:namespace` and `:name`) in its `filters`, as
//! Ditto resolves them for an inbound message. Parsed once when the
//! connection is stored, so a placeholder Ferry cannot fill is refused
//! then rather than compared as text later.

use super::template::{pieces, Piece};
use crate::error::DittoError;

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

    /// The text with a message's `header` values filled in; `None` when a
    /// header it names is missing (Ditto's unresolved placeholder).
    pub fn with_headers<'a>(&self, header: impl Fn(&str) -> Option<&'a str>) -> Option<String> {
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Text(literal) => text.push_str(literal),
                Part::Header(name) => text.push_str(header(name)?),
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
                Part::Header(_) => return None,
            }
        }
        Some(text)
    }
}

fn unsupported(name: &str, text: &str, field: &str, holds: Holds) -> DittoError {
    let supported = match holds {
        Holds::Headers => "header:<name>",
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
    fn headers_and_entities_are_filled_in() {
        let input =
            SourceTemplate::parse("{{ header:Device_Id }}", Holds::Headers, "input").unwrap();
        let header = |name: &str| (name == "device_id").then_some("org.acme:lamp-1");
        assert_eq!(input.with_headers(header).as_deref(), Some("org.acme:lamp-1"));
        assert_eq!(input.with_headers(|_| None), None);
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
        ] {
            let error = SourceTemplate::parse(text, holds, "filter").unwrap_err();
            assert_eq!(error.error, "connectivity:connection.configuration.invalid", "{text}");
        }
    }
}
