//! Topic names across the link, both ways: the rewrite of each outgoing
//! topic (`strip_prefix`, then `remote_prefix`), and the map from a remote
//! subscription's filter to the local topic its messages arrive on.
//! Resolved once, at setup, so each message only compares and copies.

use ferry_mqtt::topic::{is_shared_filter, is_valid_topic_name};
use ferry_mqtt::ByteStr;

/// The rewrite of outgoing topics: strip first, then prepend.
#[derive(Debug, Clone, Default)]
pub(crate) struct OutboundRewrite {
    strip: String,
    prepend: String,
}

impl OutboundRewrite {
    pub(crate) fn new(strip_prefix: &str, remote_prefix: &str) -> OutboundRewrite {
        OutboundRewrite { strip: strip_prefix.to_owned(), prepend: remote_prefix.to_owned() }
    }

    /// The remote topic of `topic`; `None` when nothing would be left of it
    /// (the topic was exactly `strip_prefix` and there is no
    /// `remote_prefix`), which no MQTT broker accepts. Without a rewrite
    /// the topic is shared, not copied.
    pub(crate) fn apply(&self, topic: &ByteStr) -> Option<ByteStr> {
        if self.strip.is_empty() && self.prepend.is_empty() {
            return Some(topic.clone());
        }
        let rest = topic.strip_prefix(self.strip.as_str()).unwrap_or(topic);
        let mut remote = String::with_capacity(self.prepend.len() + rest.len());
        remote.push_str(&self.prepend);
        remote.push_str(rest);
        is_valid_topic_name(&remote).then(|| ByteStr::from(remote))
    }
}

/// Why a `subscribe` entry cannot be mapped; each names its side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TopicMapError {
    Remote(&'static str),
    Local(&'static str),
}

/// One level of a remote filter.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Level {
    Exact(String),
    /// `+`
    Any,
}

/// Where a matched message goes locally.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Local {
    /// Every message to this one topic.
    Topic(String),
    /// What the remote `#` matched, under this prefix (no trailing `/`;
    /// empty for a local `#`).
    Under(String),
}

/// A remote filter and the local topic (or `prefix/#`) its messages are
/// published on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InboundMap {
    /// The filter's levels before any `#`, `$share/{group}/` removed: the
    /// remote sends the topic the message was published on.
    levels: Vec<Level>,
    /// Whether the filter ends in `#`.
    rest: bool,
    local: Local,
}

impl InboundMap {
    /// Checks that `remote` (a valid filter) can be mapped to `local` (a
    /// valid topic or filter): a local filter may only be `prefix/#` or
    /// `#`, and then the remote one must end in `#` too, whose match it
    /// keeps.
    pub(crate) fn new(remote: &str, local: &str) -> Result<InboundMap, TopicMapError> {
        let plain = if is_shared_filter(remote) {
            // `$share/{group}/{filter}`: the group is not part of topics.
            remote.splitn(3, '/').nth(2).unwrap_or_default()
        } else {
            remote
        };
        // `#` alone has no levels before it; `/#` has one, empty.
        let (before, rest) = match plain.strip_suffix('#') {
            Some("") => (None, true),
            Some(before) => (before.strip_suffix('/'), true),
            None => (Some(plain), false),
        };
        let levels = before.map_or_else(Vec::new, |before| {
            before
                .split('/')
                .map(|level| match level {
                    "+" => Level::Any,
                    exact => Level::Exact(exact.to_owned()),
                })
                .collect()
        });
        let local = if is_valid_topic_name(local) {
            Local::Topic(local.to_owned())
        } else {
            let prefix = local.strip_suffix('#').ok_or(TopicMapError::Local(
                "a local filter may only be `prefix/#` (or `#`): its `#` stands for what the \
                 remote `#` matched",
            ))?;
            let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
            if prefix.contains('+') {
                return Err(TopicMapError::Local(
                    "`+` has nothing to stand for locally: use `prefix/#` or a topic",
                ));
            }
            if !rest {
                return Err(TopicMapError::Remote(
                    "must end in `#` when `local` does: the local `#` keeps what it matched",
                ));
            }
            Local::Under(prefix.to_owned())
        };
        Ok(InboundMap { levels, rest, local })
    }

    /// The local topic of a message the remote sent on `topic`, if `topic`
    /// matches the remote filter. `None` also when nothing would be left of
    /// it: the parent level that `#` matches (`a` for `a/#`) under a
    /// local `#`.
    pub(crate) fn local_topic(&self, topic: &str) -> Option<String> {
        // A filter starting with a wildcard does not match `$` topics
        // (MQTT-4.7.2-1).
        let wildcard_first = matches!(self.levels.first(), Some(Level::Any) | None);
        if wildcard_first && topic.starts_with('$') {
            return None;
        }
        let mut remaining = Some(topic);
        for level in &self.levels {
            let (this, next) = match remaining?.split_once('/') {
                Some((this, next)) => (this, Some(next)),
                None => (remaining?, None),
            };
            if let Level::Exact(exact) = level {
                if exact != this {
                    return None;
                }
            }
            remaining = next;
        }
        if remaining.is_some() && !self.rest {
            return None;
        }
        match &self.local {
            Local::Topic(local) => Some(local.clone()),
            Local::Under(prefix) => match (prefix.is_empty(), remaining) {
                (true, None) => None,
                (true, Some(rest)) => Some(rest.to_owned()),
                (false, None) => Some(prefix.clone()),
                (false, Some(rest)) => Some(format!("{prefix}/{rest}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbound_strips_then_prepends() {
        let topic = |text: &str| ByteStr::from(text);
        let rewrite = OutboundRewrite::new("telemetry/", "edge-1/");
        assert_eq!(rewrite.apply(&topic("telemetry/a/b")).unwrap(), "edge-1/a/b");
        assert_eq!(rewrite.apply(&topic("alarms/a")).unwrap(), "edge-1/alarms/a");
        assert_eq!(rewrite.apply(&topic("telemetry/")).unwrap(), "edge-1/");
        let strip_only = OutboundRewrite::new("telemetry/", "");
        assert_eq!(strip_only.apply(&topic("telemetry/a")).unwrap(), "a");
        assert_eq!(strip_only.apply(&topic("telemetry/")), None);
        let none = OutboundRewrite::default();
        assert_eq!(none.apply(&topic("a/b")).unwrap(), "a/b");
    }

    #[test]
    fn inbound_keeps_what_hash_matched() {
        let map = InboundMap::new("commands/edge-1/#", "commands/#").unwrap();
        assert_eq!(map.local_topic("commands/edge-1/reboot").unwrap(), "commands/reboot");
        assert_eq!(map.local_topic("commands/edge-1/a/b/").unwrap(), "commands/a/b/");
        assert_eq!(map.local_topic("commands/edge-1").unwrap(), "commands");
        assert_eq!(map.local_topic("commands/edge-2/reboot"), None);
        assert_eq!(map.local_topic("commands"), None);

        let plus = InboundMap::new("$share/g/sites/+/commands/#", "in/#").unwrap();
        assert_eq!(plus.local_topic("sites/7/commands/x").unwrap(), "in/x");
        assert_eq!(plus.local_topic("sites/7/status/x"), None);

        let all = InboundMap::new("#", "#").unwrap();
        assert_eq!(all.local_topic("a/b").unwrap(), "a/b");
        assert_eq!(all.local_topic("$SYS/x"), None, "wildcards do not match $ topics");

        let empty_first = InboundMap::new("/#", "up/#").unwrap();
        assert_eq!(empty_first.local_topic("/x").unwrap(), "up/x");
        assert_eq!(empty_first.local_topic("x"), None);

        let under_root = InboundMap::new("down/#", "#").unwrap();
        assert_eq!(under_root.local_topic("down/x").unwrap(), "x");
        assert_eq!(under_root.local_topic("down"), None, "nothing left to name it");
    }

    #[test]
    fn inbound_to_one_topic() {
        let map = InboundMap::new("config/+/set", "config/set").unwrap();
        assert_eq!(map.local_topic("config/a/set").unwrap(), "config/set");
        assert_eq!(map.local_topic("config/a/set/more"), None);
        assert_eq!(map.local_topic("config/a"), None);
        let exact = InboundMap::new("a/b", "c").unwrap();
        assert_eq!(exact.local_topic("a/b").unwrap(), "c");
        assert_eq!(exact.local_topic("a/b/c"), None);
    }

    #[test]
    fn unmappable_pairs_name_their_side() {
        assert!(matches!(InboundMap::new("a/+", "b/#"), Err(TopicMapError::Remote(_))));
        assert!(matches!(InboundMap::new("a/#", "b/+/#"), Err(TopicMapError::Local(_))));
        assert!(matches!(InboundMap::new("a/#", "b/+"), Err(TopicMapError::Local(_))));
    }
}
