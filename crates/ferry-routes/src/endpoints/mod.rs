//! The endpoint types, one file (or folder) each, every one a `Sink`
//! (`sink.rs`) for one protocol.

pub mod http;
pub mod kafka;
pub mod mqtt;
pub mod topic;
mod trust;
