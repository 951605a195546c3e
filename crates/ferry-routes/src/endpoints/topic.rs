//! The `topic` endpoint: republishes routed messages on a local topic made
//! from a template, for re-mapping and fan-in (`sensors/+/temp` from many
//! devices into one `plant/temps`).
//!
//! Republished messages are not routed again: a template whose topic
//! matched its own route would otherwise loop for ever.

use crate::sink::{Sent, Sink, SinkError};
use ferry_broker::endpoint::RoutedMessage;
use ferry_broker::{Broker, Message};
use ferry_mqtt::topic::is_valid_topic_name;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicEndpointConfig {
    /// The topic to publish on. `{topic}` stands for the message's whole
    /// topic, `{topic[N]}` for its level N, counted from 0 as in route
    /// conditions (empty beyond the last level), and `{clientid}` for its
    /// publisher's client id (empty for a message the broker made).
    pub topic: String,
}

/// A template, split once into literal text and placeholders.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Topic,
    Level(usize),
    ClientId,
}

impl TopicTemplate {
    /// A template whose expansion must be an MQTT topic name.
    pub fn parse(template: &str) -> Result<TopicTemplate, String> {
        let template = TopicTemplate::parse_any(template)?;
        // With placeholders standing for one level each, the result must be
        // a topic a client could publish on.
        if !is_valid_topic_name(&template.expand("x", Some("x"))) {
            return Err(format!(
                "{:?} does not make a valid topic name",
                template.expand("{…}", Some("{…}"))
            ));
        }
        Ok(template)
    }

    /// A template whose expansion is checked by its user, for text that is
    /// not an MQTT topic (a Kafka key or topic name).
    pub fn parse_any(template: &str) -> Result<TopicTemplate, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("{template:?}: a '{{' without its '}}'"))?;
            let name = &rest[open + 1..open + close];
            parts.push(match name {
                "topic" => Part::Topic,
                "clientid" => Part::ClientId,
                _ => match name.strip_prefix("topic[").and_then(|n| n.strip_suffix(']')) {
                    Some(index) => Part::Level(index.parse().map_err(|_| {
                        format!("{template:?}: {{{name}}} needs a level number, like {{topic[1]}}")
                    })?),
                    None => {
                        return Err(format!(
                            "{template:?}: unknown placeholder {{{name}}} (known: {{topic}}, {{topic[N]}}, {{clientid}})"
                        ))
                    }
                },
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(TopicTemplate { parts })
    }

    /// Whether the expansion depends on the message's topic.
    pub fn has_placeholders(&self) -> bool {
        self.parts.iter().any(|part| !matches!(part, Part::Text(_)))
    }

    /// The template filled in for a message on `topic` from the client
    /// `client_id`.
    pub fn expand(&self, topic: &str, client_id: Option<&str>) -> String {
        let mut out = String::with_capacity(topic.len() + 16);
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Topic => out.push_str(topic),
                Part::Level(index) => out.push_str(topic.split('/').nth(*index).unwrap_or("")),
                Part::ClientId => out.push_str(client_id.unwrap_or("")),
            }
        }
        out
    }
}

pub struct TopicSink {
    broker: Arc<Broker>,
    template: TopicTemplate,
}

impl TopicSink {
    pub fn new(broker: Arc<Broker>, config: &TopicEndpointConfig) -> Result<TopicSink, String> {
        Ok(TopicSink { broker, template: TopicTemplate::parse(&config.topic)? })
    }
}

impl Sink for TopicSink {
    async fn connect(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    async fn send(&mut self, batch: &[RoutedMessage]) -> Result<Sent, SinkError> {
        let mut sent = Sent::default();
        for routed in batch {
            let original = &routed.message;
            let topic = self.template.expand(&original.topic, routed.publisher.as_deref());
            if !is_valid_topic_name(&topic) {
                // `{topic[N]}` of a message may hold nothing or make `//`
                // legal, but an empty topic is not: drop it, counted.
                sent.rejected.push((routed.offset, "invalid_topic"));
                continue;
            }
            let message = Message::new(
                topic.into(),
                original.payload.clone(),
                original.qos,
                original.retain,
                original.properties.clone(),
                original.origin_session,
            );
            self.broker.publish_unrouted(message);
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_the_topic_and_its_levels() {
        let template = TopicTemplate::parse("plant/{topic[1]}/from/{topic}").unwrap();
        assert_eq!(template.expand("sensors/s7/temp", None), "plant/s7/from/sensors/s7/temp");
        assert_eq!(TopicTemplate::parse("fixed").unwrap().expand("a/b", None), "fixed");
        assert_eq!(TopicTemplate::parse("{topic[5]}x").unwrap().expand("a/b", None), "x");
        let by_client = TopicTemplate::parse("devices/{clientid}/{topic[1]}").unwrap();
        assert_eq!(by_client.expand("t/x", Some("dev-1")), "devices/dev-1/x");
        assert_eq!(by_client.expand("t/x", None), "devices//x");
        for bad in ["a/{topic", "a/{nope}", "a/{topic[x]}", "a/#", "a/+/b"] {
            assert!(TopicTemplate::parse(bad).is_err(), "{bad}");
        }
    }
}
