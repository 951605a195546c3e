//! The text control messages of Ditto's WebSocket protocol, read as
//! Ditto's `ProtocolMessageExtractor` reads them:
//!
//! - a message is a control message when it *starts with* one of the
//!   identifiers of `ProtocolMessageType`, tried in its order
//!   (`START-SEND-EVENTS`, `STOP-SEND-EVENTS`, `START-SEND-MESSAGES`, …),
//!   so `START-SEND-EVENTSxyz` is `START-SEND-EVENTS`;
//! - a `START-…` (and `JWT-TOKEN`) takes parameters after the first `?`:
//!   `name=value` pairs joined by `&`, each part URL-decoded as Java's
//!   `URLDecoder` does (`+` is a space);
//! - a pair without `=`, an undecodable `%` escape or a name given twice
//!   throws in Ditto outside its `DittoRuntimeException` handling, which
//!   fails the session's stream: the WebSocket is closed
//!   ([`Malformed`]);
//! - the answer to a start or stop is its identifier with `:ACK`.

use crate::live::Kind;

/// What a session can ask to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Twin events.
    Events,
    Live(Kind),
    /// Announcements of the session's subjects' deletion
    /// (`announcements.rs`).
    PolicyAnnouncements,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Start {
        stream: Stream,
        params: Vec<(String, String)>,
    },
    Stop(Stream),
    /// `JWT-TOKEN`: Ferry authenticates a WebSocket once, at its upgrade,
    /// so a new token changes nothing.
    Jwt,
}

/// A control message Ditto's extractor would throw on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed WebSocket control message: {0}")]
pub struct Malformed(pub(crate) &'static str);

/// `ProtocolMessageType`, in its order.
const TYPES: [(&str, Option<bool>, Stream); 11] = [
    ("START-SEND-EVENTS", Some(true), Stream::Events),
    ("STOP-SEND-EVENTS", Some(false), Stream::Events),
    ("START-SEND-MESSAGES", Some(true), Stream::Live(Kind::Messages)),
    ("STOP-SEND-MESSAGES", Some(false), Stream::Live(Kind::Messages)),
    ("START-SEND-LIVE-COMMANDS", Some(true), Stream::Live(Kind::LiveCommands)),
    ("STOP-SEND-LIVE-COMMANDS", Some(false), Stream::Live(Kind::LiveCommands)),
    ("START-SEND-LIVE-EVENTS", Some(true), Stream::Live(Kind::LiveEvents)),
    ("STOP-SEND-LIVE-EVENTS", Some(false), Stream::Live(Kind::LiveEvents)),
    ("JWT-TOKEN", None, Stream::Events),
    ("START-SEND-POLICY-ANNOUNCEMENTS", Some(true), Stream::PolicyAnnouncements),
    ("STOP-SEND-POLICY-ANNOUNCEMENTS", Some(false), Stream::PolicyAnnouncements),
];

/// The control message `text` is, or `None` when it is none (then it is
/// a Ditto protocol message).
pub fn parse(text: &str) -> Result<Option<Control>, Malformed> {
    let Some(&(_, start, stream)) =
        TYPES.iter().find(|(identifier, ..)| text.starts_with(identifier))
    else {
        return Ok(None);
    };
    Ok(Some(match start {
        Some(true) => Control::Start { stream, params: params(text)? },
        Some(false) => Control::Stop(stream),
        None => {
            params(text)?;
            Control::Jwt
        }
    }))
}

/// The answer to a start (`subscribed`) or stop of `stream`.
pub fn ack(stream: Stream, subscribed: bool) -> String {
    let (identifier, ..) = TYPES
        .iter()
        .find(|(_, start, s)| *s == stream && *start == Some(subscribed))
        .expect("every stream has a start and a stop");
    format!("{identifier}:ACK")
}

/// Ditto's `determineParams` (and, alike, its connection targets'
/// `ImmutableFilteredTopic` query): the parameters after the `?`.
pub(crate) fn params(text: &str) -> Result<Vec<(String, String)>, Malformed> {
    let Some((_, query)) = text.split_once('?') else { return Ok(Vec::new()) };
    let mut params: Vec<(String, String)> = Vec::new();
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').ok_or(Malformed("a parameter without '='"))?;
        let name = url_decode(name)?;
        if params.iter().any(|(known, _)| *known == name) {
            return Err(Malformed("a parameter given twice"));
        }
        params.push((name, url_decode(value)?));
    }
    Ok(params)
}

/// A parameter's name or value, decoded as Ditto's gateway does.
fn url_decode(text: &str) -> Result<String, Malformed> {
    crate::form::decode(text).ok_or(Malformed("an incomplete '%' escape"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ws::tests::params as pairs;

    #[test]
    fn every_start_and_stop_with_its_ack() {
        for (identifier, start, stream) in TYPES {
            let Some(subscribed) = start else { continue };
            let parsed = parse(identifier).unwrap().unwrap();
            let expected = if subscribed {
                Control::Start { stream, params: Vec::new() }
            } else {
                Control::Stop(stream)
            };
            assert_eq!(parsed, expected, "{identifier}");
            assert_eq!(ack(stream, subscribed), format!("{identifier}:ACK"));
        }
        assert_eq!(parse("JWT-TOKEN?jwtToken=abc").unwrap(), Some(Control::Jwt));
    }

    #[test]
    fn parameters_are_url_decoded_after_the_first_question_mark() {
        let parsed =
            parse("START-SEND-EVENTS?filter=eq(attributes%2Fa,%22x+y%22)&namespaces=a,b&x=1?2=3")
                .unwrap()
                .unwrap();
        assert_eq!(
            parsed,
            Control::Start {
                stream: Stream::Events,
                params: pairs(&[
                    ("filter", "eq(attributes/a,\"x y\")"),
                    ("namespaces", "a,b"),
                    ("x", "1?2=3")
                ]),
            }
        );
        assert_eq!(
            parse("START-SEND-MESSAGES?namespaces=").unwrap(),
            Some(Control::Start {
                stream: Stream::Live(Kind::Messages),
                params: pairs(&[("namespaces", "")])
            })
        );
    }

    #[test]
    fn a_prefix_is_enough_and_anything_else_is_a_protocol_message() {
        assert_eq!(
            parse("START-SEND-EVENTSxyz").unwrap(),
            Some(Control::Start { stream: Stream::Events, params: Vec::new() })
        );
        assert_eq!(
            parse("START-SEND-LIVE-EVENTS").unwrap(),
            Some(Control::Start { stream: Stream::Live(Kind::LiveEvents), params: Vec::new() })
        );
        assert_eq!(parse("{\"topic\":\"a/b/things/twin/commands/retrieve\"}").unwrap(), None);
        assert_eq!(parse("start-send-events").unwrap(), None);
    }

    #[test]
    fn what_dittos_extractor_throws_on_is_malformed() {
        for text in [
            "START-SEND-EVENTS?",
            "START-SEND-EVENTS?filter",
            "START-SEND-EVENTS?a=1&a=2",
            "START-SEND-EVENTS?filter=%zz",
            "START-SEND-EVENTS?filter=%2",
            "JWT-TOKEN?jwtToken",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
