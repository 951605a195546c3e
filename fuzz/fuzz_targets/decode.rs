//! Decodes every packet of the input, as both a 3.1.1 and a 5.0 connection,
//! until the first error or the end. The decoder must not panic, and every
//! packet it accepts must survive encode → decode unchanged, with
//! `encoded_len` matching the bytes written and, for a PUBLISH of QoS 1 or 2,
//! `publish_packet_id_offset` pointing at its packet id.
#![no_main]

use bytes::BytesMut;
use ferry_mqtt::{publish_packet_id_offset, Packet, ProtocolVersion, QoS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Raw input too: it must return None or an offset, never panic.
    let _ = publish_packet_id_offset(data);
    for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
        let mut buf = BytesMut::from(data);
        while let Ok(Some(packet)) = Packet::decode(&mut buf, version, u32::MAX) {
            let mut encoded = BytesMut::new();
            packet.encode(version, &mut encoded).expect("a decoded packet encodes");
            assert_eq!(packet.encoded_len(version), encoded.len(), "encoded_len of {packet:?}");
            if let Packet::Publish(publish) = &packet {
                let offset = publish_packet_id_offset(&encoded);
                if publish.qos == QoS::AtMostOnce {
                    assert_eq!(offset, None);
                } else {
                    let id =
                        offset.and_then(|at| encoded.get(at..at + 2)).expect("packet id offset");
                    assert_eq!(id, publish.packet_id.to_be_bytes());
                }
            }
            let again = Packet::decode(&mut encoded, version, u32::MAX);
            assert_eq!(again, Ok(Some(packet)), "re-decoding");
            assert!(encoded.is_empty(), "re-decoding left bytes");
        }
    }
});
