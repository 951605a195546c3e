//! The shadow topics (AWS IoT `device-shadow-mqtt.html`):
//! `$aws/things/{thingName}/shadow/{op}` for the classic shadow and
//! `$aws/things/{thingName}/shadow/name/{shadowName}/{op}` for a named
//! one, `{op}` being `update`, `get` or `delete`; the answers go to
//! `{op}/accepted` and `{op}/rejected` beneath, and the service's own
//! publications to `update/delta` and `update/documents`.

use super::ShadowSettings;
use crate::id::ThingId;

/// The topic levels every shadow topic starts with.
pub const AWS_THINGS: &str = "$aws/things";

/// AWS's limit on a thing name, in bytes.
const MAX_THING_NAME_BYTES: usize = 128;

/// AWS's limit on a shadow name, in bytes.
const MAX_SHADOW_NAME_BYTES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Update,
    Get,
    Delete,
}

impl Op {
    fn parse(level: &str) -> Option<Op> {
        match level {
            "update" => Some(Op::Update),
            "get" => Some(Op::Get),
            "delete" => Some(Op::Delete),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Update => "update",
            Op::Get => "get",
            Op::Delete => "delete",
        }
    }
}

/// A request topic, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowTopic<'t> {
    pub thing_name: &'t str,
    /// `None` for the classic shadow.
    pub shadow_name: Option<&'t str>,
    pub op: Op,
}

impl<'t> ShadowTopic<'t> {
    /// The request a topic is, or `None` for anything else under
    /// `$aws/things` (the answer topics included, which only the service
    /// publishes to). Names are held to AWS's characters (and `.`) and lengths.
    pub fn parse(topic: &'t str) -> Option<ShadowTopic<'t>> {
        let (shadow, op) = topic.rsplit_once('/')?;
        ShadowTopic::of_shadow(shadow, Op::parse(op)?)
    }

    /// The shadow whose `/update/delta` topic `topic` is, as a `get` of
    /// it: what a device subscribing there is sent first.
    pub(crate) fn of_delta_topic(topic: &'t str) -> Option<ShadowTopic<'t>> {
        ShadowTopic::of_shadow(topic.strip_suffix("/update/delta")?, Op::Get)
    }

    /// `op` on the shadow `$aws/things/{thing}/shadow[/name/{shadow}]`.
    fn of_shadow(shadow: &'t str, op: Op) -> Option<ShadowTopic<'t>> {
        let rest = shadow.strip_prefix(AWS_THINGS)?.strip_prefix('/')?;
        let levels: Vec<&str> = rest.split('/').collect();
        let (thing_name, shadow_name) = match levels.as_slice() {
            [thing, "shadow"] => (*thing, None),
            [thing, "shadow", "name", shadow] => (*thing, Some(*shadow)),
            _ => return None,
        };
        if !is_aws_name(thing_name, MAX_THING_NAME_BYTES)
            || shadow_name.is_some_and(|name| !is_shadow_name(name))
        {
            return None;
        }
        Some(ShadowTopic { thing_name, shadow_name, op })
    }

    /// The thing the name stands for: `{namespace}:{name}`, or the name
    /// itself when it holds a `:`.
    pub fn thing_id(&self, settings: &ShadowSettings) -> Option<ThingId> {
        thing_id(self.thing_name, settings)
    }

    /// The feature that holds the shadow.
    pub fn feature_id<'s>(&self, settings: &'s ShadowSettings) -> &'s str
    where
        't: 's,
    {
        self.shadow_name.unwrap_or(&settings.classic_feature)
    }

    /// The name `No shadow exists with name:` gives: the shadow's, or the
    /// thing's for the classic shadow.
    pub fn display_name(&self) -> &'t str {
        self.shadow_name.unwrap_or(self.thing_name)
    }

    /// Where the answer to this request goes: `…/{op}/accepted` or
    /// `…/{op}/rejected`.
    pub fn answer_topic(&self, accepted: bool) -> String {
        let outcome = if accepted { "accepted" } else { "rejected" };
        format!("{}/{}/{outcome}", prefix(self.thing_name, self.shadow_name), self.op.as_str())
    }
}

pub(crate) fn thing_id(thing_name: &str, settings: &ShadowSettings) -> Option<ThingId> {
    if thing_name.contains(':') {
        ThingId::parse(thing_name).ok()
    } else {
        ThingId::from_parts(&settings.namespace, thing_name).ok()
    }
}

/// The thing name of a thing id, the inverse of [`thing_id`]: the bare
/// name in the configured namespace when it has no `:` of its own, else
/// the whole id. `None` when the id cannot be a thing name (AWS's
/// characters and length, `.` allowed).
pub(crate) fn thing_name(id: &ThingId, settings: &ShadowSettings) -> Option<String> {
    let name = if id.namespace() == settings.namespace && !id.name().contains(':') {
        id.name()
    } else {
        id.as_str()
    };
    is_aws_name(name, MAX_THING_NAME_BYTES).then(|| name.to_owned())
}

/// Whether a feature id can be a shadow name in a topic.
pub(crate) fn is_shadow_name(name: &str) -> bool {
    is_aws_name(name, MAX_SHADOW_NAME_BYTES)
}

/// AWS's thing and shadow names, `[a-zA-Z0-9:_-]`, one to `max` bytes,
/// and `.` beside them, which AWS does not allow, so that a Ditto
/// namespace (`org.acme`) and feature ids with dots fit in a topic.
fn is_aws_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-:.".contains(&b))
}

/// `$aws/things/{thing}/shadow[/name/{shadow}]`.
pub(crate) fn prefix(thing_name: &str, shadow_name: Option<&str>) -> String {
    match shadow_name {
        None => format!("{AWS_THINGS}/{thing_name}/shadow"),
        Some(shadow) => format!("{AWS_THINGS}/{thing_name}/shadow/name/{shadow}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_and_named_request_topics() {
        let classic = ShadowTopic::parse("$aws/things/lamp-1/shadow/update").unwrap();
        assert_eq!(
            classic,
            ShadowTopic { thing_name: "lamp-1", shadow_name: None, op: Op::Update }
        );
        assert_eq!(classic.answer_topic(true), "$aws/things/lamp-1/shadow/update/accepted");
        let named = ShadowTopic::parse("$aws/things/lamp-1/shadow/name/cfg/delete").unwrap();
        assert_eq!(named.shadow_name, Some("cfg"));
        assert_eq!(named.answer_topic(false), "$aws/things/lamp-1/shadow/name/cfg/delete/rejected");
        assert_eq!(named.display_name(), "cfg");
        assert_eq!(classic.display_name(), "lamp-1");
    }

    #[test]
    fn other_topics_are_not_requests() {
        for topic in [
            "$aws/things/lamp/shadow/update/accepted",
            "$aws/things/lamp/shadow/update/delta",
            "$aws/things/lamp/shadow/list",
            "$aws/things/lamp/jobs/get",
            "$aws/things//shadow/get",
            "$aws/things/la mp/shadow/get",
            "$aws/things/lamp/shadow/name//get",
            "$aws/things/lamp/shadow/name/a+b/get",
            "$aws/thingsx/lamp/shadow/get",
        ] {
            assert_eq!(ShadowTopic::parse(topic), None, "{topic}");
        }
        let long = format!("$aws/things/{}/shadow/get", "a".repeat(129));
        assert_eq!(ShadowTopic::parse(&long), None);
        let longest = format!("$aws/things/{}/shadow/get", "a".repeat(128));
        assert!(ShadowTopic::parse(&longest).is_some());
        let long_shadow = format!("$aws/things/a/shadow/name/{}/get", "s".repeat(65));
        assert_eq!(ShadowTopic::parse(&long_shadow), None);
    }

    #[test]
    fn a_delta_topic_names_its_shadow() {
        let named = ShadowTopic::of_delta_topic("$aws/things/a/shadow/name/cfg/update/delta");
        assert_eq!(
            named,
            Some(ShadowTopic { thing_name: "a", shadow_name: Some("cfg"), op: Op::Get })
        );
        let classic = ShadowTopic::of_delta_topic("$aws/things/a/shadow/update/delta").unwrap();
        assert_eq!(classic.shadow_name, None);
        for other in [
            "$aws/things/+/shadow/update/delta",
            "$aws/things/a/shadow/update/#",
            "$aws/things/a/shadow/update/documents",
        ] {
            assert_eq!(ShadowTopic::of_delta_topic(other), None, "{other}");
        }
    }

    #[test]
    fn thing_names_map_to_ids_and_back() {
        let settings = ShadowSettings::default();
        let id = thing_id("lamp-1", &settings).unwrap();
        assert_eq!(id.as_str(), "devices:lamp-1");
        assert_eq!(thing_name(&id, &settings).as_deref(), Some("lamp-1"));
        let full = thing_id("org.acme:lamp", &settings).unwrap();
        assert_eq!(full.as_str(), "org.acme:lamp");
        assert_eq!(thing_name(&full, &settings).as_deref(), Some("org.acme:lamp"));
        // A name in the namespace that holds a colon maps back whole.
        let colon = ThingId::parse("devices:a:b").unwrap();
        assert_eq!(thing_name(&colon, &settings).as_deref(), Some("devices:a:b"));
        assert_eq!(thing_id("devices:a:b", &settings), Some(colon));
        let spaced = ThingId::parse("devices:a b").unwrap();
        assert_eq!(thing_name(&spaced, &settings), None);
    }
}
