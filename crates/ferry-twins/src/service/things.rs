//! Things as the service holds them: loaded through the cache, and shown
//! to a caller as the policy lets them see it. What every thing operation
//! and search result goes through.

use super::{store_failure, Caller, Twins};
use crate::error::DittoError;
use crate::fields::FieldSelector;
use crate::id::ThingId;
use crate::policy::{Enforcer, Timestamp};
use crate::thing::{Thing, ThingResource};
use serde_json::Value;
use std::sync::Arc;

/// The fields of a thing a caller gets even where the policy hides the
/// rest of it, as Ditto's `THING_QUERY_COMMAND_RESPONSE_ALLOWLIST`: the id
/// and the housekeeping, which carry no user data and which a reader needs
/// to make sense of an answer.
const ALWAYS_SHOWN: [&str; 5] = ["thingId", "_namespace", "_revision", "_modified", "_created"];

impl Twins {
    /// The thing `id`, from the cache or the store.
    pub async fn thing(&self, id: &ThingId) -> Result<Option<Arc<Thing>>, DittoError> {
        if let Some(cached) = self.things.get(id.as_str()) {
            return Ok(Some(cached));
        }
        let read = self.store.thing(id.as_str()).await;
        let Some(record) =
            read.map_err(|error| store_failure(error, DittoError::thing_unavailable(id)))?
        else {
            return Ok(None);
        };
        let thing = Arc::new(Thing::from_stored(&record.doc)?);
        self.things.insert(id.as_str().to_owned(), thing.clone());
        Ok(Some(thing))
    }

    /// The compiled policy a thing names, if it names one that exists.
    pub async fn enforcer_of(&self, thing: &Thing) -> Result<Option<Arc<Enforcer>>, DittoError> {
        let Some(policy_id) = thing.policy_id() else { return Ok(None) };
        Ok(self.policy(policy_id.as_str()).await?.map(|cached| cached.enforcer.clone()))
    }
}

/// What `caller` may see of `resource` of `thing` under `enforcer`, with
/// `fields=` applied first (as Ditto filters the response it built), or
/// `None` when it may see nothing there (the API's 404).
pub fn view(
    enforcer: &Enforcer,
    caller: &Caller,
    thing: &Thing,
    resource: &ThingResource,
    fields: Option<&FieldSelector>,
    now: Timestamp,
) -> Result<Option<Value>, DittoError> {
    let who = enforcer.caller(&caller.subjects, now);
    let pointer = resource.pointer();
    if !who.has_permission_on_any_level_below("thing", &pointer, crate::policy::Permission::Read) {
        return Ok(None);
    }
    let value = thing.retrieve(resource, fields)?;
    let Some(shown) = who.view("thing", &pointer, &value) else { return Ok(None) };
    match (resource, shown, &value) {
        (ThingResource::Thing, Value::Object(mut shown), Value::Object(whole)) => {
            // In the thing's own order, the always-shown fields included.
            let mut ordered = serde_json::Map::new();
            for (key, field) in whole {
                if ALWAYS_SHOWN.contains(&key.as_str()) {
                    ordered.insert(key.clone(), field.clone());
                } else if let Some(kept) = shown.remove(key) {
                    ordered.insert(key.clone(), kept);
                }
            }
            Ok(Some(Value::Object(ordered)))
        }
        (_, shown, _) => Ok(Some(shown)),
    }
}
