//! Subjects: who an entry applies to (`nginx:alice`, `google:123`), with a
//! free-form `type` and an optional `expiry`.

use super::announcement::SubjectAnnouncement;
use super::errors::wrong_type;
use super::label::control_character_reason;
use super::timestamp::Timestamp;
use crate::error::DittoError;
use serde_json::{Map, Value};
use std::fmt;

/// `issuer:subject`, kept as written: callers match it as a whole string
/// against their authorization subjects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubjectId(String);

impl SubjectId {
    /// Ditto's `SubjectId.newInstance`: the issuer ends at the first `:`
    /// (after a `://`, so `https://issuer.example:sub` works); an id with
    /// a `{{ placeholder }}` is taken whole, since the placeholder holds a
    /// colon of its own.
    ///
    /// In the URL `…/subjects/{subjectId}` the id is the whole rest of the
    /// path, slashes included, as Ditto's gateway matches it with
    /// `remaining()`; pass that rest here.
    pub fn parse(text: &str) -> Result<Self, DittoError> {
        let has_placeholder = text.contains("{{") && text.contains("}}");
        if !has_placeholder {
            let search_from = text.find("://").map_or(0, |at| at + 3);
            let delimiter = text[search_from..].find(':').map(|at| at + search_from);
            match delimiter {
                Some(at) if at + 1 < text.len() => {}
                _ => return Err(DittoError::subject_id_invalid(text)),
            }
        }
        if let Some(reason) = control_character_reason(text, true) {
            return Err(DittoError::subject_id_invalid(text).with_description(reason));
        }
        Ok(SubjectId(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SubjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One subject of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub id: SubjectId,
    /// Free text in Ditto (`generated`, `jwt`, `nginx basic auth user`).
    pub subject_type: String,
    /// After this instant the subject no longer counts.
    pub expiry: Option<Timestamp>,
    /// When and how the subject is told it is losing its place
    /// (`announcements.rs` acts on it).
    pub announcement: Option<SubjectAnnouncement>,
}

impl Subject {
    /// The subject Ditto's `Subject.newInstance(id)` makes: type
    /// `generated`, no expiry.
    pub fn generated(id: SubjectId) -> Self {
        Subject { id, subject_type: "generated".to_string(), expiry: None, announcement: None }
    }

    /// Ditto's `Subject.fromJson`: `type` is required, `expiry` must be an
    /// ISO-8601 instant. Unknown fields are ignored, as Ditto does.
    pub fn from_json(id: SubjectId, value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(DittoError::json_parse(format!("<{value}> is not a JSON object!")));
        };
        let subject_type = match object.get("type") {
            None => {
                return Err(DittoError::json_field_missing(
                    "The 'type' for the 'subject' is missing.",
                ));
            }
            Some(Value::String(text)) if !text.is_empty() => text.clone(),
            Some(other) => return Err(wrong_type(other, "/type", "String")),
        };
        let expiry = match object.get("expiry") {
            None => None,
            Some(Value::String(text)) => Some(
                Timestamp::parse(text).ok_or_else(|| DittoError::subject_expiry_invalid(text))?,
            ),
            Some(other) => return Err(wrong_type(other, "/expiry", "String")),
        };
        let announcement =
            object.get("announcement").map(SubjectAnnouncement::from_json).transpose()?;
        Ok(Subject { id, subject_type, expiry, announcement })
    }

    /// `{"type": …, "expiry"?: …, "announcement"?: …}` in Ditto's order.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("type".into(), Value::String(self.subject_type.clone()));
        if let Some(expiry) = self.expiry {
            object.insert("expiry".into(), Value::String(expiry.to_string()));
        }
        if let Some(announcement) = &self.announcement {
            object.insert("announcement".into(), announcement.to_json());
        }
        Value::Object(object)
    }

    /// Whether it has an `expiry` or an `announcement`: what the
    /// announcements' agenda watches.
    pub fn is_timed(&self) -> bool {
        self.expiry.is_some() || self.announcement.is_some()
    }

    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expiry.is_some_and(|expiry| expiry < now)
    }
}

/// The subjects of an entry, in the order they were written: Ditto keeps
/// them in a `LinkedHashMap`, and a rewrite keeps a subject's place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subjects(Vec<Subject>);

impl Subjects {
    pub fn from_json(value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(wrong_type(value, "/subjects", "JsonObject"));
        };
        let mut subjects = Subjects::default();
        for (id, subject) in object {
            subjects.set(Subject::from_json(SubjectId::parse(id)?, subject)?);
        }
        Ok(subjects)
    }

    pub fn to_json(&self) -> Value {
        Value::Object(self.0.iter().map(|s| (s.id.to_string(), s.to_json())).collect())
    }

    pub fn get(&self, id: &SubjectId) -> Option<&Subject> {
        self.0.iter().find(|s| &s.id == id)
    }

    /// Inserts or replaces; true when the subject is new.
    pub fn set(&mut self, subject: Subject) -> bool {
        match self.0.iter_mut().find(|s| s.id == subject.id) {
            Some(existing) => {
                *existing = subject;
                false
            }
            None => {
                self.0.push(subject);
                true
            }
        }
    }

    pub fn remove(&mut self, id: &SubjectId) -> Option<Subject> {
        let at = self.0.iter().position(|s| &s.id == id)?;
        Some(self.0.remove(at))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Subject> {
        self.0.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Subject> {
        self.0.iter_mut()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subject_ids_follow_dittos_rules() {
        let valid = [
            "nginx:alice",
            "google:a:b",
            "integration:connection/x",
            "https://issuer.example:sub",
            "{{ request:subjectId }}",
        ];
        for id in valid {
            assert_eq!(SubjectId::parse(id).unwrap().as_str(), id);
        }
        for id in ["alice", "nginx:", "https://issuer.example", "nginx:\u{7}"] {
            let error = SubjectId::parse(id).unwrap_err();
            assert_eq!(error.error, "policies:subjectid.invalid", "{id}");
            assert_eq!(error.status, 400);
        }
        assert_eq!(
            SubjectId::parse("alice").unwrap_err().message,
            "Subject ID 'alice' is not valid!"
        );
    }

    #[test]
    fn subjects_parse_and_print_in_dittos_order() {
        let value = json!({"expiry": "2030-01-01T00:00:00.000Z", "type": "jwt", "unknown": 1});
        let subject = Subject::from_json(SubjectId::parse("oidc:alice").unwrap(), &value).unwrap();
        assert_eq!(
            serde_json::to_string(&subject.to_json()).unwrap(),
            r#"{"type":"jwt","expiry":"2030-01-01T00:00:00Z"}"#
        );
    }

    #[test]
    fn subject_errors_carry_dittos_codes() {
        let id = || SubjectId::parse("nginx:alice").unwrap();
        let cases = [
            (json!({}), "json.field.missing"),
            (json!({"type": 1}), "json.invalid"),
            (json!("jwt"), "json.invalid"),
            (json!({"type": "jwt", "expiry": "tomorrow"}), "policies:subjectexpiry.invalid"),
        ];
        for (value, code) in cases {
            assert_eq!(Subject::from_json(id(), &value).unwrap_err().error, code, "{value}");
        }
    }
}
