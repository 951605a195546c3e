//! The primitive data types of MQTT (§1.5): a bounds-checked reader over one
//! frame, and the matching writers.
//!
//! The reader hands out slices of the frame's `Bytes` rather than copies, so
//! a decoded packet keeps the frame alive and costs no allocation per field.

use crate::{varint, ByteStr, DecodeError, EncodeError};
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Reads fields off the front of a frame body. Every read names the field it
/// wanted, so a short packet reports `Truncated("field")`.
#[derive(Debug)]
pub(crate) struct Reader {
    rest: Bytes,
}

impl Reader {
    pub(crate) fn new(body: Bytes) -> Reader {
        Reader { rest: body }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let array: [u8; N] = self
            .rest
            .get(..N)
            .and_then(|head| head.try_into().ok())
            .ok_or(DecodeError::Truncated(field))?;
        self.rest.advance(N);
        Ok(array)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        let [byte] = self.array::<1>(field)?;
        Ok(byte)
    }

    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(field)?))
    }

    pub(crate) fn varint(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let (value, used) = varint::parse(&self.rest).map_err(|error| match error {
            varint::VarintError::Incomplete => DecodeError::Truncated(field),
            varint::VarintError::TooLong => DecodeError::MalformedVariableInteger(field),
        })?;
        self.rest.advance(used);
        Ok(value)
    }

    /// The next `len` bytes, shared with the frame.
    pub(crate) fn take(&mut self, len: usize, field: &'static str) -> Result<Bytes, DecodeError> {
        if self.rest.len() < len {
            return Err(DecodeError::Truncated(field));
        }
        Ok(self.rest.split_to(len))
    }

    /// Binary Data (§1.5.6): a 2-byte length, then that many bytes.
    pub(crate) fn binary(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.u16(field)?;
        self.take(usize::from(len), field)
    }

    /// UTF-8 Encoded String (§1.5.4): Binary Data that must be valid MQTT text.
    pub(crate) fn string(&mut self, field: &'static str) -> Result<ByteStr, DecodeError> {
        let bytes = self.binary(field)?;
        ByteStr::from_bytes(bytes).map_err(|error| DecodeError::InvalidString { field, error })
    }

    /// A reader over the next `len` bytes, for a length-prefixed block such as
    /// the properties, whose reads must not run past the block.
    pub(crate) fn sub_reader(
        &mut self,
        len: usize,
        field: &'static str,
    ) -> Result<Reader, DecodeError> {
        self.take(len, field).map(Reader::new)
    }

    /// Everything not read yet: a PUBLISH payload runs to the end of the frame.
    pub(crate) fn take_rest(&mut self) -> Bytes {
        std::mem::take(&mut self.rest)
    }

    /// Rejects bytes left after a packet's last field.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        match self.rest.len() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes(extra)),
        }
    }
}

/// A 2-byte length prefix cannot describe more than this.
const MAX_FIELD_LEN: usize = u16::MAX as usize;

/// The encoded size of Binary Data or a UTF-8 string: 2-byte length, then the
/// bytes. Refuses what the length prefix cannot describe: `ByteStr` built with
/// `From<String>` is not length-checked, and a wrapped length would desync
/// the peer's framing.
pub(crate) fn binary_len(bytes: &[u8], field: &'static str) -> Result<usize, EncodeError> {
    if bytes.len() > MAX_FIELD_LEN {
        return Err(EncodeError::Invalid(field, "longer than 65535 bytes"));
    }
    Ok(2 + bytes.len())
}

/// Appends Binary Data or a UTF-8 string whose length [`binary_len`] accepted.
pub(crate) fn put_binary(buf: &mut BytesMut, bytes: &[u8]) {
    // binary_len ran first, so the length fits; saturating keeps a missed
    // check from panicking (the output would then be wrong, not unsafe).
    buf.put_u16(u16::try_from(bytes.len()).unwrap_or(u16::MAX));
    buf.put_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StrError;

    #[test]
    fn reads_each_type_and_reports_the_missing_field() {
        let mut r = Reader::new(Bytes::from_static(&[
            7, 0x01, 0x02, 0, 0, 1, 0, 0x80, 0x01, 0, 2, b'h', b'i', 0, 1,
        ]));
        assert_eq!(r.u8("a"), Ok(7));
        assert_eq!(r.u16("b"), Ok(0x0102));
        assert_eq!(r.u32("c"), Ok(256));
        assert_eq!(r.varint("d"), Ok(128));
        assert_eq!(r.string("e").unwrap(), "hi");
        assert_eq!(r.binary("f"), Err(DecodeError::Truncated("f")));
    }

    #[test]
    fn string_errors_name_the_field() {
        let mut r = Reader::new(Bytes::from_static(&[0, 2, 0xC3, 0x28]));
        assert_eq!(
            r.string("topic"),
            Err(DecodeError::InvalidString { field: "topic", error: StrError::InvalidUtf8 })
        );
    }

    #[test]
    fn slices_share_the_frame() {
        let frame = Bytes::from_static(b"\x00\x03abc");
        let mut r = Reader::new(frame.clone());
        let s = r.binary("x").unwrap();
        assert_eq!(s.as_ptr(), frame[2..].as_ptr());
        r.finish().unwrap();
    }

    #[test]
    fn finish_counts_trailing_bytes() {
        let mut r = Reader::new(Bytes::from_static(&[1, 2, 3]));
        r.u8("x").unwrap();
        assert_eq!(r.finish(), Err(DecodeError::TrailingBytes(2)));
    }

    #[test]
    fn varint_errors() {
        assert_eq!(
            Reader::new(Bytes::from_static(&[0x80])).varint("v"),
            Err(DecodeError::Truncated("v"))
        );
        assert_eq!(
            Reader::new(Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x01])).varint("v"),
            Err(DecodeError::MalformedVariableInteger("v"))
        );
    }
}
