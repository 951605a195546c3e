//! The hand-written seeds of the fuzz corpus (`fuzz/seeds/decode/*.bin`)
//! must be valid streams, or the fuzzer starts from error paths only.

use bytes::BytesMut;
use ferry_mqtt::{Packet, ProtocolVersion};
use std::{fs, path::Path};

#[test]
fn seeds_decode_completely() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/decode");
    let Ok(entries) = fs::read_dir(&dir) else {
        // The crate may be built outside the repository.
        return;
    };
    let mut checked = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".bin") else { continue };
        let versions: &[ProtocolVersion] = if stem.ends_with("_v5") {
            &[ProtocolVersion::V5]
        } else if stem.ends_with("_v311") || stem.ends_with("_v31") {
            &[ProtocolVersion::V311]
        } else {
            &[ProtocolVersion::V311, ProtocolVersion::V5]
        };
        let bytes = fs::read(&path).unwrap();
        for &version in versions {
            let mut buf = BytesMut::from(&bytes[..]);
            let mut packets = 0;
            while !buf.is_empty() {
                match Packet::decode(&mut buf, version, u32::MAX) {
                    Ok(Some(_)) => packets += 1,
                    other => panic!("{name} ({version:?}) after {packets} packets: {other:?}"),
                }
            }
            assert!(packets > 0, "{name}");
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} seeds in {}", dir.display());
}
