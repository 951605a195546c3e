//! Acknowledgements of twin commands, as Ditto asks for and answers them
//! (`requested-acks`, its `AbstractCommandAckRequestSetter` and
//! `AcknowledgementAggregatorActor`).
//!
//! A modifying twin command may request acknowledgements by label:
//! - `twin-persisted`: the change is committed. It is the implicit one: a
//!   command that asks for a response and names no labels requests it,
//!   and a command that requests only it is answered with its plain
//!   response.
//! - `search-persisted`: the search index holds the change. Ferry's search
//!   reads the store the change was committed to, so this is fulfilled at
//!   the same moment, with Ditto's 204.
//! - `live-response` is dropped from a twin command's requests, as Ditto
//!   drops it. It is a live message's or live command's own label: the
//!   receiver's response ([`Requested::live`]), implicit as `twin-persisted`
//!   is for twin commands; `twin-persisted` and `search-persisted` are
//!   dropped from a live signal's requests.
//! - Any other label is a subscriber's: a WebSocket session declares it
//!   (`declared-acks`), receives the event with the label in its
//!   `requested-acks` header and answers with an acknowledgement message
//!   (`hub.rs` brings the two together). A declarer that does not get the
//!   event (not taking events, filtered out, not allowed to read it)
//!   gives a weak acknowledgement at once; a label nobody declared, or
//!   one not answered in time, is 408 when the command's `timeout` has
//!   passed, as Ditto answers it.
//!
//! Anything beyond the plain response is answered with the aggregated
//! acknowledgements: one label's status and payload as they are, several
//! labels as an object of label → `{status, payload, headers}` with 200
//! when all succeeded, else 424.

mod hub;

pub use hub::{weak_ack, AckHub, Declaration, EventAcks, Waiter};

use crate::error::DittoError;
use serde_json::{json, Map, Value};
use std::time::Duration;

pub const TWIN_PERSISTED: &str = "twin-persisted";
pub const SEARCH_PERSISTED: &str = "search-persisted";
pub const LIVE_RESPONSE: &str = "live-response";

/// A twin command's timeout when it names none: Ditto's gateway request
/// timeout (`ditto.gateway.command.default-timeout`).
pub const TWIN_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// At most this many labels in one request: Ditto sets no number, but
/// each label that is not built in holds the answer until the timeout.
const MAX_LABELS: usize = 32;

/// What a modifying twin command asked to hear back, with Ditto's
/// defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    /// In the order asked, each once.
    pub labels: Vec<String>,
    pub response_required: bool,
    pub timeout: Duration,
}

impl Requested {
    /// Reads the three headers that decide the answer: `requested-acks`
    /// (already split into labels; `None` when absent), `response-required`
    /// and `timeout`. A timeout of zero with a response or labels
    /// requested is Ditto's 400 `header.invalid`.
    pub fn twin_modify(
        labels: Option<Vec<String>>,
        response_required: Option<bool>,
        timeout: Option<&str>,
    ) -> Result<Requested, DittoError> {
        let timeout = crate::live::timeout_or(timeout, TWIN_COMMAND_TIMEOUT)?;
        let response_required = response_required.unwrap_or(!timeout.is_zero());
        let labels = match labels {
            None if response_required && !timeout.is_zero() => vec![TWIN_PERSISTED.to_owned()],
            None => Vec::new(),
            Some(labels) => {
                let mut kept: Vec<String> = Vec::with_capacity(labels.len());
                for label in labels {
                    if label != LIVE_RESPONSE && !kept.contains(&label) {
                        kept.push(label);
                    }
                }
                kept
            }
        };
        if timeout.is_zero() && (response_required || !labels.is_empty()) {
            return Err(zero_timeout());
        }
        Ok(Requested { labels, response_required, timeout })
    }

    /// A live message's or live command's requests, as Ditto's
    /// `MessageCommandAckRequestSetter` sets them: `live-response` (the
    /// receiver's response) when a response is required and no labels
    /// are given; with labels, `live-response` added when a response is
    /// required and removed when not. The twin's built-in labels are
    /// dropped, and where some were given Ditto's setter keeps the given
    /// labels without them *instead* of the ones it added or removed (its
    /// two steps both start from the labels given): that is kept here.
    /// The timeout is the call's, already checked.
    pub fn live(
        labels: Option<Vec<String>>,
        response_required: bool,
        timeout: Duration,
    ) -> Result<Requested, DittoError> {
        let labels = match labels {
            None if response_required => vec![LIVE_RESPONSE.to_owned()],
            None => Vec::new(),
            Some(given) => {
                let twins_own =
                    |label: &String| label == TWIN_PERSISTED || label == SEARCH_PERSISTED;
                let filtered = given.iter().any(twins_own);
                let mut kept: Vec<String> = Vec::with_capacity(given.len() + 1);
                for label in given {
                    if !twins_own(&label) && !kept.contains(&label) {
                        kept.push(label);
                    }
                }
                let has_own = kept.iter().any(|label| label == LIVE_RESPONSE);
                // Where the twin's labels were filtered out, Ditto's filter
                // step overwrote what the first one did: nothing is added
                // or removed.
                if !filtered && response_required && !kept.is_empty() && !has_own {
                    kept.push(LIVE_RESPONSE.to_owned());
                } else if !filtered && !response_required {
                    kept.retain(|label| label != LIVE_RESPONSE);
                }
                kept
            }
        };
        if timeout.is_zero() && !labels.is_empty() {
            return Err(zero_timeout());
        }
        Ok(Requested { labels, response_required, timeout })
    }

    /// Whether the answer is the command's own response (or 202 without
    /// one): nothing or only the command's own label (`twin-persisted`,
    /// `live-response`) was requested.
    pub fn plain(&self) -> bool {
        match self.labels.as_slice() {
            [] => true,
            [only] => is_own(only),
            _ => false,
        }
    }

    /// Whether a label was requested that only a subscriber could
    /// fulfil.
    pub fn awaits_subscribers(&self) -> bool {
        self.labels.iter().any(|label| is_subscribers(label))
    }

    /// What the command's event asks its subscribers for, under
    /// `correlation_id`: `None` when only built-in labels were requested.
    pub fn event_acks(&self, correlation_id: &str) -> Option<EventAcks> {
        let labels: Vec<String> =
            self.labels.iter().filter(|label| is_subscribers(label)).cloned().collect();
        (!labels.is_empty())
            .then(|| EventAcks { correlation_id: correlation_id.to_owned(), labels })
    }

    /// The acknowledgements of a command that was carried out, in the
    /// order requested: `own` is its response as its own label's
    /// acknowledgement (`twin-persisted`, `live-response`; `None` when not
    /// asked for), `received` what subscribers sent in time; every other
    /// label has timed out.
    pub fn fulfil(&self, own: Option<Ack>, received: Vec<Ack>, correlation_id: &str) -> Vec<Ack> {
        self.labels
            .iter()
            .map(|label| {
                if let Some(own) = own.as_ref().filter(|own| own.label == *label) {
                    return own.clone();
                }
                match label.as_str() {
                    SEARCH_PERSISTED => Ack {
                        label: SEARCH_PERSISTED.to_owned(),
                        status: 204,
                        payload: None,
                        headers: correlation_headers(correlation_id),
                    },
                    _ => received
                        .iter()
                        .find(|ack| ack.label == *label)
                        .cloned()
                        .unwrap_or_else(|| Ack::timed_out(label, self.timeout, correlation_id)),
                }
            })
            .collect()
    }
}

/// A command's own label, fulfilled by its own response.
fn is_own(label: &str) -> bool {
    label == TWIN_PERSISTED || label == LIVE_RESPONSE
}

/// A label only a subscriber can fulfil: not built in.
fn is_subscribers(label: &str) -> bool {
    !is_own(label) && label != SEARCH_PERSISTED
}

/// Ditto's refusal of a timeout of zero where an answer is awaited.
fn zero_timeout() -> DittoError {
    DittoError::new(
        400,
        "header.invalid",
        "The value of the header 'timeout' must not be zero if response or acknowledgements are requested.",
        "Please provide a positive timeout.".to_owned(),
    )
}

/// Reads a `requested-acks` value: a JSON array of labels, as Ditto's
/// headers carry it, or the labels separated by commas, as its HTTP API
/// documents them. Empty means none. A label outside Ditto's pattern is
/// 400 `header.invalid`.
pub fn parse_labels(text: &str) -> Result<Vec<String>, DittoError> {
    let invalid = || {
        DittoError::header_invalid("requested-acks", text, "JSON array of acknowledgement labels")
    };
    let trimmed = text.trim();
    let labels: Vec<String> = if trimmed.starts_with('[') {
        let array: Vec<Value> = serde_json::from_str(trimmed).map_err(|_| invalid())?;
        array
            .into_iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(invalid))
            .collect::<Result<_, _>>()?
    } else {
        trimmed.split(',').map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
    };
    if labels.len() > MAX_LABELS || !labels.iter().all(|label| is_label(label)) {
        return Err(invalid());
    }
    Ok(labels)
}

impl Requested {
    /// `twin_modify` from a Ditto protocol message's headers, where
    /// `requested-acks` is an array of labels and `response-required` a
    /// boolean (or either as text).
    pub fn of_protocol_headers(headers: &Map<String, Value>) -> Result<Requested, DittoError> {
        let labels = requested_labels(headers)?;
        let response_required = headers.get("response-required").map(|value| match value {
            Value::Bool(required) => *required,
            Value::String(text) => !text.eq_ignore_ascii_case("false"),
            _ => true,
        });
        let timeout = headers.get("timeout").map(|value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
        Requested::twin_modify(labels, response_required, timeout.as_deref())
    }
}

/// The labels of a Ditto protocol message's `requested-acks` header (an
/// array, or its text), `None` without one.
pub fn requested_labels(headers: &Map<String, Value>) -> Result<Option<Vec<String>>, DittoError> {
    headers
        .get("requested-acks")
        .map(|value| match value {
            Value::String(text) => parse_labels(text),
            other => parse_labels(&other.to_string()),
        })
        .transpose()
}

/// Ditto's `ACK_LABEL_REGEX`: an optional unresolved placeholder such as
/// `{{connection:id}}:`, then 3 to 165 of `a-zA-Z0-9-_:`.
pub fn is_label(label: &str) -> bool {
    let rest = match label.strip_prefix("{{") {
        Some(after) => {
            let Some(end) = after.find("}}:") else { return false };
            let placeholder = after[..end].trim();
            let valid = placeholder.split_once(':').is_some_and(|(kind, name)| {
                [kind, name]
                    .iter()
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase()))
            });
            if !valid {
                return false;
            }
            &after[end + 3..]
        }
        None => label,
    };
    (3..=165).contains(&rest.len())
        && rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':'))
}

/// Ditto's `AcknowledgementLabelInvalidException`: a label outside
/// [`is_label`]'s pattern where the model reads one.
pub fn label_invalid(label: &str) -> DittoError {
    DittoError::new(
        400,
        "acknowledgement:label.invalid",
        format!("Acknowledgement label <{label}> is invalid!"),
        "An acknowledgement label must conform to the regular expression of Ditto documentation."
            .to_owned(),
    )
}

/// Ditto's `AcknowledgementLabelNotDeclaredException`: a subscriber sent
/// an acknowledgement under a label it did not declare.
pub fn label_not_declared(label: &str) -> DittoError {
    DittoError::new(
        400,
        "acknowledgement:label.not.declared",
        format!("Cannot send acknowledgement with label <{label}>, which is not declared."),
        "Each connection may only send acknowledgements whose label matches one declared for the connection.".to_owned(),
    )
}

/// One acknowledgement.
#[derive(Debug, Clone, PartialEq)]
pub struct Ack {
    pub label: String,
    pub status: u16,
    pub payload: Option<Value>,
    pub headers: Map<String, Value>,
}

impl Ack {
    /// Ditto's acknowledgement of a label that did not come in time
    /// (`AcknowledgementRequestTimeoutException`).
    pub fn timed_out(label: &str, timeout: Duration, correlation_id: &str) -> Ack {
        Ack {
            label: label.to_owned(),
            status: 408,
            payload: Some(json!({
                "status": 408,
                "error": "acknowledgement:request.timeout",
                "message": format!(
                    "The acknowledgement request reached the specified timeout of {}ms.",
                    crate::rql::grouped(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX))
                ),
                "description": "Try increasing the timeout and make sure that the requested acknowledgement is sent back in time.",
            })),
            headers: correlation_headers(correlation_id),
        }
    }

    fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Headers of an acknowledgement that only carries the command's
/// correlation id.
pub fn correlation_headers(correlation_id: &str) -> Map<String, Value> {
    let mut headers = Map::new();
    headers.insert("correlation-id".into(), correlation_id.into());
    headers
}

/// The status of aggregated acknowledgements: one's own, else 200 when
/// all succeeded and 424 when one did not (`Acknowledgements`).
pub fn combined_status(acks: &[Ack]) -> u16 {
    match acks {
        [only] => only.status,
        _ if acks.iter().all(Ack::is_success) => 200,
        _ => 424,
    }
}

/// The HTTP body of aggregated acknowledgements: one's payload as it is
/// (`None` when it has none), several as label → `{status, payload,
/// headers}` (`Acknowledgements.getEntity`).
pub fn aggregated_body(acks: &[Ack]) -> Option<Value> {
    if let [only] = acks {
        return only.payload.clone();
    }
    Some(by_label(acks, true))
}

/// The value of a Ditto protocol `…/things/twin/acks` message: always
/// label → `{status, payload, headers}`, headers left out when there are
/// none (`AcknowledgementsAdapter`).
pub fn protocol_value(acks: &[Ack]) -> Value {
    by_label(acks, false)
}

fn by_label(acks: &[Ack], empty_headers: bool) -> Value {
    let mut body = Map::new();
    for ack in acks {
        let mut entry = Map::new();
        entry.insert("status".into(), ack.status.into());
        if let Some(payload) = &ack.payload {
            entry.insert("payload".into(), payload.clone());
        }
        if empty_headers || !ack.headers.is_empty() {
            entry.insert("headers".into(), Value::Object(ack.headers.clone()));
        }
        body.insert(ack.label.clone(), Value::Object(entry));
    }
    Value::Object(body)
}

/// What an answer without a response (`response-required=false`) keeps
/// of failed acknowledgements: their statuses only, as Ditto's gateway
/// minimizes them.
pub fn minimized(acks: &[Ack]) -> Vec<Ack> {
    acks.iter().map(|ack| Ack { payload: None, headers: Map::new(), ..ack.clone() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|l| l.to_string()).collect())
    }

    #[test]
    fn live_signals_request_live_response_as_dittos_message_setter() {
        let ten = Duration::from_secs(10);
        let plain = Requested::live(None, true, ten).unwrap();
        assert_eq!(plain.labels, vec![LIVE_RESPONSE]);
        assert!(plain.plain() && !plain.awaits_subscribers());
        assert!(Requested::live(None, false, ten).unwrap().labels.is_empty());

        // Custom labels: live-response added when a response is required,
        // removed when not.
        let both = Requested::live(labels(&["dev:got", "dev:got"]), true, ten).unwrap();
        assert_eq!(both.labels, vec!["dev:got", LIVE_RESPONSE]);
        assert!(!both.plain() && both.awaits_subscribers());
        assert_eq!(both.event_acks("c").unwrap().labels, vec!["dev:got"]);
        let quiet = Requested::live(labels(&[LIVE_RESPONSE, "dev:got"]), false, ten).unwrap();
        assert_eq!(quiet.labels, vec!["dev:got"]);
        assert!(Requested::live(labels(&[SEARCH_PERSISTED]), true, ten).unwrap().plain());
        // The twin's labels dropped, and then, as Ditto's setter does, the
        // given labels kept as they are otherwise.
        let twins = Requested::live(labels(&["dev:got", TWIN_PERSISTED]), true, ten).unwrap();
        assert_eq!(twins.labels, vec!["dev:got"]);
        let twins = Requested::live(labels(&[LIVE_RESPONSE, TWIN_PERSISTED]), false, ten).unwrap();
        assert_eq!(twins.labels, vec![LIVE_RESPONSE]);

        let zero = Requested::live(labels(&["dev:got"]), false, Duration::ZERO).unwrap_err();
        assert_eq!((zero.status, zero.error), (400, "header.invalid"));

        // The response is the live-response acknowledgement; a label that
        // did not come is 408.
        let own = Ack {
            label: LIVE_RESPONSE.into(),
            status: 200,
            payload: Some(json!(1)),
            headers: Map::new(),
        };
        let acks = both.fulfil(Some(own.clone()), Vec::new(), "c");
        assert_eq!((acks[0].status, &acks[1]), (408, &own));
        assert_eq!(combined_status(&acks), 424);
    }

    #[test]
    fn defaults_follow_dittos_table() {
        let plain = Requested::twin_modify(None, None, None).unwrap();
        assert_eq!(plain.labels, vec![TWIN_PERSISTED]);
        assert!(plain.response_required && plain.plain());
        assert_eq!(plain.timeout, TWIN_COMMAND_TIMEOUT);

        let fire = Requested::twin_modify(None, Some(false), None).unwrap();
        assert!(fire.labels.is_empty() && !fire.response_required && fire.plain());

        let zero = Requested::twin_modify(None, None, Some("0")).unwrap();
        assert!(zero.labels.is_empty() && !zero.response_required);

        for (acks, required) in [(labels(&[TWIN_PERSISTED]), None), (None, Some(true))] {
            let error = Requested::twin_modify(acks, required, Some("0")).unwrap_err();
            assert_eq!((error.status, error.error), (400, "header.invalid"));
        }

        let several = Requested::twin_modify(
            labels(&[SEARCH_PERSISTED, LIVE_RESPONSE, TWIN_PERSISTED, SEARCH_PERSISTED]),
            None,
            Some("5s"),
        )
        .unwrap();
        assert_eq!(several.labels, vec![SEARCH_PERSISTED, TWIN_PERSISTED]);
        assert!(!several.plain() && !several.awaits_subscribers());
        assert!(Requested::twin_modify(labels(&["my-ack"]), None, None)
            .unwrap()
            .awaits_subscribers());
    }

    #[test]
    fn labels_are_read_as_ditto_reads_them() {
        assert_eq!(
            parse_labels("twin-persisted, my:ack").unwrap(),
            vec!["twin-persisted", "my:ack"]
        );
        assert_eq!(parse_labels(r#"["a-b-c","{{connection:id}}:done"]"#).unwrap().len(), 2);
        assert!(parse_labels("").unwrap().is_empty());
        assert!(parse_labels("[]").unwrap().is_empty());
        for bad in
            ["ab", "a b c", "[1]", "[\"ok-label\"", "{{Connection:id}}:abc", &"x".repeat(166)]
        {
            let error = parse_labels(bad).unwrap_err();
            assert_eq!((error.status, error.error), (400, "header.invalid"), "{bad}");
        }
    }

    #[test]
    fn acknowledgements_aggregate_as_dittos() {
        let persisted = Ack {
            label: TWIN_PERSISTED.into(),
            status: 204,
            payload: None,
            headers: correlation_headers("c"),
        };
        let requested = Requested::twin_modify(
            labels(&[TWIN_PERSISTED, SEARCH_PERSISTED]),
            None,
            Some("250ms"),
        )
        .unwrap();
        let acks = requested.fulfil(Some(persisted.clone()), Vec::new(), "c");
        assert_eq!(combined_status(&acks), 200);
        let body = aggregated_body(&acks).unwrap();
        assert_eq!(
            body["search-persisted"],
            json!({"status": 204, "headers": {"correlation-id": "c"}})
        );

        let custom = Requested::twin_modify(labels(&["my-ack", TWIN_PERSISTED]), None, Some("60s"))
            .unwrap()
            .fulfil(Some(persisted.clone()), Vec::new(), "c");
        assert_eq!(combined_status(&custom), 424);
        let body = aggregated_body(&custom).unwrap();
        assert_eq!(body["my-ack"]["status"], 408);
        assert_eq!(
            body["my-ack"]["payload"]["message"],
            "The acknowledgement request reached the specified timeout of 60,000ms."
        );
        assert_eq!(minimized(&custom)[0].payload, None);

        let single = Requested::twin_modify(labels(&[SEARCH_PERSISTED]), None, None).unwrap();
        let acks = single.fulfil(Some(persisted), Vec::new(), "c");
        assert_eq!((combined_status(&acks), aggregated_body(&acks)), (204, None));
    }
}
