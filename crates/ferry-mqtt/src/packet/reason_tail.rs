//! The optional "reason code, then properties" tail that MQTT 5 puts at the
//! end of PUBACK, PUBREC, PUBREL, PUBCOMP (after the packet identifier),
//! DISCONNECT and AUTH. Both parts may be omitted from the end: no byte left
//! means Success without properties, one byte means a reason code without
//! properties (§3.4.2.1, §3.14.2.1, §3.15.2.1).

use super::PacketType;
use crate::{wire::Reader, DecodeError, EncodeError, Properties, ProtocolVersion, ReasonCode};
use bytes::{BufMut, BytesMut};

pub(crate) fn decode(
    r: &mut Reader,
    packet: PacketType,
) -> Result<(ReasonCode, Properties), DecodeError> {
    if r.is_empty() {
        return Ok((ReasonCode::Success, Properties::default()));
    }
    let reason = ReasonCode::decode_for(packet, r.u8("reason code")?)?;
    let properties =
        if r.is_empty() { Properties::default() } else { Properties::decode(r, packet)? };
    Ok((reason, properties))
}

/// Encoded size of the tail in MQTT 5, using the shortest form.
pub(crate) fn len(
    reason: ReasonCode,
    properties: &Properties,
    packet: PacketType,
) -> Result<usize, EncodeError> {
    reason.check_for(packet)?;
    if properties.is_empty() {
        Ok(usize::from(reason != ReasonCode::Success))
    } else {
        Ok(1 + properties.wire_len(ProtocolVersion::V5)?)
    }
}

pub(crate) fn write(reason: ReasonCode, properties: &Properties, buf: &mut BytesMut) {
    if properties.is_empty() {
        if reason != ReasonCode::Success {
            buf.put_u8(reason as u8);
        }
    } else {
        buf.put_u8(reason as u8);
        properties.write(ProtocolVersion::V5, buf);
    }
}
