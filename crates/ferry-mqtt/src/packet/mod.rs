//! One file per packet type; this module ties them into [`Packet`].

mod ack;
mod auth;
mod connack;
mod connect;
mod disconnect;
mod publish;
mod reason_tail;
mod suback;
mod subscribe;
mod unsuback;
mod unsubscribe;

pub use ack::PubAck;
pub use auth::Auth;
pub use connack::ConnAck;
pub use connect::{Connect, Will};
pub use disconnect::Disconnect;
pub use publish::Publish;
pub use suback::SubAck;
pub use subscribe::{RetainHandling, Subscribe, SubscriptionOptions};
pub use unsuback::UnsubAck;
pub use unsubscribe::Unsubscribe;

use crate::{wire::Reader, DecodeError};

/// Any MQTT control packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    Connect(Box<Connect>),
    ConnAck(ConnAck),
    Publish(Publish),
    PubAck(PubAck),
    PubRec(PubAck),
    PubRel(PubAck),
    PubComp(PubAck),
    Subscribe(Subscribe),
    SubAck(SubAck),
    Unsubscribe(Unsubscribe),
    UnsubAck(UnsubAck),
    PingReq,
    PingResp,
    Disconnect(Disconnect),
    Auth(Auth),
}

/// The control packet type, the high nibble of the first byte (§2.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    Connect = 1,
    ConnAck = 2,
    Publish = 3,
    PubAck = 4,
    PubRec = 5,
    PubRel = 6,
    PubComp = 7,
    Subscribe = 8,
    SubAck = 9,
    Unsubscribe = 10,
    UnsubAck = 11,
    PingReq = 12,
    PingResp = 13,
    Disconnect = 14,
    Auth = 15,
}

impl Packet {
    /// Drops what the packet may go without to fit the receiver's Maximum
    /// Packet Size: the reason string and user properties of an
    /// acknowledgement, CONNACK, DISCONNECT or AUTH
    /// ([`Properties::drop_diagnostics`]). Other packets' properties are
    /// the application's, and stay.
    pub fn drop_diagnostics(&mut self) {
        match self {
            Packet::ConnAck(ConnAck { properties, .. })
            | Packet::PubAck(PubAck { properties, .. })
            | Packet::PubRec(PubAck { properties, .. })
            | Packet::PubRel(PubAck { properties, .. })
            | Packet::PubComp(PubAck { properties, .. })
            | Packet::SubAck(SubAck { properties, .. })
            | Packet::UnsubAck(UnsubAck { properties, .. })
            | Packet::Disconnect(Disconnect { properties, .. })
            | Packet::Auth(Auth { properties, .. }) => properties.drop_diagnostics(),
            Packet::Connect(_)
            | Packet::Publish(_)
            | Packet::Subscribe(_)
            | Packet::Unsubscribe(_)
            | Packet::PingReq
            | Packet::PingResp => {}
        }
    }

    /// The control packet type of this packet.
    pub fn packet_type(&self) -> PacketType {
        match self {
            Packet::Connect(_) => PacketType::Connect,
            Packet::ConnAck(_) => PacketType::ConnAck,
            Packet::Publish(_) => PacketType::Publish,
            Packet::PubAck(_) => PacketType::PubAck,
            Packet::PubRec(_) => PacketType::PubRec,
            Packet::PubRel(_) => PacketType::PubRel,
            Packet::PubComp(_) => PacketType::PubComp,
            Packet::Subscribe(_) => PacketType::Subscribe,
            Packet::SubAck(_) => PacketType::SubAck,
            Packet::Unsubscribe(_) => PacketType::Unsubscribe,
            Packet::UnsubAck(_) => PacketType::UnsubAck,
            Packet::PingReq => PacketType::PingReq,
            Packet::PingResp => PacketType::PingResp,
            Packet::Disconnect(_) => PacketType::Disconnect,
            Packet::Auth(_) => PacketType::Auth,
        }
    }
}

/// Reads the Packet Identifier of a `packet`, which is never 0 where
/// present (§2.2.1).
fn decode_packet_id(r: &mut Reader, packet: PacketType) -> Result<u16, DecodeError> {
    match r.u16("packet identifier")? {
        0 => Err(DecodeError::ZeroPacketId(packet)),
        id => Ok(id),
    }
}
