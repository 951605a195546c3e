//! AWS IoT Device Shadows over Ferry's twins: the `$aws/things/…/shadow`
//! topics, so that device code written against AWS IoT's SDKs works
//! unchanged, on the same state the Ditto API serves. One state, two
//! views: a shadow *is* a feature of a thing.
//!
//! **The mapping** (docs/twins.md, "Device shadows"):
//! - the thing name in `$aws/things/{thingName}` is the thing
//!   `{namespace}:{thingName}` (`[twins] shadow_namespace`), or the thing
//!   id itself when the name holds a `:` (AWS allows `:` in thing names);
//! - the classic (unnamed) shadow is one feature, `[twins]
//!   shadow_feature` (`shadow`); the named shadow `{name}` is the feature
//!   `{name}`. Reported is the feature's `properties`, desired its
//!   `desiredProperties`: Ditto's own split of the same idea, so a Ditto
//!   client that writes `desiredProperties` is an AWS app updating
//!   `desired`, and the other way round;
//! - `version` is the thing's revision, the number Ditto's `If-Match:
//!   "rev:N"` compares, so an AWS version check and a Ditto precondition
//!   are one check. It grows with every update of the shadow, as AWS
//!   requires, but also with changes to the thing's other parts;
//! - per-leaf `metadata` timestamps are the thing's `_metadata` leaves
//!   (`thing/metadata.rs`) in epoch seconds.
//!
//! - `topic.rs`: the topics, and thing names to thing ids and back.
//! - `document.rs`: the documents, the delta, the limits and the errors,
//!   as pure functions.
//! - `topics.rs`: the handler `mqtt.rs` hands `$aws/things/…` publishes to,
//!   and the `/update/delta` publisher fed by every committed change.
//! - `implicit.rs`: a thing made from a template the first time an
//!   unknown device writes to it.

pub mod document;
mod implicit;
mod topic;
mod topics;

pub use document::{delta, feature_delta};
pub(crate) use implicit::prepare_for_command;
pub use implicit::Template;
pub use topic::{Op, ShadowTopic, AWS_THINGS};
pub(crate) use topics::Shadows;

/// How shadows map onto things (`[twins] shadow_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowSettings {
    /// The namespace of a thing named without one.
    pub namespace: String,
    /// The feature that is a thing's classic shadow.
    pub classic_feature: String,
}

impl Default for ShadowSettings {
    fn default() -> Self {
        ShadowSettings { namespace: "devices".into(), classic_feature: "shadow".into() }
    }
}

impl crate::service::Twins {
    /// `GET /api/2/things/{thingId}/features/{featureId}/delta`: the
    /// desired properties that differ from the reported ones, of what the
    /// caller may read of the feature (`{}` when they agree). Read from
    /// the caller's view, so a reader who may not see the reported side
    /// learns nothing of it: to them every desired leaf differs.
    pub async fn retrieve_delta(
        &self,
        caller: &crate::service::Caller,
        thing_id: &crate::ThingId,
        feature_id: &str,
    ) -> Result<serde_json::Value, crate::service::Refused> {
        let resource = crate::thing::ThingResource::Feature(feature_id.to_owned());
        let conditions = crate::service::Conditions::default();
        let feature = self.retrieve_thing(caller, thing_id, &resource, None, &conditions).await?;
        Ok(feature_delta(&feature.value).unwrap_or_else(|| serde_json::json!({})))
    }
}

/// The feature a thing sub-path `features/{featureId}/delta` names, for
/// the HTTP route `ThingResource::parse` knows nothing of.
pub fn delta_path(rest: &str) -> Result<Option<String>, crate::DittoError> {
    let pointer = crate::JsonPointer::parse(rest)?;
    match pointer.levels() {
        [features, feature_id, delta] if features == "features" && delta == "delta" => {
            crate::id::validate_key(feature_id)?;
            Ok(Some(feature_id.clone()))
        }
        _ => Ok(None),
    }
}
