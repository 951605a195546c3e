//! AWS IoT Device Shadow documents, as pure functions over JSON: the
//! request a device sends, the delta, the metadata, and every document
//! the service publishes back. No I/O and no twin service here, so each
//! rule is tested on its own.
//!
//! What each follows (AWS IoT Developer Guide):
//! - `device-shadow-document.html`: request and response documents,
//!   `state.desired/reported/delta`, per-leaf `metadata` timestamps in
//!   epoch seconds, `version`, `clientToken`, `timestamp`; `null` deletes
//!   a key, arrays are replaced whole; the delta holds the desired leaves
//!   whose value differs from the reported one, arrays compared whole.
//! - `device-shadow-error-messages.html`: every error's code and message.
//! - `device-shadow-limits` (AWS IoT Core quotas): 8 KB of desired plus
//!   reported state, metadata excluded; 6 levels of nesting; a
//!   `clientToken` of at most 64 bytes.

use serde_json::{Map, Value};

/// AWS's limit on a shadow's state, desired plus reported, metadata
/// excluded ("Maximum size of a JSON state document": 8 KB). Counted on
/// the compact JSON of the two sections, as AWS counts the document.
pub const MAX_STATE_BYTES: usize = 8 * 1024;

/// AWS's limit on the levels of nesting in desired or reported.
pub const MAX_DEPTH: usize = 6;

/// AWS's limit on a `clientToken`, in bytes.
pub const MAX_CLIENT_TOKEN_BYTES: usize = 64;

/// The largest request payload read at all: AWS IoT's message size limit
/// (128 KB). A larger one cannot hold a state under `MAX_STATE_BYTES`
/// worth parsing, so it is refused before it costs a parse.
pub const MAX_REQUEST_BYTES: usize = 128 * 1024;

/// One of the errors AWS publishes on `…/rejected`, with its exact text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ShadowError {
    pub code: u16,
    pub message: String,
}

impl ShadowError {
    fn new(code: u16, message: impl Into<String>) -> ShadowError {
        ShadowError { code, message: message.into() }
    }

    pub fn invalid_json() -> ShadowError {
        ShadowError::new(400, "Invalid JSON")
    }

    pub fn missing_state() -> ShadowError {
        ShadowError::new(400, "Missing required node: state")
    }

    pub fn state_not_object() -> ShadowError {
        ShadowError::new(400, "State node must be an object")
    }

    pub fn desired_not_object() -> ShadowError {
        ShadowError::new(400, "Desired node must be an object")
    }

    pub fn reported_not_object() -> ShadowError {
        ShadowError::new(400, "Reported node must be an object")
    }

    pub fn invalid_version() -> ShadowError {
        ShadowError::new(400, "Invalid version")
    }

    pub fn invalid_client_token() -> ShadowError {
        ShadowError::new(400, "Invalid clientToken")
    }

    pub fn too_deep() -> ShadowError {
        ShadowError::new(
            400,
            format!("JSON contains too many levels of nesting; maximum is {MAX_DEPTH}"),
        )
    }

    pub fn invalid_node() -> ShadowError {
        ShadowError::new(400, "State contains an invalid node")
    }

    pub fn forbidden() -> ShadowError {
        ShadowError::new(403, "Forbidden")
    }

    pub fn thing_not_found() -> ShadowError {
        ShadowError::new(404, "Thing not found")
    }

    /// AWS names the classic shadow by its thing name here.
    pub fn no_shadow(name: &str) -> ShadowError {
        ShadowError::new(404, format!("No shadow exists with name: '{name}'"))
    }

    pub fn version_conflict() -> ShadowError {
        ShadowError::new(409, "Version conflict")
    }

    pub fn too_large() -> ShadowError {
        ShadowError::new(413, "The payload exceeds the maximum size allowed")
    }

    pub fn internal() -> ShadowError {
        ShadowError::new(500, "Internal service failure")
    }
}

/// A request refused, with the client token to echo when it had a valid
/// one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub error: ShadowError,
    pub client_token: Option<String>,
}

/// What every request may carry besides its state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHeader {
    pub client_token: Option<String>,
    pub version: Option<u64>,
}

/// An `/update` request. A section absent is `None`; `Some(Value::Null)`
/// deletes the whole section, as AWS's `"desired": null` does.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub header: RequestHeader,
    pub desired: Option<Value>,
    pub reported: Option<Value>,
}

/// A `/get` or `/delete` request: an empty payload, or an object with an
/// optional `clientToken` (and, for `/delete`, `version`).
pub fn parse_plain(payload: &[u8]) -> Result<RequestHeader, Rejected> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Ok(RequestHeader::default());
    }
    let map = parse_object(payload)?;
    header(&map)
}

/// An `/update` request, checked in AWS's order: JSON, `clientToken`,
/// `version`, then `state` and its sections, their nesting and keys.
pub fn parse_update(payload: &[u8]) -> Result<Update, Rejected> {
    let map = parse_object(payload)?;
    let header = header(&map)?;
    let refuse = |error: ShadowError| Rejected { error, client_token: header.client_token.clone() };
    let state = match map.get("state") {
        None => return Err(refuse(ShadowError::missing_state())),
        Some(Value::Object(state)) => state,
        Some(_) => return Err(refuse(ShadowError::state_not_object())),
    };
    if state.keys().any(|key| key != "desired" && key != "reported") {
        return Err(refuse(ShadowError::invalid_node()));
    }
    let section = |key: &str, not_object: fn() -> ShadowError| match state.get(key) {
        None => Ok(None),
        Some(value @ (Value::Object(_) | Value::Null)) => {
            if depth(value) > MAX_DEPTH {
                return Err(ShadowError::too_deep());
            }
            crate::id::validate_keys(value).map_err(|_| ShadowError::invalid_node())?;
            Ok(Some(value.clone()))
        }
        Some(_) => Err(not_object()),
    };
    let desired = section("desired", ShadowError::desired_not_object).map_err(refuse)?;
    let reported = section("reported", ShadowError::reported_not_object).map_err(refuse)?;
    Ok(Update { header, desired, reported })
}

fn parse_object(payload: &[u8]) -> Result<Map<String, Value>, Rejected> {
    let rejected = |error| Rejected { error, client_token: None };
    if payload.len() > MAX_REQUEST_BYTES {
        return Err(rejected(ShadowError::too_large()));
    }
    match serde_json::from_slice(payload) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(rejected(ShadowError::invalid_json())),
    }
}

fn header(map: &Map<String, Value>) -> Result<RequestHeader, Rejected> {
    let client_token = match map.get("clientToken") {
        None => None,
        Some(Value::String(token)) if token.len() <= MAX_CLIENT_TOKEN_BYTES => Some(token.clone()),
        Some(_) => {
            return Err(Rejected { error: ShadowError::invalid_client_token(), client_token: None })
        }
    };
    let version = match map.get("version") {
        None => None,
        Some(value) => Some(value.as_u64().ok_or_else(|| Rejected {
            error: ShadowError::invalid_version(),
            client_token: client_token.clone(),
        })?),
    };
    Ok(RequestHeader { client_token, version })
}

/// Levels of nesting: a scalar is 0, an object or array one more than its
/// deepest member.
fn depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

impl Update {
    /// The merge patch (RFC 7396) of the shadow's feature: reported is
    /// `properties`, desired is `desiredProperties`. AWS's update is a
    /// merge too: `null` deletes, objects merge, arrays replace.
    pub fn feature_patch(&self) -> Value {
        let mut patch = Map::new();
        if let Some(reported) = &self.reported {
            patch.insert(REPORTED.into(), reported.clone());
        }
        if let Some(desired) = &self.desired {
            patch.insert(DESIRED.into(), desired.clone());
        }
        Value::Object(patch)
    }

    /// The request's state as `/update/accepted` echoes it.
    fn state(&self) -> Map<String, Value> {
        let mut state = Map::new();
        if let Some(desired) = &self.desired {
            state.insert("desired".into(), desired.clone());
        }
        if let Some(reported) = &self.reported {
            state.insert("reported".into(), reported.clone());
        }
        state
    }
}

/// Where a feature keeps each side of its shadow.
pub const REPORTED: &str = "properties";
pub const DESIRED: &str = "desiredProperties";

/// The size AWS limits: the compact JSON of the non-empty desired and
/// reported sections of a feature.
pub fn state_size(feature: &Value) -> usize {
    [DESIRED, REPORTED]
        .iter()
        .filter_map(|key| feature.get(key).filter(|section| !is_empty(section)))
        .map(|section| serde_json::to_vec(section).map_or(0, |bytes| bytes.len()))
        .sum()
}

/// The desired leaves whose value differs from the reported one, or
/// `None` when there are none. Objects are compared key by key; anything
/// else (arrays included) whole.
pub fn delta(desired: &Value, reported: Option<&Value>) -> Option<Value> {
    let Value::Object(desired) = desired else {
        return (reported != Some(desired)).then(|| desired.clone());
    };
    let reported = reported.and_then(Value::as_object);
    let mut differing = Map::new();
    for (key, wanted) in desired {
        let have = reported.and_then(|reported| reported.get(key));
        let differs = match (wanted, have) {
            (Value::Object(_), Some(have @ Value::Object(_))) => delta(wanted, Some(have)),
            _ if have == Some(wanted) => None,
            _ => Some(wanted.clone()),
        };
        if let Some(value) = differs {
            differing.insert(key.clone(), value);
        }
    }
    (!differing.is_empty()).then_some(Value::Object(differing))
}

/// The delta of a feature (as its caller sees it).
pub fn feature_delta(feature: &Value) -> Option<Value> {
    delta(feature.get(DESIRED)?, feature.get(REPORTED))
}

/// Ditto's `_metadata` below one section as AWS's `metadata`: each leaf's
/// `{"_modified": "<RFC 3339>"}` becomes `{"timestamp": <epoch seconds>}`.
/// `shape` narrows it to the leaves a document shows (the caller's view,
/// the delta). An array is one leaf here, where AWS gives each element
/// its own entry.
pub fn aws_metadata(ditto: Option<&Value>, shape: &Value) -> Option<Value> {
    let ditto = ditto?.as_object()?;
    if let Some(modified) = ditto.get(crate::thing::metadata::LEAF_MODIFIED_KEY) {
        if let Some(stamp) = modified.as_str().and_then(crate::policy::Timestamp::parse) {
            return Some(timestamp_entry(stamp.unix_seconds()));
        }
    }
    let Value::Object(shape) = shape else { return None };
    let converted: Map<String, Value> = shape
        .iter()
        .filter_map(|(key, inner)| aws_metadata(ditto.get(key), inner).map(|m| (key.clone(), m)))
        .collect();
    (!converted.is_empty()).then_some(Value::Object(converted))
}

/// Every leaf of `value` (a `null` that deletes included) stamped with
/// `seconds`: the metadata of what one update wrote.
pub fn stamped(value: &Value, seconds: i64) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter().map(|(key, inner)| (key.clone(), stamped(inner, seconds))).collect(),
        ),
        _ => timestamp_entry(seconds),
    }
}

fn timestamp_entry(seconds: i64) -> Value {
    let mut entry = Map::new();
    entry.insert("timestamp".into(), Value::from(seconds));
    Value::Object(entry)
}

fn is_empty(value: &Value) -> bool {
    value.is_null() || value.as_object().is_some_and(Map::is_empty)
}

/// A shadow as one moment of its feature: the feature's value as the
/// reader may see it, and the feature's `_metadata`.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    pub feature: &'a Value,
    pub metadata: Option<&'a Value>,
    pub version: u64,
}

impl Snapshot<'_> {
    /// `state` (desired, reported, and with `with_delta` the delta) and
    /// `metadata` (desired, reported), empty sections left out as AWS
    /// leaves them out.
    fn state_and_metadata(&self, with_delta: bool) -> (Map<String, Value>, Map<String, Value>) {
        let mut state = Map::new();
        let mut metadata = Map::new();
        for (aws, ditto) in [("desired", DESIRED), ("reported", REPORTED)] {
            let Some(section) = self.feature.get(ditto).filter(|s| !is_empty(s)) else { continue };
            state.insert(aws.into(), section.clone());
            let meta = self.metadata.and_then(|m| m.get(ditto));
            if let Some(meta) = aws_metadata(meta, section) {
                metadata.insert(aws.into(), meta);
            }
        }
        if with_delta {
            if let Some(delta) = feature_delta(self.feature) {
                state.insert("delta".into(), delta);
            }
        }
        (state, metadata)
    }

    fn document(&self, with_delta: bool) -> Map<String, Value> {
        let (state, metadata) = self.state_and_metadata(with_delta);
        let mut document = Map::new();
        document.insert("state".into(), Value::Object(state));
        document.insert("metadata".into(), Value::Object(metadata));
        document.insert("version".into(), Value::from(self.version));
        document
    }
}

/// What every response ends with: `timestamp`, then `clientToken` when
/// the request had one.
fn finish(mut document: Map<String, Value>, seconds: i64, token: Option<&str>) -> Value {
    document.insert("timestamp".into(), Value::from(seconds));
    if let Some(token) = token {
        document.insert("clientToken".into(), Value::String(token.to_owned()));
    }
    Value::Object(document)
}

/// `/get/accepted`: the whole shadow, its delta and metadata.
pub fn get_accepted(shadow: Snapshot<'_>, seconds: i64, token: Option<&str>) -> Value {
    finish(shadow.document(true), seconds, token)
}

/// `/update/accepted`: the request's state, each of its leaves stamped
/// with the update's time, and the version it made.
pub fn update_accepted(update: &Update, version: u64, seconds: i64) -> Value {
    let state = update.state();
    let metadata: Map<String, Value> =
        state.iter().map(|(key, section)| (key.clone(), stamped(section, seconds))).collect();
    let mut document = Map::new();
    document.insert("state".into(), Value::Object(state));
    document.insert("metadata".into(), Value::Object(metadata));
    document.insert("version".into(), Value::from(version));
    finish(document, seconds, update.header.client_token.as_deref())
}

/// `/update/delta`, or `None` when desired and reported agree: the delta
/// as `state`, the desired metadata of its leaves.
pub fn delta_document(shadow: Snapshot<'_>, seconds: i64) -> Option<Value> {
    let delta = feature_delta(shadow.feature)?;
    let mut document = Map::new();
    document.insert("version".into(), Value::from(shadow.version));
    let desired_meta = shadow.metadata.and_then(|m| m.get(DESIRED));
    document.insert("state".into(), delta.clone());
    let metadata = aws_metadata(desired_meta, &delta).unwrap_or_else(|| Value::Object(Map::new()));
    document.insert("metadata".into(), metadata);
    Some(finish(document, seconds, None))
}

/// `/update/documents`: the shadow before and after an update. A shadow
/// the update created had no `previous`; AWS sends `null` there.
pub fn documents(
    previous: Option<Snapshot<'_>>,
    current: Snapshot<'_>,
    seconds: i64,
    token: Option<&str>,
) -> Value {
    let mut document = Map::new();
    let previous = previous.map_or(Value::Null, |shadow| Value::Object(shadow.document(false)));
    document.insert("previous".into(), previous);
    document.insert("current".into(), Value::Object(current.document(false)));
    finish(document, seconds, token)
}

/// `/delete/accepted`: the version of the shadow deleted.
pub fn delete_accepted(version: u64, seconds: i64, token: Option<&str>) -> Value {
    let mut document = Map::new();
    document.insert("version".into(), Value::from(version));
    finish(document, seconds, token)
}

/// `…/rejected`: `code`, `message`, `timestamp`, `clientToken`.
pub fn rejected(rejected: &Rejected, seconds: i64) -> Value {
    let mut document = Map::new();
    document.insert("code".into(), Value::from(rejected.error.code));
    document.insert("message".into(), Value::String(rejected.error.message.clone()));
    finish(document, seconds, rejected.client_token.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(payload: Value) -> Result<Update, Rejected> {
        parse_update(payload.to_string().as_bytes())
    }

    fn refusal(payload: &[u8]) -> (u16, String, Option<String>) {
        let rejected = parse_update(payload).unwrap_err();
        (rejected.error.code, rejected.error.message, rejected.client_token)
    }

    #[test]
    fn the_delta_is_the_desired_leaves_that_differ() {
        let desired = json!({"color": "green", "on": true, "light": {"level": 5, "mode": "eco"},
                             "list": [1, 2], "new": {"a": 1}});
        let reported = json!({"color": "red", "on": true, "light": {"level": 5, "mode": "max"},
                              "list": [1, 2, 3], "extra": 1});
        assert_eq!(
            delta(&desired, Some(&reported)),
            Some(json!({"color": "green", "light": {"mode": "eco"}, "list": [1, 2],
                        "new": {"a": 1}}))
        );
        assert_eq!(delta(&desired, None), Some(desired.clone()));
        assert_eq!(delta(&desired, Some(&desired)), None, "nothing differs");
        assert_eq!(delta(&json!({}), Some(&reported)), None);
        // An object wanted where a scalar is reported is wanted whole.
        assert_eq!(
            delta(&json!({"a": {"b": 1}}), Some(&json!({"a": 3}))),
            Some(json!({"a": {"b": 1}}))
        );
        // Arrays compare whole, order included.
        assert_eq!(
            delta(&json!({"a": [2, 1]}), Some(&json!({"a": [1, 2]}))),
            Some(json!({"a": [2, 1]}))
        );
    }

    #[test]
    fn a_feature_delta_reads_desired_and_reported_properties() {
        let feature = json!({"properties": {"on": false}, "desiredProperties": {"on": true}});
        assert_eq!(feature_delta(&feature), Some(json!({"on": true})));
        assert_eq!(feature_delta(&json!({"properties": {"on": false}})), None);
    }

    #[test]
    fn an_update_parses_into_a_merge_patch() {
        let parsed = update(json!({"state": {"desired": {"on": true}, "reported": null},
                                   "clientToken": "t1", "version": 7}))
        .unwrap();
        assert_eq!(
            parsed.header,
            RequestHeader { client_token: Some("t1".into()), version: Some(7) }
        );
        assert_eq!(
            parsed.feature_patch(),
            json!({"properties": null, "desiredProperties": {"on": true}})
        );
        let only_reported = update(json!({"state": {"reported": {"t": 1}}})).unwrap();
        assert_eq!(only_reported.feature_patch(), json!({"properties": {"t": 1}}));
    }

    #[test]
    fn updates_are_refused_with_awss_messages() {
        assert_eq!(refusal(b"{nope").1, "Invalid JSON");
        assert_eq!(refusal(b"[1]").1, "Invalid JSON");
        assert_eq!(refusal(b"{}").1, "Missing required node: state");
        assert_eq!(refusal(br#"{"state": 1}"#).1, "State node must be an object");
        assert_eq!(refusal(br#"{"state": null}"#).1, "State node must be an object");
        assert_eq!(refusal(br#"{"state": {"desired": 1}}"#).1, "Desired node must be an object");
        assert_eq!(refusal(br#"{"state": {"reported": []}}"#).1, "Reported node must be an object");
        assert_eq!(refusal(br#"{"state": {"delta": {}}}"#).1, "State contains an invalid node");
        assert_eq!(
            refusal(br#"{"state": {"desired": {"a/b": 1}}}"#).1,
            "State contains an invalid node"
        );
        let version = refusal(br#"{"state": {}, "version": "3", "clientToken": "c"}"#);
        assert_eq!(version, (400, "Invalid version".into(), Some("c".into())));
        assert_eq!(refusal(br#"{"state": {}, "version": -1}"#).1, "Invalid version");
        let long = format!(r#"{{"state": {{}}, "clientToken": "{}"}}"#, "x".repeat(65));
        assert_eq!(refusal(long.as_bytes()), (400, "Invalid clientToken".into(), None));
        let longest = format!(r#"{{"state": {{}}, "clientToken": "{}"}}"#, "x".repeat(64));
        assert!(parse_update(longest.as_bytes()).is_ok());
        assert_eq!(refusal(br#"{"state": {}, "clientToken": 5}"#).1, "Invalid clientToken");
        let huge = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert_eq!(refusal(&huge).0, 413);
    }

    #[test]
    fn six_levels_of_nesting_and_no_more() {
        let six = json!({"state": {"reported": {"1": {"2": {"3": {"4": {"5": {"6": 0}}}}}}}});
        assert!(update(six).is_ok());
        let seven =
            json!({"state": {"desired": {"1": {"2": {"3": {"4": {"5": {"6": {"7": 0}}}}}}}}});
        let refused = update(seven).unwrap_err();
        assert_eq!(refused.error.message, "JSON contains too many levels of nesting; maximum is 6");
        let arrays = json!({"state": {"desired": {"1": [[[[[[0]]]]]]}}});
        assert_eq!(update(arrays).unwrap_err().error.code, 400, "arrays nest too");
    }

    #[test]
    fn get_and_delete_take_an_empty_payload_or_a_client_token() {
        assert_eq!(parse_plain(b"").unwrap(), RequestHeader::default());
        assert_eq!(parse_plain(b" \n").unwrap(), RequestHeader::default());
        assert_eq!(
            parse_plain(br#"{"clientToken":"a"}"#).unwrap().client_token.as_deref(),
            Some("a")
        );
        assert_eq!(parse_plain(b"x").unwrap_err().error, ShadowError::invalid_json());
    }

    #[test]
    fn the_state_size_counts_desired_and_reported_only() {
        let feature = json!({"definition": ["x:y:1"], "properties": {"a": 1},
                             "desiredProperties": {"b": "cc"}});
        assert_eq!(state_size(&feature), r#"{"a":1}"#.len() + r#"{"b":"cc"}"#.len());
        assert_eq!(state_size(&json!({"desiredProperties": {}})), 0);
    }

    fn modified(seconds: i64) -> Value {
        let stamp = crate::policy::Timestamp::from_unix(seconds, 123_000);
        json!({"_modified": stamp.to_string()})
    }

    #[test]
    fn ditto_metadata_becomes_aws_timestamps_within_the_shape() {
        let meta = json!({"a": modified(10), "o": {"b": modified(20), "c": modified(30)}});
        let shape = json!({"a": 1, "o": {"b": 2}});
        assert_eq!(
            aws_metadata(Some(&meta), &shape),
            Some(json!({"a": {"timestamp": 10}, "o": {"b": {"timestamp": 20}}}))
        );
        assert_eq!(aws_metadata(None, &shape), None);
        assert_eq!(aws_metadata(Some(&meta), &json!({"zz": 1})), None);
    }

    #[test]
    fn stamped_marks_every_leaf_deletes_included() {
        assert_eq!(
            stamped(&json!({"a": 1, "b": null, "c": {"d": [1]}}), 5),
            json!({"a": {"timestamp": 5}, "b": {"timestamp": 5}, "c": {"d": {"timestamp": 5}}})
        );
    }

    #[test]
    fn the_documents_published() {
        let feature = json!({"properties": {"on": false, "t": 20},
                             "desiredProperties": {"on": true}});
        let metadata = json!({"properties": {"on": modified(1), "t": modified(2)},
                              "desiredProperties": {"on": modified(3)}});
        let shadow = Snapshot { feature: &feature, metadata: Some(&metadata), version: 4 };
        assert_eq!(
            get_accepted(shadow, 9, Some("tok")),
            json!({
                "state": {"desired": {"on": true}, "reported": {"on": false, "t": 20},
                          "delta": {"on": true}},
                "metadata": {"desired": {"on": {"timestamp": 3}},
                             "reported": {"on": {"timestamp": 1}, "t": {"timestamp": 2}}},
                "version": 4, "timestamp": 9, "clientToken": "tok"})
        );
        assert_eq!(
            delta_document(shadow, 9),
            Some(json!({"version": 4, "state": {"on": true},
                        "metadata": {"on": {"timestamp": 3}}, "timestamp": 9}))
        );
        let agreed = json!({"properties": {"on": true}, "desiredProperties": {"on": true}});
        assert_eq!(
            delta_document(Snapshot { feature: &agreed, metadata: None, version: 1 }, 9),
            None
        );

        let previous = Snapshot { feature: &agreed, metadata: None, version: 3 };
        let both = documents(Some(previous), shadow, 9, None);
        assert_eq!(both["previous"]["version"], 3);
        assert_eq!(
            both["previous"]["state"],
            json!({"desired": {"on": true}, "reported": {"on": true}})
        );
        assert_eq!(both["current"]["version"], 4);
        assert!(both["current"]["state"].get("delta").is_none(), "documents carry no delta");
        assert_eq!(documents(None, shadow, 9, None)["previous"], Value::Null);

        let request =
            update(json!({"state": {"desired": {"on": null}}, "clientToken": "c"})).unwrap();
        assert_eq!(
            update_accepted(&request, 5, 9),
            json!({"state": {"desired": {"on": null}},
                   "metadata": {"desired": {"on": {"timestamp": 9}}},
                   "version": 5, "timestamp": 9, "clientToken": "c"})
        );
        assert_eq!(delete_accepted(5, 9, None), json!({"version": 5, "timestamp": 9}));
        let refused =
            Rejected { error: ShadowError::version_conflict(), client_token: Some("c".into()) };
        assert_eq!(
            rejected(&refused, 9),
            json!({"code": 409, "message": "Version conflict", "timestamp": 9, "clientToken": "c"})
        );
    }

    #[test]
    fn empty_sections_are_left_out() {
        let feature = json!({"properties": {}, "desiredProperties": {"x": 1}});
        let document =
            get_accepted(Snapshot { feature: &feature, metadata: None, version: 1 }, 0, None);
        assert_eq!(document["state"], json!({"desired": {"x": 1}, "delta": {"x": 1}}));
    }
}
