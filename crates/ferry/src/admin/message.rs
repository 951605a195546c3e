//! A message as the admin API shows it (retained messages, the topic
//! stream): the payload as text when it is UTF-8, always as base64, and
//! the MQTT 5 properties that travel with it.

use base64::Engine;
use ferry_broker::Message;
use serde_json::{json, Map, Value};

/// `{"topic", "qos", "retain", "payload", "payload_base64", "size",
/// "properties"?}`.
pub(super) fn to_json(message: &Message) -> Value {
    let mut value = json!({
        "topic": message.topic.as_str(),
        "qos": message.qos as u8,
        "retain": message.retain,
        "payload": std::str::from_utf8(&message.payload).ok(),
        "payload_base64": base64::engine::general_purpose::STANDARD.encode(&message.payload),
        "size": message.payload.len(),
    });
    let properties = properties(message);
    if !properties.is_empty() {
        value["properties"] = Value::Object(properties);
    }
    value
}

fn properties(message: &Message) -> Map<String, Value> {
    let mut out = Map::new();
    let properties = &message.properties;
    if let Some(content_type) = &properties.content_type {
        out.insert("content_type".into(), content_type.as_str().into());
    }
    if let Some(format) = properties.payload_format_indicator {
        out.insert("payload_format_indicator".into(), format.into());
    }
    if let Some(expiry) = properties.message_expiry_interval {
        out.insert("message_expiry_interval".into(), expiry.into());
    }
    if let Some(topic) = &properties.response_topic {
        out.insert("response_topic".into(), topic.as_str().into());
    }
    if let Some(data) = &properties.correlation_data {
        let data = base64::engine::general_purpose::STANDARD.encode(data);
        out.insert("correlation_data_base64".into(), data.into());
    }
    if !properties.user_properties.is_empty() {
        // An object, as the publish body takes them; a repeated key keeps
        // its last value here.
        let user: Map<String, Value> = properties
            .user_properties
            .iter()
            .map(|(key, value)| (key.as_str().to_owned(), value.as_str().into()))
            .collect();
        out.insert("user_properties".into(), Value::Object(user));
    }
    out
}
