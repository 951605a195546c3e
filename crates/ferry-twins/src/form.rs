//! `application/x-www-form-urlencoded` as Java's `URLEncoder` and
//! `URLDecoder` write and read it: what Ditto's WebSocket control
//! parameters and its `fn:url-encode`/`fn:url-decode` functions use.

/// Java's `URLEncoder.encode(…, UTF-8)`: letters, digits and `.-*_`
/// stay, a space is `+`, every other byte of the UTF-8 is `%XX`.
pub fn encode(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                encoded.push(byte as char)
            }
            b' ' => encoded.push('+'),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

/// Java's `URLDecoder.decode(…, UTF-8)`: `+` is a space, `%XY` a byte;
/// `None` for anything else after `%`. Bytes that are not UTF-8 become
/// U+FFFD.
pub fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}
