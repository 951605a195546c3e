//! The Ditto protocol: the JSON envelope (`topic`, `headers`, `path`,
//! `value`, `status`, …) in which Ditto's clients send twin and policy
//! commands and receive responses, errors and events over a message
//! channel (MQTT, WebSocket) rather than HTTP.
//!
//! - `envelope.rs`: the message itself, read and written as Ditto does.
//! - `topic.rs`: its topic path, `{namespace}/{name}/{group}/{channel}/
//!   {criterion}/{action}`.
//! - `commands.rs`: a command applied to the twin service, as the HTTP API
//!   applies its requests, answered by a response or an error response.
//! - `events.rs`: a committed change as a twin event, as each reader's
//!   policy lets it see it.
//! - `acks.rs`: a subscriber's acknowledgements sent back, handed to the
//!   command waiting for them.
//! - `search.rs`: search subscriptions (`_/_/things/twin/search/…`), pages
//!   of results as the client asks for them.
//!
//! Not supported yet, and answered with Ditto's
//! `protocoladapter:unknown.topicpath`: streaming of persisted events and
//! announcements.

pub mod acks;
mod commands;
mod envelope;
mod events;
pub mod search;
mod topic;

pub use commands::{error_response, id_enforcement_failed};
pub(crate) use commands::{unknown_command, unknown_path};
pub use envelope::{Envelope, MAX_ENVELOPE_BYTES, ORIGINATOR};
pub use events::EventView;
pub(crate) use topic::unknown_topic_path;
pub use topic::{Channel, Criterion, Group, Topic};

/// The media type of a Ditto protocol message sent over a transport.
pub const DITTO_CONTENT_TYPE: &str = "application/vnd.eclipse.ditto+json";
