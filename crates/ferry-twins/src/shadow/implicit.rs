//! Implicit thing creation: the first time a device writes to a thing
//! that does not exist (a shadow update, or a Ditto protocol command over
//! MQTT from a device held to its own thing), the thing is made from a
//! configured template, as the device, so it gets Ditto's default policy
//! for its creator: READ and WRITE on the thing, its policy and its
//! messages for the device's subject, and nobody else. A template that
//! names a `policyId` or carries a `_policy` uses that instead, under the
//! same rules as a `PUT /things/{id}` with that body.
//!
//! The creation is a PUT with `If-None-Match: *`, so two first writes
//! racing make one thing, and the loser goes on with the thing the other
//! made.

use crate::error::DittoError;
use crate::id::ThingId;
use crate::merge::merge_patch;
use crate::protocol::{Channel, Criterion, Envelope, Group, Topic};
use crate::service::{Caller, Conditions, Refused, TagMatch, ThingWrite, Twins};
use crate::thing::{ThingBody, ThingResource};
use serde_json::{Map, Value};

/// The document every implicitly created thing starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    document: Map<String, Value>,
}

impl Template {
    /// A template from its JSON: a thing body as `PUT /things/{id}` takes
    /// it, without `thingId`, which each thing gets from its name.
    pub fn parse(value: Value) -> Result<Template, DittoError> {
        let Value::Object(document) = value else {
            return Err(DittoError::json_invalid("a thing template must be a JSON object"));
        };
        if document.contains_key("thingId") {
            return Err(DittoError::json_invalid(
                "a thing template names no thingId: each thing gets its own",
            ));
        }
        let probe = ThingId::parse("template:probe")?;
        ThingBody::for_put(&probe, &Value::Object(document.clone()))?;
        Ok(Template { document })
    }

    /// The template's feature `feature_id`, if it has one.
    pub(crate) fn feature(&self, feature_id: &str) -> Option<&Value> {
        self.document.get("features")?.get(feature_id)
    }

    /// The template with `patch` merged into the feature `feature_id`.
    fn with_feature(&self, feature: Option<(&str, &Value)>) -> Result<Value, DittoError> {
        let mut body = Value::Object(self.document.clone());
        if let Some((feature_id, patch)) = feature {
            let mut wrapped = Map::new();
            wrapped.insert(feature_id.to_owned(), patch.clone());
            let mut features = Map::new();
            features.insert("features".into(), Value::Object(wrapped));
            merge_patch(&mut body, &Value::Object(features))?;
        }
        Ok(body)
    }
}

/// Makes `thing_id` from `template` as `caller`, with `feature`'s merge
/// patch applied to that feature. `Ok(false)` when the thing exists
/// already (another first write won).
pub(crate) async fn create(
    twins: &Twins,
    caller: &Caller,
    thing_id: &ThingId,
    template: &Template,
    feature: Option<(&str, &Value)>,
) -> Result<bool, Refused> {
    let body = template.with_feature(feature)?;
    let conditions = Conditions { if_none_match: Some(TagMatch::parse("*")), ..Default::default() };
    let write = ThingWrite::Put(&body);
    match twins.write_thing(caller, thing_id, &ThingResource::Thing, write, &conditions).await {
        Ok(_) => {
            tracing::info!(%thing_id, subjects = ?caller.subjects, "thing created implicitly from the template");
            Ok(true)
        }
        Err(refused) if refused.error.status == 412 => Ok(false),
        Err(refused) => Err(refused),
    }
}

/// Before a device's Ditto protocol command: makes the thing it names
/// from the template when it does not exist, so the command finds it. Not
/// for `create` (which makes the thing itself) nor `delete`. A creation
/// refused leaves the command to answer as it would have (a 404).
pub(crate) async fn prepare_for_command(
    twins: &Twins,
    caller: &Caller,
    envelope: &Envelope,
    template: &Template,
) {
    let Ok(topic) = Topic::parse(&envelope.topic) else { return };
    let twin_command = topic.group == Group::Things
        && topic.channel == Channel::Twin
        && topic.criterion == Criterion::Commands;
    if !twin_command || matches!(topic.action.as_str(), "create" | "delete") {
        return;
    }
    let Some(thing_id) = topic.entity_id().and_then(|id| ThingId::parse(&id).ok()) else {
        return;
    };
    if !matches!(twins.thing(&thing_id).await, Ok(None)) {
        return;
    }
    if let Err(refused) = create(twins, caller, &thing_id, template, None).await {
        tracing::debug!(%thing_id, error = %refused.error, "no implicit creation for a Ditto protocol command");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_is_a_thing_body_without_an_id() {
        assert!(Template::parse(json!({"attributes": {"model": "x"}})).is_ok());
        assert!(Template::parse(json!({})).is_ok());
        assert!(Template::parse(json!([])).is_err());
        assert!(Template::parse(json!({"thingId": "a:b"})).is_err());
        assert!(Template::parse(json!({"features": {"bad/id": {}}})).is_err());
    }

    #[test]
    fn the_first_update_lands_in_the_templates_feature() {
        let template = Template::parse(json!({"attributes": {"model": "x"},
            "features": {"shadow": {"properties": {"fw": "1.0", "gone": 1}}}}))
        .unwrap();
        let patch =
            json!({"properties": {"gone": null, "t": 20}, "desiredProperties": {"on": true}});
        assert_eq!(
            template.with_feature(Some(("shadow", &patch))).unwrap(),
            json!({"attributes": {"model": "x"}, "features": {"shadow": {
                "properties": {"fw": "1.0", "t": 20}, "desiredProperties": {"on": true}}}})
        );
        assert_eq!(template.with_feature(None).unwrap(), Value::Object(template.document.clone()));
    }
}
