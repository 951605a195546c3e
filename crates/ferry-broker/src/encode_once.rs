//! A message's PUBLISH, encoded once per (protocol family, QoS) and copied
//! to every subscriber with only the flags and the packet identifier
//! patched.
//!
//! Without this, a fan-out to N subscribers would run the encoder N times
//! for identical bytes. The only per-subscriber differences in the common
//! case are the DUP and RETAIN bits of the first byte and the 2-byte packet
//! id, which sit at fixed places. Deliveries that differ in more than that
//! (subscription identifiers, a topic alias, an expiry interval that has
//! been decremented) take the slow path and are encoded on their own
//! (`encode_publish.rs` decides which).

use bytes::{Bytes, BytesMut};
use ferry_mqtt::QoS;
use std::sync::OnceLock;

/// The per-message cache: slot `[v5 as usize][qos]`.
#[derive(Debug, Default)]
pub(crate) struct EncodeOnce {
    slots: [[OnceLock<Encoded>; 3]; 2],
}

/// One encoding of a message's PUBLISH, as a template.
#[derive(Debug)]
pub(crate) struct Encoded {
    bytes: Bytes,
    packet_id_offset: Option<usize>,
}

const DUP_BIT: u8 = 0b1000;
const RETAIN_BIT: u8 = 0b0001;

impl EncodeOnce {
    /// The message encoded for MQTT 5 or not, at `qos`: `encode` makes it
    /// the first time it is asked for (without DUP or RETAIN; empty if the
    /// codec refused it).
    pub(crate) fn get_or_encode(
        &self,
        v5: bool,
        qos: QoS,
        encode: impl FnOnce() -> Bytes,
    ) -> &Encoded {
        self.slots[usize::from(v5)][qos as usize].get_or_init(|| {
            let bytes = encode();
            let packet_id_offset = ferry_mqtt::publish_packet_id_offset(&bytes);
            Encoded { bytes, packet_id_offset }
        })
    }

    #[cfg(test)]
    pub(crate) fn is_encoded(&self, v5: bool, qos: QoS) -> bool {
        self.slots[usize::from(v5)][qos as usize].get().is_some()
    }
}

impl Encoded {
    /// Appends the template to `out` with one delivery's flags and packet
    /// id; returns the number of bytes appended (0 for an empty template).
    pub(crate) fn append_to(
        &self,
        out: &mut BytesMut,
        retain: bool,
        dup: bool,
        packet_id: u16,
    ) -> usize {
        if self.bytes.is_empty() {
            return 0;
        }
        let start = out.len();
        out.extend_from_slice(&self.bytes);
        let mut flags = 0;
        if retain {
            flags |= RETAIN_BIT;
        }
        if dup {
            flags |= DUP_BIT;
        }
        out[start] |= flags;
        if let Some(offset) = self.packet_id_offset {
            out[start + offset..start + offset + 2].copy_from_slice(&packet_id.to_be_bytes());
        }
        self.bytes.len()
    }
}
