//! `POST /api/v1/publish`: a message published as the administrator, to
//! test a subscriber or set a retained value. No ACL applies.

use super::{Admin, AdminUser, ApiError};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use base64::Engine;
use bytes::Bytes;
use ferry_mqtt::{ByteStr, Properties, PropertyValues, QoS};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PublishBody {
    topic: String,
    payload: Option<String>,
    payload_base64: Option<String>,
    #[serde(default)]
    qos: u8,
    #[serde(default)]
    retain: bool,
    #[serde(default)]
    properties: PublishProperties,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PublishProperties {
    content_type: Option<String>,
    payload_format_indicator: Option<u8>,
    message_expiry_interval: Option<u32>,
    response_topic: Option<String>,
    correlation_data_base64: Option<String>,
    #[serde(default)]
    user_properties: BTreeMap<String, String>,
}

fn base64(field: &str, text: &str) -> Result<Bytes, ApiError> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map(Bytes::from)
        .map_err(|error| ApiError::bad_request(format!("{field} is not base64: {error}")))
}

impl PublishBody {
    /// The message, or what is wrong with the body.
    fn message(self, max_bytes: usize) -> Result<ferry_broker::Message, ApiError> {
        if !ferry_mqtt::topic::is_valid_topic_name(&self.topic) {
            return Err(ApiError::bad_request(format!(
                "{:?} is not a topic name (no wildcards, not empty)",
                self.topic
            )));
        }
        let payload = match (self.payload, self.payload_base64) {
            (Some(text), None) => Bytes::from(text),
            (None, Some(encoded)) => base64("payload_base64", &encoded)?,
            (None, None) => Bytes::new(),
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request("give payload or payload_base64, not both"))
            }
        };
        if payload.len() > max_bytes {
            return Err(ApiError::bad_request(format!(
                "the payload is over the broker's max_packet_size_bytes ({max_bytes})"
            )));
        }
        let qos = match self.qos {
            0 => QoS::AtMostOnce,
            1 => QoS::AtLeastOnce,
            2 => QoS::ExactlyOnce,
            other => return Err(ApiError::bad_request(format!("qos is 0, 1 or 2, not {other}"))),
        };
        let given = self.properties;
        if let Some(topic) = &given.response_topic {
            if !ferry_mqtt::topic::is_valid_topic_name(topic) {
                return Err(ApiError::bad_request(format!("{topic:?} is not a response topic")));
            }
        }
        let properties = PropertyValues {
            content_type: given.content_type.map(ByteStr::from),
            payload_format_indicator: given.payload_format_indicator,
            message_expiry_interval: given.message_expiry_interval,
            response_topic: given.response_topic.map(ByteStr::from),
            correlation_data: given
                .correlation_data_base64
                .map(|data| base64("correlation_data_base64", &data))
                .transpose()?,
            user_properties: given
                .user_properties
                .into_iter()
                .map(|(key, value)| (ByteStr::from(key), ByteStr::from(value)))
                .collect(),
            ..PropertyValues::default()
        };
        // Only a message with properties pays for their box.
        let properties = if properties == PropertyValues::default() {
            Properties::default()
        } else {
            Properties::from(properties)
        };
        Ok(ferry_broker::Message::new(
            ByteStr::from(self.topic),
            payload,
            qos,
            self.retain,
            properties,
            0,
        ))
    }
}

pub(super) async fn publish(
    State(admin): State<Arc<Admin>>,
    Extension(AdminUser(user)): Extension<AdminUser>,
    body: Result<Json<PublishBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
    let message = body.message(admin.broker.config.max_packet_size_bytes as usize)?;
    let topic = message.topic.to_string();
    match admin.broker.publish_admin(message).await {
        Ok(delivered) => {
            tracing::debug!(topic, admin = user, delivered, "published by an administrator");
            Ok(Json(json!({ "delivered_to": delivered })))
        }
        Err(reason) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "publish_refused",
            format!("the broker refused the message: {reason:?}"),
        )),
    }
}
