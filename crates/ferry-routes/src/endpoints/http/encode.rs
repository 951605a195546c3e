//! A batch as the http endpoint's request body: one JSON object per
//! message, in a JSON array or one per line (NDJSON). docs/routes.md
//! (`### http`) is the contract receivers code against; change both
//! together.
//!
//! ```json
//! {"topic": "plant/3/temp", "payload": {"t": 21.5}, "qos": 1, "retain": false,
//!  "properties": {"content_type": "application/json", "user_properties": [["site", "plant-3"]]},
//!  "received_at": "2025-01-31T12:00:00.123Z"}
//! ```

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ferry_broker::endpoint::RoutedMessage;
use ferry_mqtt::ByteStr;
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How a batch is laid out in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One JSON array of messages (`application/json`).
    #[default]
    Json,
    /// One message per line, each line a JSON object ending in `\n`
    /// (`application/x-ndjson`), for receivers that stream or append.
    Ndjson,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Ndjson => "application/x-ndjson",
        }
    }
}

/// Encoding a batch failed. It cannot for the types below (every map key
/// is a string, every value is plain data); the error is typed so that an
/// impossible case is an error for the flow rather than a panic in it.
#[derive(Debug, thiserror::Error)]
#[error("cannot encode the batch as JSON: {0}")]
pub struct EncodeError(#[from] serde_json::Error);

/// The clock a batch is encoded against: messages carry a monotonic
/// `Instant` of receipt, and the wall-clock time of receipt is found from
/// how long ago that was.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub wall: SystemTime,
    pub monotonic: Instant,
}

impl Clock {
    pub fn now() -> Clock {
        Clock { wall: SystemTime::now(), monotonic: Instant::now() }
    }
}

/// The body for `batch`.
pub fn batch(
    batch: &[RoutedMessage],
    format: Format,
    clock: Clock,
) -> Result<Vec<u8>, EncodeError> {
    // Escaping and base64 grow a message by a small constant factor; the
    // flow's `batch.max_bytes` bounds the sum, so this is a first guess,
    // not a limit.
    let guess: usize = batch
        .iter()
        .map(|routed| routed.message.payload.len() + routed.message.topic.len() + 128)
        .sum();
    let mut out = Vec::with_capacity(guess + 2);
    if format == Format::Json {
        out.push(b'[');
    }
    for (index, routed) in batch.iter().enumerate() {
        if format == Format::Json && index > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &JsonMessage::of(routed, clock))?;
        if format == Format::Ndjson {
            out.push(b'\n');
        }
    }
    if format == Format::Json {
        out.push(b']');
    }
    Ok(out)
}

/// One message, borrowed from the routed message: nothing is copied but
/// the payload of the rare JSON payload that spans lines.
#[derive(Serialize)]
struct JsonMessage<'a> {
    topic: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<Payload<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_base64: Option<String>,
    qos: u8,
    retain: bool,
    #[serde(skip_serializing_if = "JsonProperties::is_empty")]
    properties: JsonProperties<'a>,
    received_at: String,
}

/// Payloads that are JSON go in as JSON, so that a receiver of an array of
/// objects gets `{"payload": {"t": 21.5}}`, not a string it must parse
/// again: most device payloads are JSON, and that is what a receiver
/// wants. (edgeHub posts each message's body as is, which works for one
/// message per request but not for a batch.) The bytes are embedded as
/// they came, not re-serialized, so numbers keep their precision. Other
/// UTF-8 text is a JSON string; anything else is base64.
#[derive(Serialize)]
#[serde(untagged)]
enum Payload<'a> {
    Json(&'a RawValue),
    /// A JSON payload with line breaks, re-laid on one line (NDJSON
    /// needs that; the array gets the same bytes, so the two formats
    /// differ only in framing).
    JsonOneLine(Box<RawValue>),
    Text(&'a str),
}

impl<'a> Payload<'a> {
    /// The payload's JSON form, or `None` if it is not UTF-8.
    fn of(payload: &'a [u8]) -> Option<Payload<'a>> {
        let text = std::str::from_utf8(payload).ok()?;
        let Ok(json) = serde_json::from_str::<&RawValue>(text) else {
            return Some(Payload::Text(text));
        };
        if !json.get().contains(['\n', '\r']) {
            return Some(Payload::Json(json));
        }
        // In valid JSON a raw line break can only be whitespace between
        // tokens (inside strings it must be escaped), so a space in its
        // place means the same.
        let one_line = json.get().replace(['\n', '\r'], " ");
        Some(match RawValue::from_string(one_line) {
            Ok(raw) => Payload::JsonOneLine(raw),
            Err(_) => Payload::Text(text),
        })
    }
}

/// The MQTT 5 properties a receiver can use; absent ones are left out, and
/// so is the whole object when none is set.
#[derive(Serialize)]
struct JsonProperties<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    content_type: Option<&'a str>,
    #[serde(skip_serializing_if = "UserProperties::is_empty")]
    user_properties: UserProperties<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_data_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_topic: Option<&'a str>,
    /// What is left of it when the batch is encoded, in whole seconds, as
    /// MQTT 5 forwards it.
    #[serde(skip_serializing_if = "Option::is_none")]
    message_expiry_interval: Option<u32>,
}

impl JsonProperties<'_> {
    fn is_empty(&self) -> bool {
        self.content_type.is_none()
            && self.user_properties.is_empty()
            && self.correlation_data_base64.is_none()
            && self.response_topic.is_none()
            && self.message_expiry_interval.is_none()
    }
}

/// `[["name", "value"], ...]`: pairs rather than an object, since MQTT
/// allows a name more than once and the order is meaningful.
struct UserProperties<'a>(&'a [(ByteStr, ByteStr)]);

impl UserProperties<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for UserProperties<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for (name, value) in self.0 {
            seq.serialize_element(&[name.as_str(), value.as_str()])?;
        }
        seq.end()
    }
}

impl<'a> JsonMessage<'a> {
    fn of(routed: &'a RoutedMessage, clock: Clock) -> JsonMessage<'a> {
        let message = &routed.message;
        let payload = Payload::of(&message.payload);
        let payload_base64 = payload.is_none().then(|| BASE64.encode(&message.payload));
        let properties = &message.properties;
        let age = clock.monotonic.saturating_duration_since(message.received_at);
        let received_at = clock.wall.checked_sub(age).unwrap_or(clock.wall);
        JsonMessage {
            topic: message.topic.as_str(),
            payload,
            payload_base64,
            qos: message.qos as u8,
            retain: message.retain,
            properties: JsonProperties {
                content_type: properties.content_type.as_ref().map(ByteStr::as_str),
                user_properties: UserProperties(&properties.user_properties),
                correlation_data_base64: properties
                    .correlation_data
                    .as_ref()
                    .map(|data| BASE64.encode(data)),
                response_topic: properties.response_topic.as_ref().map(ByteStr::as_str),
                message_expiry_interval: message.remaining_expiry_secs(clock.monotonic),
            },
            received_at: rfc3339_ms(received_at),
        }
    }
}

/// `2025-01-31T12:00:00.123Z`: RFC 3339 in UTC with milliseconds, which
/// every JSON consumer parses and which sorts as text.
pub fn rfc3339_ms(time: SystemTime) -> String {
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since_epoch.as_secs();
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        since_epoch.subsec_millis()
    )
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days on or after the epoch): the
/// calendar math is a dozen lines, not worth a date crate.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_broker::Message;
    use ferry_mqtt::PropertyValues;
    use ferry_mqtt::QoS;
    use serde_json::{json, Value};

    fn routed(payload: &[u8], properties: PropertyValues) -> RoutedMessage {
        RoutedMessage {
            offset: 7,
            stored_bytes: 0,
            priority: 9,
            expires_at_ms: 0,
            message: Message::new(
                ByteStr::from_static("plant/3/temp"),
                Bytes::copy_from_slice(payload),
                QoS::AtLeastOnce,
                false,
                properties.into(),
                1,
            ),
            publisher: None,
        }
    }

    fn encode(messages: &[RoutedMessage], format: Format) -> String {
        String::from_utf8(batch(messages, format, Clock::now()).unwrap()).unwrap()
    }

    fn one(payload: &[u8]) -> Value {
        let body: Value = serde_json::from_str(&encode(
            &[routed(payload, PropertyValues::default())],
            Format::Json,
        ))
        .unwrap();
        body[0].clone()
    }

    #[test]
    fn json_payloads_are_embedded_text_is_a_string_binary_is_base64() {
        let json_payload = one(br#"{"t": 21.5, "big": 12345678901234567890}"#);
        assert_eq!(json_payload["payload"]["t"], json!(21.5));
        assert!(json_payload.get("payload_base64").is_none());
        assert_eq!(one(b"42")["payload"], json!(42));
        assert_eq!(one(b"hello")["payload"], json!("hello"));
        assert_eq!(one(b"")["payload"], json!(""));
        let binary = one(&[0xff, 0x00, 0x01]);
        assert!(binary.get("payload").is_none());
        assert_eq!(binary["payload_base64"], json!("/wAB"));
        // Embedded as written: a number beyond f64 keeps its digits.
        let text = encode(
            &[routed(br#"{"big": 12345678901234567890}"#, PropertyValues::default())],
            Format::Json,
        );
        assert!(text.contains("12345678901234567890"), "{text}");
    }

    #[test]
    fn the_message_fields_and_properties_are_all_there() {
        let properties = PropertyValues {
            content_type: Some(ByteStr::from_static("application/json")),
            user_properties: vec![
                (ByteStr::from_static("site"), ByteStr::from_static("plant-3")),
                (ByteStr::from_static("site"), ByteStr::from_static("again")),
            ],
            correlation_data: Some(Bytes::from_static(&[1, 2, 3])),
            response_topic: Some(ByteStr::from_static("replies/3")),
            message_expiry_interval: Some(60),
            ..PropertyValues::default()
        };
        let body: Value =
            serde_json::from_str(&encode(&[routed(b"{}", properties)], Format::Json)).unwrap();
        let message = &body[0];
        assert_eq!(message["topic"], json!("plant/3/temp"));
        assert_eq!(message["qos"], json!(1));
        assert_eq!(message["retain"], json!(false));
        let expiry = message["properties"]["message_expiry_interval"].as_u64().unwrap();
        assert!((59..=60).contains(&expiry), "{expiry}");
        assert_eq!(
            message["properties"],
            json!({
                "content_type": "application/json",
                "user_properties": [["site", "plant-3"], ["site", "again"]],
                "correlation_data_base64": "AQID",
                "response_topic": "replies/3",
                "message_expiry_interval": expiry,
            })
        );
        let received_at = message["received_at"].as_str().unwrap();
        assert_eq!(received_at.len(), "2025-01-31T12:00:00.123Z".len(), "{received_at}");
        // No properties, no object.
        assert!(one(b"{}").get("properties").is_none());
    }

    #[test]
    fn ndjson_is_one_line_per_message_even_for_pretty_printed_payloads() {
        let messages = [
            routed(b"{\n  \"a\": 1,\r\n  \"b\": \"x\\ny\"\n}", PropertyValues::default()),
            routed(b"plain", PropertyValues::default()),
        ];
        let text = encode(&messages, Format::Ndjson);
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(text.ends_with('\n'));
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["payload"], json!({"a": 1, "b": "x\ny"}));
        let array: Value = serde_json::from_str(&encode(&messages, Format::Json)).unwrap();
        assert_eq!(array[0], first);
        assert_eq!(encode(&[], Format::Json), "[]");
        assert_eq!(encode(&[], Format::Ndjson), "");
    }

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        let at = |ms: u64| rfc3339_ms(UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_738_324_800_123), "2025-01-31T12:00:00.123Z");
        assert_eq!(at(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(at(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }
}
