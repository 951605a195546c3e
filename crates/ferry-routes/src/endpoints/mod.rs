//! The endpoint types, one file (or folder) each, every one a `Sink`.

pub mod http;
pub mod topic;
