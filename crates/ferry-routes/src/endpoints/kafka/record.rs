//! A routed message as a Kafka record: the payload is the value, the MQTT
//! topic, QoS, content type and user properties are headers, the time the
//! edge received it is the timestamp. docs/routes.md (`### kafka`) is the
//! contract consumers code against; change both together.

use ferry_broker::Message;
use rdkafka::message::{Header, OwnedHeaders};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The MQTT topic the message was published on.
pub const HEADER_TOPIC: &str = "mqtt.topic";
/// Its QoS, `"0"`, `"1"` or `"2"`.
pub const HEADER_QOS: &str = "mqtt.qos";
/// Its MQTT 5 content type, when it had one.
pub const HEADER_CONTENT_TYPE: &str = "mqtt.content_type";

/// The headers of `message`: Ferry's own first, then each MQTT 5 user
/// property under its own name, in order (Kafka headers, like user
/// properties, may repeat a name).
pub fn headers(message: &Message) -> OwnedHeaders {
    let properties = &message.properties;
    let capacity = 3 + properties.user_properties.len();
    let qos = [b'0' + message.qos as u8];
    let mut headers = OwnedHeaders::new_with_capacity(capacity)
        .insert(Header { key: HEADER_TOPIC, value: Some(message.topic.as_str()) })
        .insert(Header { key: HEADER_QOS, value: Some(&qos[..]) });
    if let Some(content_type) = &properties.content_type {
        headers =
            headers.insert(Header { key: HEADER_CONTENT_TYPE, value: Some(content_type.as_str()) });
    }
    for (name, value) in &properties.user_properties {
        headers = headers.insert(Header { key: name.as_str(), value: Some(value.as_str()) });
    }
    headers
}

/// The wall-clock time the edge received `message`, in Unix ms: what the
/// record's timestamp says, so a backlog sent after an outage keeps the
/// times its data was made at rather than the time the link came back.
pub fn received_at_ms(message: &Message, wall: SystemTime, monotonic: Instant) -> i64 {
    let age = monotonic.saturating_duration_since(message.received_at);
    let received = wall.checked_sub(age).unwrap_or(wall);
    received
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_mqtt::{ByteStr, Properties, QoS};
    use rdkafka::message::Headers;
    use std::time::Duration;

    #[test]
    fn headers_carry_topic_qos_content_type_and_user_properties() {
        let mut properties = Properties::default();
        properties.content_type = Some(ByteStr::from("application/json"));
        properties.user_properties =
            vec![(ByteStr::from("site"), ByteStr::from("plant-1")), ("site".into(), "b".into())];
        let message =
            Message::new("a/b".into(), "x".into(), QoS::AtLeastOnce, false, properties, 7);
        let headers = headers(&message);
        let pairs: Vec<(&str, &[u8])> =
            headers.iter().map(|header| (header.key, header.value.unwrap())).collect();
        assert_eq!(
            pairs,
            [
                ("mqtt.topic", &b"a/b"[..]),
                ("mqtt.qos", b"1"),
                ("mqtt.content_type", b"application/json"),
                ("site", b"plant-1"),
                ("site", b"b"),
            ]
        );
    }

    #[test]
    fn the_timestamp_is_the_time_of_receipt() {
        let message =
            Message::new("a".into(), "x".into(), QoS::AtMostOnce, false, Properties::default(), 0);
        let wall = UNIX_EPOCH + Duration::from_secs(1_000);
        let later = message.received_at + Duration::from_millis(2_500);
        assert_eq!(received_at_ms(&message, wall, later), 997_500);
    }
}
