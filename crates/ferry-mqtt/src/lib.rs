//! `ferry-mqtt` is an MQTT 3.1.1 and 5.0 packet codec with no I/O.
//!
//! Decoding is zero-copy: [`Packet::decode`] splits one frame off a
//! `BytesMut` read buffer, and topics, payloads and strings of the decoded
//! packet are slices of that frame. Every MUST of the specification that can
//! be checked on a single packet is checked, so a broker built on this crate
//! only sees well-formed packets; the error says which reason code to answer
//! with. No input makes the decoder panic (see the `fuzz/` target).
//!
//! ```
//! use bytes::BytesMut;
//! use ferry_mqtt::{Packet, ProtocolVersion, Publish, QoS, ByteStr, Properties};
//!
//! let publish = Packet::Publish(Publish {
//!     dup: false, qos: QoS::AtLeastOnce, retain: false,
//!     topic: ByteStr::from("sensors/1/temp"), packet_id: 7,
//!     properties: Properties::default(), payload: "21.5".into(),
//! });
//! let mut wire = BytesMut::new();
//! publish.encode(ProtocolVersion::V5, &mut wire).unwrap();
//! let decoded = Packet::decode(&mut wire, ProtocolVersion::V5, 1 << 20).unwrap().unwrap();
//! assert_eq!(decoded, publish);
//! assert!(wire.is_empty());
//! ```

mod byte_str;
mod codec;
mod error;
pub mod packet;
mod properties;
mod qos;
mod reason;
#[cfg(test)]
mod test_support;
pub mod topic;
mod varint;
mod version;
mod wire;

pub use byte_str::{ByteStr, StrError};
pub use codec::publish_packet_id_offset;
pub use error::{DecodeError, EncodeError};
pub use packet::*;
pub use properties::{id as property_id, Properties, PropertyValues};
pub use qos::QoS;
pub use reason::ReasonCode;
pub use version::ProtocolVersion;
