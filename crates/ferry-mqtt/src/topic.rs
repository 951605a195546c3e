//! Topic name and topic filter rules (§4.7). Matching lives in the broker's
//! topic tree; this module only says what is well-formed.

/// A topic name that a PUBLISH may carry: nonempty, no `+` or `#`.
pub fn is_valid_topic_name(topic: &str) -> bool {
    todo!("codec helper: {topic}")
}

/// A topic filter: `#` only as the whole last level, `+` only as a whole
/// level; `$share/{group}/{filter}` needs a nonempty group without wildcards
/// or `/`, and a valid filter after it.
pub fn is_valid_topic_filter(filter: &str) -> bool {
    todo!("codec helper: {filter}")
}
