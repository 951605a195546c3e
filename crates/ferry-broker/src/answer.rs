//! The acknowledgement a publisher waits for: which session, which of its
//! connections (a reconnect starts a new generation, which must not get
//! the old one's PUBACK) and which packet.

use crate::relay::Mailbox;
use crate::session::Session;
use ferry_mqtt::{Packet, PubAck, ReasonCode};
use std::sync::Arc;

/// The acknowledgement a publisher waits for.
pub(crate) struct Answer {
    pub session: Arc<Session>,
    pub generation: u64,
    pub packet_id: u16,
    /// PUBREC (QoS 2) rather than PUBACK.
    pub exactly_once: bool,
    /// The mailbox of the core serving the publisher's connection, for a
    /// thread that is no core's to wake it through (`relay.rs`).
    pub relay: Option<&'static Mailbox>,
}

impl Answer {
    pub(crate) fn packet(&self, reason: ReasonCode) -> Packet {
        let ack = PubAck::new(self.packet_id, reason);
        if self.exactly_once {
            Packet::PubRec(ack)
        } else {
            Packet::PubAck(ack)
        }
    }
}
