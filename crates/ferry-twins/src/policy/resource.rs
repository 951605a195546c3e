//! Resources: what an entry grants or revokes, keyed `type:/path`
//! (`thing:/features/lamp`, `policy:/`, `message:/inbox`).

use super::errors::wrong_type;
use super::label::control_character_reason;
use crate::error::DittoError;
use crate::pointer::JsonPointer;
use serde_json::{Map, Value};
use std::fmt;

/// The permissions the enforcer answers for. Ditto stores any string in
/// `grant`/`revoke`, and so does [`Resource`]; only these three are ever
/// asked for, so only these are compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    Read,
    Write,
    Execute,
}

impl Permission {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "READ" => Some(Permission::Read),
            "WRITE" => Some(Permission::Write),
            "EXECUTE" => Some(Permission::Execute),
            _ => None,
        }
    }

    pub(crate) fn bit(self) -> u8 {
        match self {
            Permission::Read => 1,
            Permission::Write => 2,
            Permission::Execute => 4,
        }
    }
}

/// A string set as Java's `HashSet` keeps it: Ditto prints `grant` and
/// `revoke` in bucket order (`["READ","EXECUTE","WRITE"]`), and clients
/// that compare policies as text see that order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permissions(Vec<String>);

impl Permissions {
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut unique: Vec<String> = Vec::new();
        for name in names {
            let name = name.into();
            if !unique.contains(&name) {
                unique.push(name);
            }
        }
        // Java's HashSet: capacity the next power of two of size/0.75+1
        // (at least 16), bucket (h ^ h>>>16) & (capacity-1), and within a
        // bucket the order of insertion.
        let wanted = unique.len() * 4 / 3 + 1;
        let capacity = wanted.max(16).next_power_of_two();
        unique.sort_by_key(|name| java_spread_hash(name) as usize & (capacity - 1));
        Permissions(unique)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|n| n == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The known permissions as the enforcer's bit set.
    pub(crate) fn bits(&self) -> u8 {
        self.iter().filter_map(Permission::parse).fold(0, |bits, p| bits | p.bit())
    }

    fn to_json(&self) -> Value {
        Value::Array(self.0.iter().cloned().map(Value::String).collect())
    }
}

fn java_spread_hash(text: &str) -> u32 {
    let hash =
        text.encode_utf16().fold(0u32, |h, unit| h.wrapping_mul(31).wrapping_add(u32::from(unit)));
    hash ^ (hash >> 16)
}

/// `type:path`. Ditto accepts any type here (`thing`, `policy` and
/// `message` are the ones its services ask about), so Ferry does too.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceKey {
    resource_type: String,
    path: JsonPointer,
}

impl ResourceKey {
    pub fn new(resource_type: impl Into<String>, path: JsonPointer) -> Self {
        ResourceKey { resource_type: resource_type.into(), path }
    }

    /// Ditto's `ResourceKey.newInstance("thing:/a/b")`: no control
    /// characters, split at the first colon, the rest a JSON pointer (so
    /// `thing:a/b/` and `thing:/a/b` are the same key).
    pub fn parse(text: &str) -> Result<Self, DittoError> {
        if let Some(reason) = control_character_reason(text, true) {
            return Err(DittoError::policy_entry_invalid(
                format!("The Policy Resource {text} is invalid"),
                reason,
            ));
        }
        match text.split_once(':') {
            Some((resource_type, path)) if !resource_type.is_empty() => {
                Ok(ResourceKey::new(resource_type, JsonPointer::parse(path)?))
            }
            _ => Err(DittoError::json_parse(
                "The provided string was not in the expected format 'type:path'",
            )),
        }
    }

    /// The key in `…/resources/{resourcePath}`: Ditto's gateway takes the
    /// whole unmatched rest of the URL path (`/thing:/a/b`) and cuts one
    /// leading slash.
    pub fn from_url_path(rest: &str) -> Result<Self, DittoError> {
        ResourceKey::parse(rest.strip_prefix('/').unwrap_or(rest))
    }

    pub fn resource_type(&self) -> &str {
        &self.resource_type
    }

    pub fn path(&self) -> &JsonPointer {
        &self.path
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.resource_type, self.path)
    }
}

/// One resource of an entry with what it grants and revokes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub key: ResourceKey,
    pub grant: Permissions,
    pub revoke: Permissions,
}

impl Resource {
    /// Ditto's `Resource.of(key, json)`: an object with both `grant` and
    /// `revoke` arrays; entries that are not strings are skipped, as
    /// Ditto skips them.
    pub fn from_json(key: ResourceKey, value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(DittoError::json_parse(format!(
                "The JSON object for the 'permissions' (grant/revoke) of the 'resource' '{key}' is missing or not an object."
            )));
        };
        let permissions = |field: &str| -> Result<Permissions, DittoError> {
            match object.get(field) {
                None => Err(DittoError::json_field_missing(format!(
                    "JSON did not include required </{field}> field!"
                ))),
                Some(Value::Array(names)) => {
                    Ok(Permissions::new(names.iter().filter_map(Value::as_str)))
                }
                Some(other) => Err(wrong_type(other, &format!("/{field}"), "JsonArray")),
            }
        };
        Ok(Resource { grant: permissions("grant")?, revoke: permissions("revoke")?, key })
    }

    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("grant".into(), self.grant.to_json());
        object.insert("revoke".into(), self.revoke.to_json());
        Value::Object(object)
    }
}

/// The resources of an entry, in written order (a `LinkedHashMap` in
/// Ditto); keys equal as pointers are one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources(Vec<Resource>);

impl Resources {
    pub fn from_json(value: &Value) -> Result<Self, DittoError> {
        let Some(object) = value.as_object() else {
            return Err(wrong_type(value, "/resources", "JsonObject"));
        };
        let mut resources = Resources::default();
        for (key, resource) in object {
            resources.set(Resource::from_json(ResourceKey::parse(key)?, resource)?);
        }
        Ok(resources)
    }

    pub fn to_json(&self) -> Value {
        Value::Object(self.0.iter().map(|r| (r.key.to_string(), r.to_json())).collect())
    }

    pub fn get(&self, key: &ResourceKey) -> Option<&Resource> {
        self.0.iter().find(|r| &r.key == key)
    }

    /// Inserts or replaces; true when the resource is new.
    pub fn set(&mut self, resource: Resource) -> bool {
        match self.0.iter_mut().find(|r| r.key == resource.key) {
            Some(existing) => {
                *existing = resource;
                false
            }
            None => {
                self.0.push(resource);
                true
            }
        }
    }

    pub fn remove(&mut self, key: &ResourceKey) -> Option<Resource> {
        let at = self.0.iter().position(|r| &r.key == key)?;
        Some(self.0.remove(at))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Resource> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn permissions_print_in_java_hash_set_order() {
        let all = Permissions::new(["WRITE", "EXECUTE", "READ", "READ"]);
        assert_eq!(all.iter().collect::<Vec<_>>(), ["READ", "EXECUTE", "WRITE"]);
        let two = Permissions::new(["WRITE", "READ"]);
        assert_eq!(two.iter().collect::<Vec<_>>(), ["READ", "WRITE"]);
        assert_eq!(all.bits(), 7);
        assert_eq!(Permissions::new(["ADMIN"]).bits(), 0);
    }

    #[test]
    fn resource_keys_follow_dittos_rules() {
        let key = ResourceKey::parse("thing:a/b/").unwrap();
        assert_eq!(key.to_string(), "thing:/a/b");
        assert_eq!(key, ResourceKey::parse("thing:/a/b").unwrap());
        assert_eq!(ResourceKey::parse("policy:/").unwrap().path(), &JsonPointer::root());
        assert_eq!(ResourceKey::parse("custom:/x").unwrap().resource_type(), "custom");
        assert_eq!(ResourceKey::from_url_path("/thing:/a/b").unwrap(), key);
        let cases = [
            ("thing", "json.invalid"),
            (":/a", "json.invalid"),
            ("thing:/a//b", "json.pointer.invalid"),
            ("thing:/\u{1}", "policies:entry.invalid"),
        ];
        for (text, code) in cases {
            assert_eq!(ResourceKey::parse(text).unwrap_err().error, code, "{text}");
        }
    }

    #[test]
    fn resources_need_grant_and_revoke() {
        let key = || ResourceKey::parse("thing:/").unwrap();
        let resource =
            Resource::from_json(key(), &json!({"grant": ["READ", 1], "revoke": []})).unwrap();
        assert_eq!(resource.to_json(), json!({"grant": ["READ"], "revoke": []}));
        let cases = [
            (json!({"grant": []}), "json.field.missing"),
            (json!({"grant": "READ", "revoke": []}), "json.invalid"),
            (json!(["READ"]), "json.invalid"),
        ];
        for (value, code) in cases {
            assert_eq!(Resource::from_json(key(), &value).unwrap_err().error, code, "{value}");
        }
    }
}
