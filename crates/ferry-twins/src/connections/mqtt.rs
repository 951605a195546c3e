//! A running `mqtt` (or `mqtt-5`) connection: twin events published on
//! Ferry's own broker, one message per event and target, on the topic
//! the target's address makes of the event (`events/{{ thing:id }}`).
//!
//! Ferry does not dial its own broker: the connection's `uri` must name a
//! loopback address, and the messages are handed to the broker in the
//! process, as a client's publish would be, to every subscriber of the
//! topic (the broker's retained store and durable sessions included).
//! An external MQTT broker is refused at the connection's creation
//! (bridge to one with a route's uplink instead), as are sources.
//!
//! What each target sends is decided as for the other connection types
//! (`TargetSpec::outgoing`): its topics, and the READ rights of its
//! `authorizationContext`. A topic a thing's id cannot be part of (it
//! holds `+` or `#`) is counted as failed. A target with an
//! `issuedAcknowledgementLabel` acknowledges each event it published
//! with 204, once the broker has it.

use super::model::ConnectionSpec;
use super::stats::ConnectionStats;
use super::template::{AddressTemplate, Event};
use crate::error::DittoError;
use crate::service::{next_event, Twins};
use bytes::Bytes;
use ferry_broker::{Broker, Message};
use ferry_mqtt::{ByteStr, Properties, QoS};
use serde_json::{Map, Value};
use std::sync::{Arc, Weak};
use tokio::task::AbortHandle;

/// An `mqtt` connection's targets, beside their `TargetSpec`s.
#[derive(Debug)]
pub struct MqttSpec {
    pub targets: Vec<MqttTarget>,
}

#[derive(Debug)]
pub struct MqttTarget {
    topic: AddressTemplate,
    qos: QoS,
}

impl MqttSpec {
    pub fn parse(object: &Map<String, Value>, targets: &[Value]) -> Result<MqttSpec, DittoError> {
        let uri = object.get("uri").and_then(Value::as_str).unwrap_or_default();
        if !names_this_ferry(uri) {
            return Err(DittoError::connection_invalid(format!(
                "The uri '{}' of an mqtt connection must name a loopback address: Ferry publishes its events on its own broker (tcp:// or ssl://, e.g. tcp://127.0.0.1:1883). For another broker, use a route's uplink.",
                super::model::redact(uri)
            )));
        }
        if object.get("sources").and_then(Value::as_array).is_some_and(|s| !s.is_empty()) {
            return Err(DittoError::connection_invalid(
                "An mqtt connection in Ferry has no sources: devices publish the Ditto protocol to the broker's ditto/ topics themselves.",
            ));
        }
        let targets = targets.iter().map(MqttTarget::parse).collect::<Result<_, _>>()?;
        Ok(MqttSpec { targets })
    }
}

impl MqttTarget {
    fn parse(json: &Value) -> Result<MqttTarget, DittoError> {
        // `TargetSpec::parse` has checked the address is a string.
        let address = json.get("address").and_then(Value::as_str).unwrap_or_default();
        let topic = AddressTemplate::parse(address)?;
        if address.contains(['+', '#']) || address.is_empty() {
            return Err(DittoError::connection_invalid(format!(
                "The address '{address}' is not an MQTT topic name (no wildcards)."
            )));
        }
        let qos = match json.get("qos") {
            None => QoS::AtMostOnce,
            Some(qos) => {
                qos.as_u64().and_then(|q| QoS::from_u8(u8::try_from(q).ok()?)).ok_or_else(|| {
                    DittoError::connection_invalid(format!(
                        "The qos of target '{address}' is not 0, 1 or 2."
                    ))
                })?
            }
        };
        Ok(MqttTarget { topic, qos })
    }
}

/// `tcp://` or `ssl://` (Ditto's MQTT schemes) to a loopback host.
fn names_this_ferry(uri: &str) -> bool {
    let Some(rest) = uri.strip_prefix("tcp://").or_else(|| uri.strip_prefix("ssl://")) else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match host_port.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => host_port,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Starts the connection's feed; aborting the handle stops it.
pub fn start(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    broker: Weak<Broker>,
) -> Vec<AbortHandle> {
    vec![tokio::spawn(feed(twins, spec, mqtt, stats, broker)).abort_handle()]
}

async fn feed(
    twins: Arc<Twins>,
    spec: Arc<ConnectionSpec>,
    mqtt: Arc<MqttSpec>,
    stats: Arc<ConnectionStats>,
    broker: Weak<Broker>,
) {
    let mut events = twins.subscribe();
    while let Some(event) = next_event(&mut events, &stats.missed, &spec.id).await {
        let Some(broker) = broker.upgrade() else { return };
        for (index, (target, mqtt)) in spec.targets.iter().zip(&mqtt.targets).enumerate() {
            let figures = &stats.targets[index];
            let Some((envelope, owed)) = target.outgoing(&twins, &event).await else {
                figures.filtered.inc();
                continue;
            };
            figures.dispatched.inc();
            let topic = mqtt.topic.render_raw(&Event { topic: &envelope.topic });
            if !ferry_mqtt::topic::is_valid_topic_name(&topic) {
                figures.failed.inc();
                let failure = format!("'{topic}' is not an MQTT topic name");
                if let Some(owed) = owed {
                    owed.settle(&twins, 400, Some(failure.clone().into()));
                }
                stats.set_failure(failure);
                continue;
            }
            let mut properties = Properties::default();
            properties.content_type = Some(ByteStr::from(crate::protocol::DITTO_CONTENT_TYPE));
            let payload = Bytes::from(envelope.to_bytes());
            broker.publish(Message::new(
                ByteStr::from(topic.as_str()),
                payload,
                mqtt.qos,
                false,
                properties,
                0,
            ));
            figures.published.inc();
            stats.set_success();
            if let Some(owed) = owed {
                owed.settle(&twins, 204, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_ferrys_loopback_is_an_mqtt_uri() {
        for uri in [
            "tcp://127.0.0.1:1883",
            "tcp://localhost:1883",
            "ssl://[::1]:8883",
            "tcp://u:p@127.0.0.2",
        ] {
            assert!(names_this_ferry(uri), "{uri}");
        }
        for uri in ["tcp://broker.example:1883", "http://127.0.0.1:1883", "tcp://10.0.0.1", ""] {
            assert!(!names_this_ferry(uri), "{uri}");
        }
    }
}
