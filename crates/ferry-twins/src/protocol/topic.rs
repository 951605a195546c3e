//! A Ditto protocol topic path, as Ditto's `ImmutableTopicPath` reads it:
//! `{namespace}/{name}/{group}/{channel}/{criterion}/{action}`, where
//! policies have no channel, errors no action, and a message's subject
//! (`…/things/live/messages/{subject}`) takes the rest, slashes and all.
//! `_/_` stands for no entity in particular (a search, `retrieve` of
//! several things).

use crate::error::DittoError;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Things,
    Policies,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Twin,
    Live,
    /// Policies have none.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criterion {
    Commands,
    Events,
    Search,
    Messages,
    Errors,
    Acks,
    Announcements,
    Streaming,
}

impl Criterion {
    fn parse(text: &str) -> Option<Criterion> {
        Some(match text {
            "commands" => Criterion::Commands,
            "events" => Criterion::Events,
            "search" => Criterion::Search,
            "messages" => Criterion::Messages,
            "errors" => Criterion::Errors,
            "acks" => Criterion::Acks,
            "announcements" => Criterion::Announcements,
            "streaming" => Criterion::Streaming,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Criterion::Commands => "commands",
            Criterion::Events => "events",
            Criterion::Search => "search",
            Criterion::Messages => "messages",
            Criterion::Errors => "errors",
            Criterion::Acks => "acks",
            Criterion::Announcements => "announcements",
            Criterion::Streaming => "streaming",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic {
    pub namespace: String,
    pub name: String,
    pub group: Group,
    pub channel: Channel,
    pub criterion: Criterion,
    /// The action (`modify`, `created`), a message's subject or an
    /// acknowledgement's label; empty for errors.
    pub action: String,
}

impl Topic {
    pub fn parse(text: &str) -> Result<Topic, DittoError> {
        let unknown = || unknown_topic_path(text);
        let mut parts = text.splitn(4, '/');
        let (Some(namespace), Some(name), Some(group), Some(rest)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(unknown());
        };
        let (group, channel, rest) = match group {
            "things" => {
                let (channel, rest) = rest.split_once('/').ok_or_else(unknown)?;
                let channel = match channel {
                    "twin" => Channel::Twin,
                    "live" => Channel::Live,
                    _ => return Err(unknown()),
                };
                (Group::Things, channel, rest)
            }
            "policies" => (Group::Policies, Channel::None, rest),
            _ => return Err(unknown()),
        };
        let (criterion, action) = rest.split_once('/').unwrap_or((rest, ""));
        let criterion = Criterion::parse(criterion).ok_or_else(unknown)?;
        // Only a message's subject may hold slashes; every other criterion
        // but errors needs exactly one level of action, and acknowledgements
        // have none when several are aggregated.
        let action_fits = match criterion {
            Criterion::Errors => action.is_empty(),
            Criterion::Acks => !action.contains('/'),
            Criterion::Messages => !action.is_empty(),
            _ => !action.is_empty() && !action.contains('/'),
        };
        if namespace.is_empty() || name.is_empty() || !action_fits {
            return Err(unknown());
        }
        Ok(Topic {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            group,
            channel,
            criterion,
            action: action.to_owned(),
        })
    }

    /// The same entity and channel with another criterion and action: a
    /// command's error (`errors`, ``), an event (`events`, `modified`).
    pub fn with(&self, criterion: Criterion, action: &str) -> Topic {
        Topic { criterion, action: action.to_owned(), ..self.clone() }
    }

    /// `namespace:name`, or `None` for `_/_`.
    pub fn entity_id(&self) -> Option<String> {
        (self.namespace != "_" || self.name != "_")
            .then(|| format!("{}:{}", self.namespace, self.name))
    }
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/", self.namespace, self.name)?;
        match (self.group, self.channel) {
            (Group::Policies, _) => f.write_str("policies/")?,
            (Group::Things, Channel::Live) => f.write_str("things/live/")?,
            (Group::Things, _) => f.write_str("things/twin/")?,
        }
        f.write_str(self.criterion.as_str())?;
        if !self.action.is_empty() {
            write!(f, "/{}", self.action)?;
        }
        Ok(())
    }
}

/// Ditto's `UnknownTopicPathException`.
pub fn unknown_topic_path(topic: &str) -> DittoError {
    DittoError::new(
        400,
        "protocoladapter:unknown.topicpath",
        format!("The topic path '{topic}' is not supported."),
        "Check if the topic path is correct.".to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_read_and_written_back_unchanged() {
        for text in [
            "org.acme/lamp-1/things/twin/commands/modify",
            "org.acme/lamp-1/things/twin/events/modified",
            "org.acme/lamp-1/things/twin/errors",
            "org.acme/lamp-1/things/live/messages/ask/for/time",
            "org.acme/lamp-1/things/twin/acks/twin-persisted",
            "org.acme/lamp-1/things/twin/acks",
            "org.acme/p/policies/commands/create",
            "org.acme/p/policies/errors",
            "_/_/things/twin/search/subscribe",
        ] {
            assert_eq!(Topic::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn parts_are_where_ditto_puts_them() {
        let topic = Topic::parse("org.acme/lamp-1/things/live/messages/ask/time").unwrap();
        assert_eq!(topic.entity_id().as_deref(), Some("org.acme:lamp-1"));
        assert_eq!(
            (topic.group, topic.channel, topic.criterion),
            (Group::Things, Channel::Live, Criterion::Messages)
        );
        assert_eq!(topic.action, "ask/time");
        assert_eq!(Topic::parse("_/_/things/twin/commands/retrieve").unwrap().entity_id(), None);
    }

    #[test]
    fn what_ditto_does_not_know_is_an_unknown_topic_path() {
        for text in [
            "",
            "org.acme/lamp-1",
            "org.acme/lamp-1/things/commands/modify",
            "org.acme/lamp-1/things/twin/commands",
            "org.acme/lamp-1/things/twin/commands/modify/more",
            "org.acme/lamp-1/things/twin/errors/x",
            "org.acme/lamp-1/things/twin/orders/modify",
            "org.acme/lamp-1/connections/commands/modify",
            "/lamp-1/things/twin/commands/modify",
        ] {
            let error = Topic::parse(text).unwrap_err();
            assert_eq!(
                (error.status, error.error),
                (400, "protocoladapter:unknown.topicpath"),
                "{text}"
            );
        }
    }
}
