//! The endpoint types: each implements `Sink` (`sink.rs`) for one protocol.

pub mod mqtt;
