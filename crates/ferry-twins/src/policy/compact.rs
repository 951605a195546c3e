//! A policy as the cache holds it: serialized, beside its compiled
//! enforcer.
//!
//! Enforcing reads only the enforcer, which policies with equal entries
//! share. The parsed model (labels, subjects, resources and permissions,
//! each a string or a list of its own) took ~2 KB per cached policy for a
//! one-entry policy of ~350 bytes of JSON, and with Ditto's default of a
//! policy per thing that was most of a hot twin's memory (measured in
//! docs/benchmarks.md, "Memory per hot twin"). Only the policy API and
//! the resolution of imports need the model; they parse it from here, as
//! the store's form is parsed.

use super::{Housekeeping, Policy};
use crate::error::DittoError;

#[derive(Debug)]
pub struct CompactPolicy {
    id: Box<str>,
    json: Box<str>,
    pub housekeeping: Housekeeping,
}

impl CompactPolicy {
    pub fn of(policy: &Policy) -> CompactPolicy {
        CompactPolicy {
            id: policy.policy_id().into(),
            json: policy.to_json().to_string().into_boxed_str(),
            housekeeping: policy.housekeeping,
        }
    }

    /// The model back, as [`CompactPolicy::of`] was given it.
    pub fn parse(&self) -> Result<Policy, DittoError> {
        let value = serde_json::from_str(&self.json)
            .map_err(|error| DittoError::json_invalid(format!("a cached policy: {error}")))?;
        let mut policy = Policy::from_json(&self.id, &value)?;
        policy.housekeeping = self.housekeeping;
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_policy_comes_back_from_its_compact_form_as_it_was() {
        let mut policy = Policy::from_json(
            "ns:p",
            &json!({
                "imports": {"ns:q": {"entries": ["SHARED"]}},
                "entries": {
                    "DEFAULT": {
                        "subjects": {"nginx:ditto": {"type": "basic"}},
                        "resources": {
                            "thing:/": {"grant": ["READ", "WRITE"], "revoke": []},
                            "thing:/attributes/secret": {"grant": [], "revoke": ["READ"]}
                        },
                        "importable": "never"
                    }
                }
            }),
        )
        .unwrap();
        policy.housekeeping.revision = 4;
        policy.housekeeping.created = crate::policy::Timestamp::parse("2026-11-25T00:00:00Z");
        let back = CompactPolicy::of(&policy).parse().unwrap();
        assert_eq!(back.to_json_with_housekeeping(), policy.to_json_with_housekeeping());
        assert_eq!(back.housekeeping.revision, 4);
    }
}
