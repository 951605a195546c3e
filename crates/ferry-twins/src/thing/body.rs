//! The body of a PUT or POST of a whole thing (`ThingsRoute`,
//! `ThingJsonObjectCreator`): the id rules of each method, and the policy
//! fields Ditto takes out of the body before it builds the thing.

use super::shape;
use crate::error::DittoError;
use crate::id::{PolicyId, ThingId};
use serde_json::{Map, Value};

/// The body of a PUT or POST of a whole thing, checked, with what Ditto
/// takes out of it before building the thing: an inline `_policy` and a
/// `_copyPolicyFrom`, which the caller turns into a policy. Without
/// either and without a `policyId`, Ditto creates a policy of the thing's
/// id; the caller does that too and says so with [`ThingBody::set_policy_id`].
#[derive(Debug, Clone, PartialEq)]
pub struct ThingBody {
    pub(super) thing_id: ThingId,
    pub(super) document: Map<String, Value>,
    inline_policy: Option<Map<String, Value>>,
    copy_policy_from: Option<String>,
}

impl ThingBody {
    /// `PUT /things/{thingId}`: a `thingId` in the body must equal the
    /// URL's (`ThingJsonObjectCreator.forPut`).
    pub fn for_put(thing_id: &ThingId, body: &Value) -> Result<Self, DittoError> {
        let map = body.as_object().ok_or_else(|| DittoError::json_invalid(body))?;
        if let Some(in_body) = map.get("thingId") {
            if in_body.as_str() != Some(thing_id.as_str()) {
                return Err(DittoError::thing_id_not_settable_on_put_or_patch());
            }
        }
        ThingBody::build(thing_id.clone(), map)
    }

    /// `POST /things[?namespace=…]`: the body may not hold a `thingId`; the
    /// id is generated in `namespace`, or in the default (empty) one.
    pub fn for_post(namespace: Option<&str>, body: &Value) -> Result<Self, DittoError> {
        let map = body.as_object().ok_or_else(|| DittoError::json_invalid(body))?;
        if map.contains_key("thingId") {
            return Err(DittoError::thing_id_not_settable_on_post());
        }
        ThingBody::build(ThingId::generate(namespace)?, map)
    }

    fn build(thing_id: ThingId, map: &Map<String, Value>) -> Result<Self, DittoError> {
        let inline_policy = match map.get("_policy") {
            None => None,
            Some(Value::Object(policy)) => Some(policy.clone()),
            Some(other) => return Err(DittoError::json_invalid(other)),
        };
        let copy_policy_from = match map.get("_copyPolicyFrom") {
            None | Some(Value::Null) => None,
            Some(Value::String(from)) => Some(from.clone()),
            Some(other) => {
                return Err(DittoError::json_parse(format!(
                    "Value <{other}> for </_copyPolicyFrom> is not of type <String>!"
                )))
            }
        };
        if inline_policy.is_some() && copy_policy_from.is_some() {
            return Err(DittoError::policies_conflicting(&thing_id));
        }
        let document = shape::thing_document(map, &thing_id)?;
        Ok(ThingBody { thing_id, document, inline_policy, copy_policy_from })
    }

    pub fn thing_id(&self) -> &ThingId {
        &self.thing_id
    }

    /// The `policyId` of the body, if it named one.
    pub fn policy_id(&self) -> Option<PolicyId> {
        self.document
            .get("policyId")
            .and_then(Value::as_str)
            .and_then(|id| PolicyId::parse(id).ok())
    }

    pub fn set_policy_id(&mut self, policy_id: &PolicyId) {
        let mut document = Map::with_capacity(self.document.len() + 1);
        for (key, value) in std::mem::take(&mut self.document) {
            document.insert(key.clone(), value);
            if key == "thingId" {
                document.insert("policyId".into(), Value::String(policy_id.to_string()));
            }
        }
        self.document = document;
    }

    pub fn inline_policy(&self) -> Option<&Map<String, Value>> {
        self.inline_policy.as_ref()
    }

    pub fn copy_policy_from(&self) -> Option<&str> {
        self.copy_policy_from.as_deref()
    }

    /// The document the thing will be created with.
    pub fn document(&self) -> &Map<String, Value> {
        &self.document
    }
}
