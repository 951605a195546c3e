//! The `mqtt` endpoint type: an uplink to any MQTT 3.1.1 or 5.0 broker.

mod config;
mod topic_map;

pub use config::{
    MqttConfigError, MqttEndpointConfig, MqttProtocol, MqttSubscription, RemoteAddress,
};
