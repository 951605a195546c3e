//! One policy entry: a label, the subjects it applies to and the resources
//! it grants or revokes.

use super::errors::wrong_type;
use super::label::Label;
use super::resource::Resources;
use super::subject::Subjects;
use crate::error::DittoError;
use serde_json::{Map, Value};

/// Whether other policies may import an entry (`importable`); Ditto writes
/// it on every entry, `implicit` when it was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Importable {
    #[default]
    Implicit,
    Explicit,
    Never,
}

impl Importable {
    pub fn parse(text: &str) -> Result<Self, DittoError> {
        match text {
            "implicit" => Ok(Importable::Implicit),
            "explicit" => Ok(Importable::Explicit),
            "never" => Ok(Importable::Never),
            _ => Err(DittoError::policy_entry_invalid(
                "The Policy Entry is invalid.",
                format!(
                    "The value '{text}' of field '/importable' is not valid. Valid values are: [implicit, explicit, never]"
                ),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Importable::Implicit => "implicit",
            Importable::Explicit => "explicit",
            Importable::Never => "never",
        }
    }
}

/// A policy entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEntry {
    pub label: Label,
    pub subjects: Subjects,
    pub resources: Resources,
    pub importable: Importable,
    /// Ditto 3.9's `namespaces`, `allowedAdditions` and `references`:
    /// kept and returned as written, not evaluated (see the module doc).
    pub namespaces: Option<Value>,
    pub allowed_additions: Option<Value>,
    pub references: Option<Value>,
}

impl PolicyEntry {
    pub fn new(label: Label, subjects: Subjects, resources: Resources) -> Self {
        PolicyEntry {
            label,
            subjects,
            resources,
            importable: Importable::default(),
            namespaces: None,
            allowed_additions: None,
            references: None,
        }
    }

    /// Ditto's `PolicyEntry.fromJson`: `subjects` and `resources` may be
    /// left out (an entry without either decides nothing); unknown fields
    /// are ignored.
    pub fn from_json(label: Label, value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(DittoError::json_parse(format!("<{value}> is not a JSON object!")));
        };
        let subjects = match object.get("subjects") {
            Some(subjects) => Subjects::from_json(subjects)?,
            None => Subjects::default(),
        };
        let resources = match object.get("resources") {
            Some(resources) => Resources::from_json(resources)?,
            None => Resources::default(),
        };
        let importable = match object.get("importable") {
            None => Importable::default(),
            Some(Value::String(text)) => Importable::parse(text)?,
            Some(other) => return Err(wrong_type(other, "/importable", "String")),
        };
        let array = |field: &str| -> Result<Option<Value>, DittoError> {
            match object.get(field) {
                None => Ok(None),
                Some(value @ Value::Array(_)) => Ok(Some(value.clone())),
                Some(other) => Err(wrong_type(other, &format!("/{field}"), "JsonArray")),
            }
        };
        Ok(PolicyEntry {
            label,
            subjects,
            resources,
            importable,
            namespaces: array("namespaces")?,
            allowed_additions: array("allowedAdditions")?,
            references: array("references")?,
        })
    }

    /// The entry without its label, fields in Ditto's order.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("subjects".into(), self.subjects.to_json());
        object.insert("resources".into(), self.resources.to_json());
        if let Some(namespaces) = &self.namespaces {
            object.insert("namespaces".into(), namespaces.clone());
        }
        object.insert("importable".into(), Value::String(self.importable.as_str().into()));
        if let Some(additions) = &self.allowed_additions {
            object.insert("allowedAdditions".into(), additions.clone());
        }
        if let Some(references) = &self.references {
            object.insert("references".into(), references.clone());
        }
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn label() -> Label {
        Label::parse("OWNER").unwrap()
    }

    #[test]
    fn entries_round_trip_in_dittos_order() {
        let value = json!({
            "importable": "never",
            "resources": {"thing:/": {"revoke": [], "grant": ["WRITE", "READ"]}},
            "subjects": {"nginx:alice": {"type": "generated"}},
            "whatever": true
        });
        let entry = PolicyEntry::from_json(label(), &value).unwrap();
        assert_eq!(
            serde_json::to_string(&entry.to_json()).unwrap(),
            r#"{"subjects":{"nginx:alice":{"type":"generated"}},"resources":{"thing:/":{"grant":["READ","WRITE"],"revoke":[]}},"importable":"never"}"#
        );
        let empty = PolicyEntry::from_json(label(), &json!({})).unwrap();
        assert_eq!(
            empty.to_json(),
            json!({"subjects": {}, "resources": {}, "importable": "implicit"})
        );
    }

    #[test]
    fn entry_errors_carry_dittos_codes() {
        let cases = [
            (json!({"importable": "sometimes"}), "policies:entry.invalid"),
            (json!({"importable": 1}), "json.invalid"),
            (json!({"subjects": []}), "json.invalid"),
            (json!({"subjects": {"alice": {"type": "x"}}}), "policies:subjectid.invalid"),
            (json!({"resources": {"thing:/": {"grant": []}}}), "json.field.missing"),
            (json!([]), "json.invalid"),
        ];
        for (value, code) in cases {
            assert_eq!(PolicyEntry::from_json(label(), &value).unwrap_err().error, code, "{value}");
        }
    }
}
