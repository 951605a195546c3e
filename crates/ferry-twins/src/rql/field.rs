//! The properties an RQL text may name, classified as Ditto's
//! `ThingsFieldExpressionFactoryImpl` does, so that the evaluator and the
//! stores' SQL translation meet only paths that Ditto would accept.

use super::error::{ErrorKind, RqlError};
use crate::pointer::JsonPointer;
use std::fmt;

/// A property of a thing, or a placeholder standing for one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    kind: FieldKind,
    /// The path from the thing's root (`/attributes/a/b`); the root for a
    /// placeholder.
    pointer: JsonPointer,
}

/// Which part of a thing a [`Field`] addresses; the store maps each to
/// its columns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// One of Ditto's top-level fields: `thingId`, `_namespace`,
    /// `policyId`, `_revision`, `_created`, `_modified`, `definition`,
    /// `_metadata`.
    Simple,
    /// `attributes/…`: the pointer's levels after the first.
    Attribute,
    /// `_metadata/…`.
    Metadata,
    /// `features/<id>…`; `id` is `*` for "any feature".
    Feature { id: String, part: FeaturePart },
    /// `topic:action` and the like, for event filters whose scope
    /// allows them.
    Placeholder { prefix: String, name: String },
}

/// The part of a feature a field addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeaturePart {
    /// `features/x` (only in `exists`/`empty`).
    Whole,
    /// `features/x/definition`.
    Definition,
    /// `features/x/properties` (only in `exists`/`empty`).
    Properties,
    /// `features/x/desiredProperties` (only in `exists`/`empty`).
    DesiredProperties,
    /// `features/x/properties/…`.
    Property,
    /// `features/x/desiredProperties/…`.
    DesiredProperty,
}

/// Where a field is used: Ditto accepts different fields in a comparison,
/// in `exists`/`empty` and in `sort` (`filterBy`, `existsBy`, `sortBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Usage {
    Filter,
    Exists,
    Sort,
}

/// Which placeholders may stand as properties. Ditto's search and its
/// `condition=` accept none; its event filters accept the names of the
/// placeholders the gateway registers (`topic:action`, `resource:path`, …),
/// which the caller lists as `prefix:name`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scope<'a> {
    pub placeholder_fields: &'a [&'a str],
}

impl Scope<'static> {
    /// Search filters and `condition=`: things' own fields only.
    pub const THINGS: Scope<'static> = Scope { placeholder_fields: &[] };
}

/// Ditto's simple field mappings (`ModelBasedThingsFieldExpressionFactory`).
const SIMPLE_FIELDS: [&str; 8] = [
    "thingId",
    "_namespace",
    "policyId",
    "_revision",
    "_created",
    "_modified",
    "definition",
    "_metadata",
];

/// The wildcard feature id, which Ditto's search expands to every feature.
pub const ANY_FEATURE: &str = "*";

impl Field {
    pub fn kind(&self) -> &FieldKind {
        &self.kind
    }

    /// The path from the thing's root; for a wildcard feature, its second
    /// level is `*`.
    pub fn pointer(&self) -> &JsonPointer {
        &self.pointer
    }

    /// Whether this field fans out over all features (`features/*/…`).
    pub fn is_any_feature(&self) -> bool {
        matches!(&self.kind, FieldKind::Feature { id, .. } if id == ANY_FEATURE)
    }

    /// What the parser puts where Ditto would refuse the field, so that it
    /// can go on looking for a syntax error (which Ditto reports first);
    /// the filter holding it is never returned.
    pub(crate) fn stand_in() -> Field {
        Field { kind: FieldKind::Simple, pointer: JsonPointer::from_levels(["thingId"]) }
    }

    /// Classifies `text` (unescaped, as written in the RQL) as Ditto's
    /// field expression factory does for `usage`. `offset` is where the
    /// text starts, for the error.
    pub(crate) fn classify(
        text: &str,
        usage: Usage,
        scope: Scope<'_>,
        offset: usize,
    ) -> Result<Field, RqlError> {
        let name = text.strip_prefix('/').unwrap_or(text);
        // Ditto finds two slashes in a row when it builds the JSON pointer
        // (JsonPointer.of), before it looks at the field's kind.
        if name.contains("//") {
            return Err(RqlError::new(
                ErrorKind::InvalidPointer(text.to_string()),
                offset,
                format!("JSON pointer <{text}> is invalid!"),
            ));
        }
        let unknown = || {
            RqlError::new(
                ErrorKind::UnknownProperty,
                offset,
                format!("Unknown property name: {name}"),
            )
        };
        if let Some((id, part, rest)) = feature_field(name) {
            let allowed = match usage {
                Usage::Filter => matches!(
                    part,
                    FeaturePart::Definition | FeaturePart::Property | FeaturePart::DesiredProperty
                ),
                Usage::Exists => true,
                Usage::Sort => matches!(part, FeaturePart::Property | FeaturePart::DesiredProperty),
            };
            // Ditto falls back to its common fields, which never match a
            // name starting with `features/`.
            if !allowed {
                return Err(unknown());
            }
            let id_level = unescape_level(id);
            let mut levels = vec!["features".to_string(), id_level.clone()];
            match part {
                FeaturePart::Whole => {}
                FeaturePart::Definition => levels.push("definition".into()),
                FeaturePart::Properties | FeaturePart::Property => levels.push("properties".into()),
                FeaturePart::DesiredProperties | FeaturePart::DesiredProperty => {
                    levels.push("desiredProperties".into())
                }
            }
            let pointer = JsonPointer::from_levels(levels).join(&parse_pointer(rest));
            return Ok(Field { kind: FieldKind::Feature { id: id_level, part }, pointer });
        }
        if let Some(rest) = name.strip_prefix("attributes/") {
            return Ok(Field {
                kind: FieldKind::Attribute,
                pointer: JsonPointer::from_levels(["attributes"]).join(&parse_pointer(rest)),
            });
        }
        if let Some(rest) = name.strip_prefix("_metadata/") {
            return Ok(Field {
                kind: FieldKind::Metadata,
                pointer: JsonPointer::from_levels(["_metadata"]).join(&parse_pointer(rest)),
            });
        }
        if SIMPLE_FIELDS.contains(&name) {
            return Ok(Field {
                kind: FieldKind::Simple,
                pointer: JsonPointer::from_levels([name]),
            });
        }
        if usage != Usage::Sort && scope.placeholder_fields.contains(&name) {
            if let Some((prefix, placeholder)) = name.split_once(':') {
                return Ok(Field {
                    kind: FieldKind::Placeholder {
                        prefix: prefix.to_string(),
                        name: placeholder.to_string(),
                    },
                    pointer: JsonPointer::root(),
                });
            }
        }
        Err(unknown())
    }
}

fn parse_pointer(text: &str) -> JsonPointer {
    // Two slashes in a row were refused above; nothing else fails.
    JsonPointer::parse(text).unwrap_or_default()
}

fn unescape_level(level: &str) -> String {
    level.replace("~0", "~")
}

/// Ditto's `FeatureField` patterns, tried in its order; each must match
/// the whole name. Java's `.` stops at line terminators, so a property
/// holding one matches none of them.
fn feature_field(name: &str) -> Option<(&str, FeaturePart, &str)> {
    let rest = name.strip_prefix("features/")?;
    let (id, after) = match rest.split_once('/') {
        Some((id, after)) => (id, Some(after)),
        None => (rest, None),
    };
    if id.is_empty() || id.contains(is_line_terminator) {
        return None;
    }
    let Some(after) = after else {
        return Some((id, FeaturePart::Whole, ""));
    };
    let parts = [
        ("properties", FeaturePart::Properties, FeaturePart::Property),
        ("desiredProperties", FeaturePart::DesiredProperties, FeaturePart::DesiredProperty),
    ];
    for (word, whole, one) in parts {
        if after == word || after.strip_prefix(word) == Some("/") {
            return Some((id, whole, ""));
        }
        if let Some(property) = after.strip_prefix(word).and_then(|r| r.strip_prefix('/')) {
            if property.contains(is_line_terminator) {
                return None;
            }
            return Some((id, one, property));
        }
    }
    if after == "definition" || after == "definition/" {
        return Some((id, FeaturePart::Definition, ""));
    }
    None
}

/// The characters Java's regex `.` does not match (without `DOTALL`).
pub(crate) fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

impl fmt::Display for Field {
    /// The field's canonical RQL text, escaped so that it parses back to
    /// the same field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        match &self.kind {
            FieldKind::Placeholder { prefix, name } => {
                text.push_str(prefix);
                text.push(':');
                text.push_str(name);
            }
            FieldKind::Simple => text.push_str(self.pointer.first().unwrap_or_default()),
            FieldKind::Attribute | FieldKind::Metadata | FieldKind::Feature { .. } => {
                let levels = self.pointer.levels();
                let fixed = match &self.kind {
                    FieldKind::Feature { part: FeaturePart::Whole, .. } => 2,
                    FieldKind::Feature { .. } => 3,
                    _ => 1,
                };
                for (i, level) in levels.iter().enumerate() {
                    if i > 0 {
                        text.push('/');
                    }
                    text.push_str(&level.replace('~', "~0"));
                }
                // `attributes/` alone addresses all attributes.
                if levels.len() == fixed
                    && matches!(self.kind, FieldKind::Attribute | FieldKind::Metadata)
                {
                    text.push('/');
                }
            }
        }
        write_property_text(f, &text)
    }
}

/// Writes a property as RQL: its characters, except those that end a
/// property (`,` `)` `"` `\`), which are escaped.
pub(crate) fn write_property_text(f: &mut impl fmt::Write, text: &str) -> fmt::Result {
    for c in text.chars() {
        match c {
            ',' => f.write_str("\\u002c")?,
            ')' => f.write_str("\\u0029")?,
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            c => f.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(text: &str) -> Result<Field, RqlError> {
        Field::classify(text, Usage::Filter, Scope::THINGS, 0)
    }

    #[test]
    fn classifies_as_ditto_does() {
        let cases = [
            ("thingId", FieldKind::Simple, "/thingId"),
            ("/policyId", FieldKind::Simple, "/policyId"),
            ("_metadata", FieldKind::Simple, "/_metadata"),
            ("attributes/location", FieldKind::Attribute, "/attributes/location"),
            ("/attributes/a/b/", FieldKind::Attribute, "/attributes/a/b"),
            ("attributes/", FieldKind::Attribute, "/attributes"),
            ("_metadata/attributes/a", FieldKind::Metadata, "/_metadata/attributes/a"),
            (
                "features/x/properties/y/z",
                FieldKind::Feature { id: "x".into(), part: FeaturePart::Property },
                "/features/x/properties/y/z",
            ),
            (
                "features/*/desiredProperties/y",
                FieldKind::Feature { id: "*".into(), part: FeaturePart::DesiredProperty },
                "/features/*/desiredProperties/y",
            ),
            (
                "features/x/definition",
                FieldKind::Feature { id: "x".into(), part: FeaturePart::Definition },
                "/features/x/definition",
            ),
        ];
        for (text, kind, pointer) in cases {
            let field = filter(text).unwrap();
            assert_eq!(field.kind(), &kind, "{text}");
            assert_eq!(field.pointer().to_string(), pointer, "{text}");
            let again = filter(&field.to_string()).unwrap();
            assert_eq!(again, field, "{text} → {field}");
        }
    }

    #[test]
    fn refuses_what_ditto_refuses() {
        for text in [
            "attributes",
            "features",
            "features/x",
            "features/x/properties",
            "features/x/definition/y",
            "features//properties/y",
            "foo",
            " thingId",
            "topic:action",
            "features/x/properties/a\nb",
        ] {
            let error = filter(text).unwrap_err();
            assert!(
                matches!(error.kind, ErrorKind::UnknownProperty | ErrorKind::InvalidPointer(_)),
                "{text}: {error:?}"
            );
        }
        assert_eq!(filter("/foo").unwrap_err().message, "Unknown property name: foo");
        assert!(matches!(
            filter("attributes/a//b").unwrap_err().kind,
            ErrorKind::InvalidPointer(_)
        ));
    }

    #[test]
    fn exists_and_sort_accept_their_own_sets() {
        for text in
            ["features/x", "features/x/properties", "features/x/desiredProperties/", "features/*"]
        {
            Field::classify(text, Usage::Exists, Scope::THINGS, 0).unwrap();
        }
        assert!(Field::classify("features/x/definition", Usage::Sort, Scope::THINGS, 0).is_err());
        Field::classify("features/x/properties/a", Usage::Sort, Scope::THINGS, 0).unwrap();
    }

    #[test]
    fn placeholders_only_in_their_scope() {
        let scope = Scope { placeholder_fields: &["topic:action"] };
        let field = Field::classify("topic:action", Usage::Filter, scope, 0).unwrap();
        assert_eq!(
            field.kind(),
            &FieldKind::Placeholder { prefix: "topic".into(), name: "action".into() }
        );
        assert_eq!(field.to_string(), "topic:action");
        assert!(Field::classify("topic:action", Usage::Sort, scope, 0).is_err());
    }

    #[test]
    fn escapes_what_would_end_the_property() {
        let field = filter("attributes/a,b)c\"d\\e~f").unwrap();
        assert_eq!(field.to_string(), "attributes/a\\u002cb\\u0029c\\\"d\\\\e~0f");
    }
}
