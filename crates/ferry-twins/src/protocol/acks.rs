//! A subscriber's acknowledgements sent back as a Ditto protocol message:
//! one label's (`…/things/twin/acks/<label>`, its `status` and `value`)
//! or several at once (`…/things/twin/acks`, the value an object of
//! label → `{status, payload, headers}`, as Ditto's
//! `AcknowledgementsAdapter` reads it). WebSocket sessions and
//! connection sources send them the same way.

use super::{Criterion, Envelope, Topic};
use crate::acks::{label_not_declared, Ack, AckHub};
use crate::error::DittoError;
use serde_json::Value;

/// Whether `topic` is an acknowledgement message rather than a command.
pub fn is_ack(topic: &Topic) -> bool {
    topic.criterion == Criterion::Acks
}

/// Hands the acknowledgements in `envelope` to the command waiting for
/// them under its `correlation-id`. Only labels in `declared` (the
/// sender's) are taken: one that is not refuses the whole message with
/// 400 `acknowledgement:label.not.declared`, as Ditto does; one without a
/// status is `json.field.missing`. A message without a correlation id is
/// dropped, as Ditto drops it: nothing can wait for it.
pub fn deliver(
    hub: &AckHub,
    topic: &Topic,
    envelope: Envelope,
    declared: &[String],
) -> Result<(), DittoError> {
    let correlation_id = envelope.correlation_id();
    let acks = read(topic, envelope)?;
    if let Some(undeclared) = acks.iter().find(|ack| !declared.contains(&ack.label)) {
        return Err(label_not_declared(&undeclared.label));
    }
    if let Some(correlation_id) = correlation_id {
        for ack in acks {
            hub.deliver(&correlation_id, ack);
        }
    }
    Ok(())
}

fn read(topic: &Topic, envelope: Envelope) -> Result<Vec<Ack>, DittoError> {
    if !topic.action.is_empty() {
        let status = status_of(envelope.status)?;
        let ack = Ack {
            label: topic.action.clone(),
            status,
            payload: envelope.value,
            headers: envelope.headers,
        };
        return Ok(vec![ack]);
    }
    let Some(Value::Object(by_label)) = envelope.value else {
        return Err(DittoError::json_field_missing(
            "JSON did not include required </value> field: the acknowledgements by label!",
        ));
    };
    by_label
        .into_iter()
        .map(|(label, entry)| {
            let Value::Object(mut entry) = entry else {
                return Err(DittoError::json_field_missing(format!(
                    "The acknowledgement <{label}> is not a JSON object with a status."
                )));
            };
            let status = status_of(entry.get("status").and_then(Value::as_u64))?;
            let headers = match entry.remove("headers") {
                Some(Value::Object(headers)) => headers,
                _ => envelope.headers.clone(),
            };
            Ok(Ack { label, status, payload: entry.remove("payload"), headers })
        })
        .collect()
}

fn status_of(status: Option<impl TryInto<u16>>) -> Result<u16, DittoError> {
    status
        .and_then(|status| status.try_into().ok())
        .filter(|status| (100..600).contains(status))
        .ok_or_else(|| {
            DittoError::json_field_missing("JSON did not include required </status> field!")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acks::EventAcks;
    use std::sync::Arc;
    use std::time::Duration;

    fn message(json: Value) -> (Topic, Envelope) {
        let envelope = Envelope::parse(json.to_string().as_bytes()).unwrap();
        (Topic::parse(&envelope.topic).unwrap(), envelope)
    }

    #[tokio::test]
    async fn one_label_or_several_reach_their_waiter_when_declared() {
        let hub = Arc::new(AckHub::default());
        let labels = vec!["dev:a".to_owned(), "dev:b".to_owned()];
        let waiter =
            hub.expect(&EventAcks { correlation_id: "c1".into(), labels: labels.clone() }).unwrap();
        let (topic, one) = message(serde_json::json!({
            "topic": "org.acme/lamp/things/twin/acks/dev:a", "path": "/", "status": 201,
            "value": {"ok": true}, "headers": {"correlation-id": "c1"}}));
        assert!(is_ack(&topic));
        deliver(&hub, &topic, one, &labels).unwrap();
        let (topic, several) = message(serde_json::json!({
            "topic": "org.acme/lamp/things/twin/acks", "path": "/", "status": 200,
            "value": {"dev:b": {"status": 503, "payload": "later"}},
            "headers": {"correlation-id": "c1"}}));
        deliver(&hub, &topic, several, &labels).unwrap();
        let got = waiter.collect(Duration::from_secs(5)).await;
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].label.as_str(), got[0].status), ("dev:a", 201));
        assert_eq!(got[0].payload, Some(serde_json::json!({"ok": true})));
        assert_eq!((got[1].label.as_str(), got[1].status), ("dev:b", 503));
        assert_eq!(got[1].headers["correlation-id"], "c1");
    }

    #[test]
    fn an_undeclared_label_or_a_missing_status_is_refused() {
        let hub = AckHub::default();
        let declared = vec!["dev:a".to_owned()];
        let (topic, envelope) = message(serde_json::json!({
            "topic": "org.acme/lamp/things/twin/acks", "path": "/",
            "value": {"dev:a": {"status": 200}, "dev:x": {"status": 200}},
            "headers": {"correlation-id": "c1"}}));
        let error = deliver(&hub, &topic, envelope, &declared).unwrap_err();
        assert_eq!((error.status, error.error), (400, "acknowledgement:label.not.declared"));
        let (topic, envelope) = message(serde_json::json!({
            "topic": "org.acme/lamp/things/twin/acks/dev:a", "path": "/",
            "headers": {"correlation-id": "c1"}}));
        let error = deliver(&hub, &topic, envelope, &declared).unwrap_err();
        assert_eq!(error.error, "json.field.missing");
    }
}
