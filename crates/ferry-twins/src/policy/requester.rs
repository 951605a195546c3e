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
/// optional) replaced by `requester`.
pub fn in_subject_id<'a>(id: &'a str, requester: &str) -> Cow<'a, str> {
    if !id.contains("{{") {
        return Cow::Borrowed(id);
    }
    let mut out = String::with_capacity(id.len() + requester.len());
    let mut rest = id;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push_str(&rest[..start]);
        if after[..end].trim() == "request:subjectId" {
            out.push_str(requester);
        } else {
            out.push_str(&rest[start..start + 2 + end + 2]);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// `body` with its subject ids (where `holds` says they are) substituted;
/// borrowed when none names the placeholder, the case of nearly every
/// write. What does not have the expected shape is left for the policy's
/// own checks to refuse.
pub fn in_body<'a>(body: &'a Value, holds: Holds, requester: &str) -> Cow<'a, Value> {
    if !mentions_placeholder(body, holds) {
        return Cow::Borrowed(body);
    }
    let mut body = body.clone();
    substitute(&mut body, holds, requester);
    Cow::Owned(body)
}

fn mentions_placeholder(body: &Value, holds: Holds) -> bool {
    let Value::Object(members) = body else { return false };
    match holds {
        Holds::Policy => {
            members.get("entries").is_some_and(|e| mentions_placeholder(e, Holds::Entries))
        }
        Holds::Entries => members.values().any(|entry| mentions_placeholder(entry, Holds::Entry)),
        Holds::Entry => {
            members.get("subjects").is_some_and(|s| mentions_placeholder(s, Holds::Subjects))
        }
        Holds::Subjects => members.keys().any(|id| id.contains("{{")),
    }
}

fn substitute(body: &mut Value, holds: Holds, requester: &str) {
    let Value::Object(members) = body else { return };
    match holds {
        Holds::Policy => {
            if let Some(entries) = members.get_mut("entries") {
                substitute(entries, Holds::Entries, requester);
            }
        }
        Holds::Entries => {
            for entry in members.values_mut() {
                substitute(entry, Holds::Entry, requester);
            }
        }
        Holds::Entry => {
            if let Some(subjects) = members.get_mut("subjects") {
                substitute(subjects, Holds::Subjects, requester);
            }
        }
        Holds::Subjects => {
            // Rebuilt in order: a subject's place in its entry is kept.
            let subjects = std::mem::take(members);
            *members = subjects
                .into_iter()
                .map(|(id, subject)| (in_subject_id(&id, requester).into_owned(), subject))
                .collect::<Map<String, Value>>();
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
