//! Ferry's digital twins, compatible with Eclipse Ditto: things (attributes,
//! features with properties and desired properties), the policies that
//! guard them, and RQL, the query language of search and conditions.
//!
//! This crate holds the model and its rules and does no I/O of its own
//! beyond its stores; the HTTP API and the wiring live in the `ferry`
//! binary. Every rule here follows what Ditto's code does (its
//! `*Exception` classes, its parsers and its system tests), since that is
//! what Ditto's users wrote their clients against.

pub mod acks;
pub mod announcements;
pub mod connections;
pub mod duration;
pub mod error;
pub mod fields;
pub mod form;
pub mod http;
pub mod id;
pub mod live;
pub mod merge;
pub mod mqtt;
pub mod pointer;
pub mod policy;
pub mod protocol;
pub mod rql;
pub mod service;
pub mod shadow;
pub mod store;
pub mod thing;
pub mod ws;

pub use error::DittoError;
pub use id::{PolicyId, ThingId};
pub use pointer::JsonPointer;
