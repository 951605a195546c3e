//! The endpoint types, one file (or folder) each, every one a `Sink`
//! (`sink.rs`) for one protocol.

pub mod http;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod mqtt;
pub mod topic;
mod trust;
