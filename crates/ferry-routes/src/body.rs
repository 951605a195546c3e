//! `Body`: a message's payload as JSON, parsed on first use and at most
//! once, however many references and routes read it.

use std::cell::OnceCell;

use crate::limits::MAX_BODY_BYTES;

/// The JSON of one message's payload, for `Condition::matches_with_body`.
///
/// Parsing is the one costly step of evaluation, so it happens only when a
/// condition actually reaches a `$body` reference, and a broker that checks
/// several routes against one message makes one `Body` and passes it to
/// each: the payload is parsed once per message, not once per route.
#[derive(Debug)]
pub struct Body<'p> {
    payload: &'p [u8],
    /// `None` inside: the payload is not JSON, or is over `MAX_BODY_BYTES`.
    json: OnceCell<Option<serde_json::Value>>,
}

impl<'p> Body<'p> {
    /// Costs nothing until a `$body` reference is evaluated.
    pub fn new(payload: &'p [u8]) -> Body<'p> {
        Body { payload, json: OnceCell::new() }
    }

    /// The parsed payload, or `None` when it is not JSON: a device sending
    /// text or binary is not an error, its `$body` is simply undefined.
    pub(crate) fn json(&self) -> Option<&serde_json::Value> {
        self.json
            .get_or_init(|| {
                if self.payload.len() > MAX_BODY_BYTES {
                    return None;
                }
                serde_json::from_slice(self.payload).ok()
            })
            .as_ref()
    }
}
