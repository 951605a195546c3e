//! A subject's `announcement`: when Ferry tells the subject it is about
//! to lose its place in the policy (`beforeExpiry`), or has lost it
//! (`whenDeleted`), and which acknowledgements that announcement asks
//! for. Read and written as Ditto's `ImmutableSubjectAnnouncement`;
//! `announcements.rs` acts on it.

use super::errors::wrong_type;
use crate::duration::DittoDuration;
use crate::error::DittoError;
use serde_json::{Map, Value};
use std::time::Duration;

/// Ditto's `policies.subject-deletion-announcement-granularity`: a
/// `beforeExpiry` is rounded up to whole minutes when written.
const BEFORE_EXPIRY_GRANULARITY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectAnnouncement {
    /// How long before the subject's expiry it is announced.
    pub before_expiry: Option<DittoDuration>,
    /// Announce when the subject is deleted (by a write or at expiry),
    /// unless it was announced before.
    pub when_deleted: bool,
    /// `requestedAcks.labels`: the acknowledgements the announcement asks
    /// for; until they come (or the grace period passes) it is sent again.
    pub requested_acks: Vec<String>,
    /// `requestedAcks.timeout`: how long one sending waits for them.
    pub requested_acks_timeout: Option<DittoDuration>,
    /// Up to how much earlier than `beforeExpiry` says the announcement
    /// may go, at random, so that many subjects expiring together are not
    /// announced in one burst.
    pub randomization_interval: Option<DittoDuration>,
}

impl SubjectAnnouncement {
    /// `ImmutableSubjectAnnouncement.fromJson`: every field optional;
    /// `beforeExpiry` in seconds, minutes or hours. Labels that are not
    /// strings are skipped, as Ditto skips them.
    pub fn from_json(value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(wrong_type(value, "/announcement", "JsonObject"));
        };
        let duration = |pointer: &str, value: Option<&Value>| match value {
            None => Ok(None),
            Some(Value::String(text)) => DittoDuration::parse(text)
                .map(Some)
                .ok_or_else(|| DittoError::subject_announcement_invalid(text)),
            Some(other) => Err(wrong_type(other, pointer, "String")),
        };
        let before_expiry = duration("/beforeExpiry", object.get("beforeExpiry"))?;
        if let Some(before) = before_expiry.filter(|before| !before.in_whole_seconds()) {
            return Err(DittoError::subject_announcement_invalid(&before.to_string()));
        }
        let when_deleted = match object.get("whenDeleted") {
            None => false,
            Some(Value::Bool(when)) => *when,
            Some(other) => return Err(wrong_type(other, "/whenDeleted", "Boolean")),
        };
        let requested = match object.get("requestedAcks") {
            None => None,
            Some(Value::Object(requested)) => Some(requested),
            Some(other) => return Err(wrong_type(other, "/requestedAcks", "JsonObject")),
        };
        let requested_acks = match requested.and_then(|r| r.get("labels")) {
            None => Vec::new(),
            Some(Value::Array(labels)) => labels
                .iter()
                .filter_map(Value::as_str)
                .map(|label| match crate::acks::is_label(label) {
                    true => Ok(label.to_owned()),
                    false => Err(crate::acks::label_invalid(label)),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(wrong_type(other, "/requestedAcks/labels", "JsonArray")),
        };
        let requested_acks_timeout =
            duration("/requestedAcks/timeout", requested.and_then(|r| r.get("timeout")))?;
        let randomization_interval =
            duration("/randomizationInterval", object.get("randomizationInterval"))?;
        Ok(SubjectAnnouncement {
            before_expiry,
            when_deleted,
            requested_acks,
            requested_acks_timeout,
            randomization_interval,
        })
    }

    /// Ditto's JSON: `whenDeleted` always, the rest when set.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        if let Some(before) = self.before_expiry {
            object.insert("beforeExpiry".into(), before.to_string().into());
        }
        object.insert("whenDeleted".into(), self.when_deleted.into());
        let mut requested = Map::new();
        if !self.requested_acks.is_empty() {
            requested.insert("labels".into(), self.requested_acks.clone().into());
        }
        if let Some(timeout) = self.requested_acks_timeout {
            requested.insert("timeout".into(), timeout.to_string().into());
        }
        if !requested.is_empty() {
            object.insert("requestedAcks".into(), Value::Object(requested));
        }
        if let Some(interval) = self.randomization_interval {
            object.insert("randomizationInterval".into(), interval.to_string().into());
        }
        Value::Object(object)
    }

    /// The announcement as stored: `beforeExpiry` rounded up to whole
    /// minutes, in the unit it was given (`30s` becomes `60s`).
    pub fn rounded(mut self) -> Self {
        if let Some(before) = self.before_expiry {
            let length = before.as_duration();
            let granules = length.as_nanos().div_ceil(BEFORE_EXPIRY_GRANULARITY.as_nanos());
            let rounded = BEFORE_EXPIRY_GRANULARITY
                .saturating_mul(u32::try_from(granules).unwrap_or(u32::MAX));
            if rounded != length {
                self.before_expiry = Some(before.with_length(rounded));
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_and_writes_as_ditto() {
        let read = SubjectAnnouncement::from_json(&json!({
            "beforeExpiry": "5m",
            "requestedAcks": {"labels": ["conn:ack", 3], "timeout": "30s"},
            "randomizationInterval": "1m",
            "other": true,
        }))
        .unwrap();
        assert_eq!(read.requested_acks, vec!["conn:ack".to_owned()]);
        assert_eq!(
            read.to_json(),
            json!({
                "beforeExpiry": "5m",
                "whenDeleted": false,
                "requestedAcks": {"labels": ["conn:ack"], "timeout": "30s"},
                "randomizationInterval": "1m",
            })
        );
        assert_eq!(
            SubjectAnnouncement::from_json(&json!({"whenDeleted": true})).unwrap().to_json(),
            json!({"whenDeleted": true})
        );
    }

    #[test]
    fn refuses_what_ditto_refuses() {
        for (bad, error) in [
            (json!({"beforeExpiry": "1d"}), "policies:subjectannouncement.invalid"),
            (json!({"beforeExpiry": "500ms"}), "policies:subjectannouncement.invalid"),
            (json!({"beforeExpiry": 5}), "json.invalid"),
            (json!({"whenDeleted": "yes"}), "json.invalid"),
            (json!({"requestedAcks": {"timeout": "soon"}}), "policies:subjectannouncement.invalid"),
            (json!("5m"), "json.invalid"),
        ] {
            assert_eq!(SubjectAnnouncement::from_json(&bad).unwrap_err().error, error, "{bad}");
        }
        let message = SubjectAnnouncement::from_json(&json!({"beforeExpiry": "1d"})).unwrap_err();
        assert_eq!(message.message, "The 'beforeExpiry' duration '1d' is not valid.");
    }

    #[test]
    fn before_expiry_is_rounded_up_to_minutes_in_its_unit() {
        let rounded = |before: &str| {
            let read = SubjectAnnouncement::from_json(&json!({"beforeExpiry": before})).unwrap();
            read.rounded().before_expiry.unwrap().to_string()
        };
        assert_eq!(rounded("30s"), "60s");
        assert_eq!(rounded("90"), "120");
        assert_eq!(rounded("2m"), "2m");
        assert_eq!(rounded("1h"), "1h");
    }
}
