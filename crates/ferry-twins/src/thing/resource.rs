//! The addressable parts of a thing: what `/api/2/things/{thingId}/…` and
//! a Ditto protocol `path` can name.
//!
//! Parsing follows Ditto's gateway routes (`ThingsRoute`, `FeaturesRoute`):
//! a trailing slash is ignored, two slashes in a row are
//! `json.pointer.invalid`, a feature id and every attribute or property key
//! must be a valid key (`json.key.invalid`). A path no route matches is
//! `None`: Ditto answers those from Pekko's default rejection handler, a
//! plain-text 404 ([`UNKNOWN_RESOURCE_BODY`]), not a Ditto error. The
//! message routes (`inbox`, `outbox`) and `migrateDefinition` are not
//! resources of the document and also give `None` here; the HTTP layer
//! routes them before asking.

use crate::error::DittoError;
use crate::id::validate_key;
use crate::pointer::JsonPointer;

/// The body of the plain-text 404 Ditto sends for a path no route matches.
pub const UNKNOWN_RESOURCE_BODY: &str = "The requested resource could not be found.";

/// One addressable resource of a thing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ThingResource {
    Thing,
    PolicyId,
    Definition,
    Attributes,
    /// An attribute at a non-empty path below `attributes`.
    Attribute(JsonPointer),
    Features,
    Feature(String),
    FeatureDefinition(String),
    FeatureProperties(String),
    /// A property at a non-empty path below the feature's `properties`.
    FeatureProperty(String, JsonPointer),
    FeatureDesiredProperties(String),
    /// A desired property at a non-empty path below `desiredProperties`.
    FeatureDesiredProperty(String, JsonPointer),
}

impl ThingResource {
    /// The resource an HTTP sub-path (what follows `/things/{thingId}`,
    /// percent-decoded) names; `""` and `"/"` are the thing itself.
    pub fn parse(path: &str) -> Result<Option<Self>, DittoError> {
        ThingResource::from_pointer(&JsonPointer::parse(path)?)
    }

    /// The resource a pointer into the thing's JSON names.
    pub fn from_pointer(pointer: &JsonPointer) -> Result<Option<Self>, DittoError> {
        let levels = pointer.levels();
        let resource = match levels {
            [] => ThingResource::Thing,
            [one] => match one.as_str() {
                "policyId" => ThingResource::PolicyId,
                "definition" => ThingResource::Definition,
                "attributes" => ThingResource::Attributes,
                "features" => ThingResource::Features,
                _ => return Ok(None),
            },
            [attributes, ..] if attributes == "attributes" => {
                let path = pointer.skip(1);
                validate_keys_of(&path)?;
                ThingResource::Attribute(path)
            }
            [features, id, rest @ ..] if features == "features" => {
                validate_key(id)?;
                let id = id.clone();
                match rest {
                    [] => ThingResource::Feature(id),
                    [one] => match one.as_str() {
                        "definition" => ThingResource::FeatureDefinition(id),
                        "properties" => ThingResource::FeatureProperties(id),
                        "desiredProperties" => ThingResource::FeatureDesiredProperties(id),
                        _ => return Ok(None),
                    },
                    [kind, ..] if kind == "properties" || kind == "desiredProperties" => {
                        let path = pointer.skip(3);
                        validate_keys_of(&path)?;
                        if kind == "properties" {
                            ThingResource::FeatureProperty(id, path)
                        } else {
                            ThingResource::FeatureDesiredProperty(id, path)
                        }
                    }
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(resource))
    }

    /// Where the resource lies inside the thing's JSON, the path a policy
    /// grants or revokes (`thing:/features/lamp/properties/on`).
    pub fn pointer(&self) -> JsonPointer {
        let feature = |id: &str| JsonPointer::from_levels(["features", id]);
        match self {
            ThingResource::Thing => JsonPointer::root(),
            ThingResource::PolicyId => JsonPointer::from_levels(["policyId"]),
            ThingResource::Definition => JsonPointer::from_levels(["definition"]),
            ThingResource::Attributes => JsonPointer::from_levels(["attributes"]),
            ThingResource::Attribute(path) => JsonPointer::from_levels(["attributes"]).join(path),
            ThingResource::Features => JsonPointer::from_levels(["features"]),
            ThingResource::Feature(id) => feature(id),
            ThingResource::FeatureDefinition(id) => feature(id).child("definition"),
            ThingResource::FeatureProperties(id) => feature(id).child("properties"),
            ThingResource::FeatureProperty(id, path) => feature(id).child("properties").join(path),
            ThingResource::FeatureDesiredProperties(id) => feature(id).child("desiredProperties"),
            ThingResource::FeatureDesiredProperty(id, path) => {
                feature(id).child("desiredProperties").join(path)
            }
        }
    }
}

fn validate_keys_of(pointer: &JsonPointer) -> Result<(), DittoError> {
    pointer.levels().iter().try_for_each(|key| validate_key(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(path: &str) -> ThingResource {
        ThingResource::parse(path).unwrap().unwrap_or_else(|| panic!("{path} is a resource"))
    }

    #[test]
    fn every_resource_parses_and_maps_back_to_its_pointer() {
        let cases = [
            ("", ThingResource::Thing, "/"),
            ("/", ThingResource::Thing, "/"),
            ("/policyId", ThingResource::PolicyId, "/policyId"),
            ("/definition", ThingResource::Definition, "/definition"),
            ("/attributes", ThingResource::Attributes, "/attributes"),
            ("/attributes/", ThingResource::Attributes, "/attributes"),
            (
                "/attributes/location/floor",
                ThingResource::Attribute(JsonPointer::parse("location/floor").unwrap()),
                "/attributes/location/floor",
            ),
            ("/features", ThingResource::Features, "/features"),
            ("/features/lamp", ThingResource::Feature("lamp".into()), "/features/lamp"),
            (
                "/features/lamp/definition",
                ThingResource::FeatureDefinition("lamp".into()),
                "/features/lamp/definition",
            ),
            (
                "/features/lamp/properties",
                ThingResource::FeatureProperties("lamp".into()),
                "/features/lamp/properties",
            ),
            (
                "/features/lamp/properties/color/r/",
                ThingResource::FeatureProperty(
                    "lamp".into(),
                    JsonPointer::parse("color/r").unwrap(),
                ),
                "/features/lamp/properties/color/r",
            ),
            (
                "/features/lamp/desiredProperties",
                ThingResource::FeatureDesiredProperties("lamp".into()),
                "/features/lamp/desiredProperties",
            ),
            (
                "/features/lamp/desiredProperties/on",
                ThingResource::FeatureDesiredProperty(
                    "lamp".into(),
                    JsonPointer::parse("on").unwrap(),
                ),
                "/features/lamp/desiredProperties/on",
            ),
        ];
        for (path, resource, pointer) in cases {
            assert_eq!(parsed(path), resource, "{path}");
            assert_eq!(resource.pointer().to_string(), pointer, "{path}");
            assert_eq!(ThingResource::from_pointer(&resource.pointer()).unwrap(), Some(resource));
        }
    }

    #[test]
    fn unknown_paths_are_not_resources() {
        for path in [
            "/thingId",
            "/foo",
            "/policyId/x",
            "/definition/x",
            "/features/lamp/foo",
            "/features/lamp/definition/x",
            "/inbox/messages/hello",
            "/features/lamp/outbox/messages/x",
        ] {
            assert_eq!(ThingResource::parse(path).unwrap(), None, "{path}");
        }
    }

    #[test]
    fn bad_keys_and_pointers_are_refused() {
        assert_eq!(
            ThingResource::parse("/attributes//a").unwrap_err().error,
            "json.pointer.invalid"
        );
        assert_eq!(
            ThingResource::parse("/features/l\u{1}amp").unwrap_err().error,
            "json.key.invalid"
        );
        assert_eq!(
            ThingResource::parse("/features/lamp/properties/ä").unwrap_err().error,
            "json.key.invalid"
        );
        assert_eq!(
            ThingResource::parse("/attributes/a\u{7f}").unwrap_err().error,
            "json.key.invalid"
        );
    }
}
