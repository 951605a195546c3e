//! Ditto's `{{ request:subjectId }}` in the subject ids a write names: the
//! first subject of whoever makes the write, put in before the policy is
//! read. A creator names itself this way without knowing how its login
//! maps to a subject (`nginx:alice`, `integration:…`), as Ditto's
//! placeholder substitution for policy commands and inline policies does.
//!
//! Only subject ids are substituted, as in Ditto: a resource key or a
//! value of the thing keeps its text.

use serde_json::{Map, Value};
use std::borrow::Cow;

/// Where the subject ids are in a written body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// A whole policy: `entries/{label}/subjects/{id}`.
    Policy,
    /// `{label}/subjects/{id}`.
    Entries,
    /// `subjects/{id}`.
    Entry,
    /// `{id}`.
    Subjects,
}

/// `id` with each `{{ request:subjectId }}` (spaces inside the braces
/// optional) replaced by `requester`; borrowed when it names none.
pub fn in_subject_id<'a>(id: &'a str, requester: &str) -> Cow<'a, str> {
    let mut out = String::new();
    let mut rest = id;
    let mut replaced = false;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let whole = start + 2 + end + 2;
        if after[..end].trim() == "request:subjectId" {
            out.push_str(&rest[..start]);
            out.push_str(requester);
            replaced = true;
        } else {
            out.push_str(&rest[..whole]);
        }
        rest = &rest[whole..];
    }
    if !replaced {
        return Cow::Borrowed(id);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// `body` with its subject ids (where `holds` says they are) substituted;
/// borrowed when none names the placeholder, the case of nearly every
/// write. What does not have the expected shape is left for the policy's
/// own checks to refuse.
pub fn in_body<'a>(body: &'a Value, holds: Holds, requester: &str) -> Cow<'a, Value> {
    substituted(body, holds, requester).map_or(Cow::Borrowed(body), Cow::Owned)
}

/// One walk down to the subjects: `None` when nothing below changes, else
/// a copy of `body` with what changed put in.
fn substituted(body: &Value, holds: Holds, requester: &str) -> Option<Value> {
    let Value::Object(members) = body else { return None };
    let with = |key: &str, inner: Holds| {
        let changed = substituted(members.get(key)?, inner, requester)?;
        let mut copy = members.clone();
        copy.insert(key.to_owned(), changed);
        Some(Value::Object(copy))
    };
    match holds {
        Holds::Policy => with("entries", Holds::Entries),
        Holds::Entry => with("subjects", Holds::Subjects),
        Holds::Entries => {
            let changed: Vec<(&String, Value)> = members
                .iter()
                .filter_map(|(label, entry)| {
                    Some((label, substituted(entry, Holds::Entry, requester)?))
                })
                .collect();
            if changed.is_empty() {
                return None;
            }
            let mut copy = members.clone();
            for (label, entry) in changed {
                copy.insert(label.clone(), entry);
            }
            Some(Value::Object(copy))
        }
        Holds::Subjects => {
            let names = |id: &String| matches!(in_subject_id(id, requester), Cow::Owned(_));
            if !members.keys().any(names) {
                return None;
            }
            // Rebuilt in order: a subject's place in its entry is kept.
            let subjects = members
                .iter()
                .map(|(id, subject)| (in_subject_id(id, requester).into_owned(), subject.clone()))
                .collect::<Map<String, Value>>();
            Some(Value::Object(subjects))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_placeholder_becomes_the_requester_wherever_subject_ids_are() {
        assert_eq!(in_subject_id("{{ request:subjectId }}", "nginx:alice"), "nginx:alice");
        assert_eq!(in_subject_id("{{request:subjectId}}", "nginx:alice"), "nginx:alice");
        assert_eq!(in_subject_id("nginx:bob", "nginx:alice"), "nginx:bob");
        assert_eq!(
            in_subject_id("{{ header:x }}{{ request:subjectId }}", "nginx:alice"),
            "{{ header:x }}nginx:alice",
            "another placeholder is left as written"
        );
        assert_eq!(in_subject_id("x:{{ unclosed", "nginx:alice"), "x:{{ unclosed");

        let policy = json!({"entries": {"owner": {
            "subjects": {"{{ request:subjectId }}": {"type": "creator"}, "nginx:bob": {"type": "b"}},
            "resources": {"thing:/{{ request:subjectId }}": {"grant": ["READ"], "revoke": []}}
        }}});
        let substituted = in_body(&policy, Holds::Policy, "nginx:alice");
        let owner = &substituted["entries"]["owner"];
        let ids: Vec<_> = owner["subjects"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(ids, ["nginx:alice", "nginx:bob"], "in place, in order");
        assert!(
            owner["resources"].get("thing:/{{ request:subjectId }}").is_some(),
            "only subject ids"
        );

        let subjects = json!({"{{ request:subjectId }}": {"type": "t"}});
        assert_eq!(
            in_body(&subjects, Holds::Subjects, "nginx:alice").into_owned(),
            json!({"nginx:alice": {"type": "t"}})
        );
        let entry = json!({"subjects": subjects, "resources": {}});
        assert_eq!(
            in_body(&entry, Holds::Entry, "nginx:alice")["subjects"],
            json!({"nginx:alice": {"type": "t"}})
        );
        let entries = json!({"e": entry});
        assert_eq!(
            in_body(&entries, Holds::Entries, "nginx:alice")["e"]["subjects"],
            json!({"nginx:alice": {"type": "t"}})
        );
        let plain = json!({"entries": {"e": {"subjects": {"nginx:bob": {}}}}});
        assert!(matches!(in_body(&plain, Holds::Policy, "nginx:alice"), Cow::Borrowed(_)));
        assert!(matches!(in_body(&json!([1]), Holds::Policy, "nginx:alice"), Cow::Borrowed(_)));
    }
}
