//! `ferry-broker` is Ferry's MQTT 3.1.1 and 5.0 broker: listeners,
//! connections, sessions, the topic tree, retained messages, wills and the
//! QoS state machines. Packets come from `ferry-mqtt`; the binary `ferry`
//! wires configuration and listeners.
//!
//! The map of the house is in `docs/architecture.md`. In short:
//! `listener` accepts, `connection` owns a socket, `client` applies the
//! packets of one client, `broker` holds the shared state and routes,
//! `session` is what survives a reconnect, `topic_tree` and `retained`
//! answer "who gets this topic", `encode_once` and `encode_publish` make fan-out cheap.

pub mod accept;
mod admission;
mod answer;
mod authenticate;
mod authorize;
mod backpressure;
mod broker;
mod client;
mod clock;
mod close;
pub mod coalesce;
mod config;
mod connection;
mod connection_info;
pub mod cores;
mod durable;
mod encode_once;
mod encode_publish;
pub mod endpoint;
pub mod envelope;
mod held;
pub mod inspect;
pub mod keep_alive;
pub mod listener;
mod liveness;
pub mod memory_watermark;
mod message;
mod origin;
mod park;
mod places;
mod publish_limits;
mod relay;
mod restore;
pub mod retained;
pub mod routing;
mod seat;
pub mod service;
mod session;
mod sessions;
mod shed_log;
mod stats;
pub mod sys;
pub mod tls;
mod token_bucket;
#[cfg(test)]
mod topic_test_support;
pub mod topic_tree;
mod transport;
mod wakeup;
mod websocket;
mod will;

pub use broker::{Broker, SessionFigures};
pub use close::DISCONNECT_REASONS;
pub use config::{BrokerConfig, ConfigError, QueueOverflow};
pub use cores::Cores;
pub use durable::{DurabilityConfig, Fsync, StoreError, StoreFigures};
pub use listener::{Listener, Protocol, Refusal};
pub use message::Message;
pub use stats::{AuthMethod, HistogramFigures, Stats};
pub use tls::{ReadAgain, Tls, TlsError, TlsSettings};
pub use websocket::MQTT_PATH;
