//! The errors of things, one constructor per Ditto exception, with its
//! `ERROR_CODE`, HTTP status, message (Ditto's `MessageFormat` template
//! filled in the same way) and default description.

use crate::error::DittoError;
use crate::id::ThingId;
use crate::pointer::JsonPointer;

const CHECK_THING: &str =
    "Check if the ID of your requested Thing was correct and you have sufficient permissions.";
const CHECK_THING_AND_FEATURE: &str =
    "Check if the ID of the Thing and the Feature ID was correct and you have sufficient permissions.";

impl DittoError {
    /// `ThingUnavailableException`: the store failed.
    pub fn thing_unavailable(thing_id: &ThingId) -> Self {
        DittoError::new(
            503,
            "things:thing.unavailable",
            format!("The Thing with ID '{thing_id}' is not available, please try again later."),
            "The requested Thing is temporarily not available, please retry the performed action in \
             order to improve resiliency."
                .to_string(),
        )
    }

    /// Ditto's `ThingNotAccessibleException` (`things:thing.notfound`, 404).
    pub fn thing_not_found(thing_id: &ThingId) -> Self {
        DittoError::new(
            404,
            "things:thing.notfound",
            format!(
                "The Thing with ID '{thing_id}' could not be found or requester had insufficient permissions to access it."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's `ThingConflictException` (`things:thing.conflict`, 409).
    pub fn thing_conflict(thing_id: &ThingId) -> Self {
        DittoError::new(
            409,
            "things:thing.conflict",
            format!("The Thing with ID '{thing_id}' already exists"),
            "Choose another Thing ID".to_string(),
        )
    }

    /// Ditto's `PolicyIdNotAccessibleException` (`things:policyId.notfound`,
    /// 404).
    pub fn policy_id_not_found(thing_id: &ThingId) -> Self {
        DittoError::new(
            404,
            "things:policyId.notfound",
            format!(
                "The Policy ID of the Thing with ID <{thing_id}> could not be found or requester had insufficient permissions to access it."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's `PolicyIdNotDeletableException` (`things:policyId.notdeletable`,
    /// 400).
    pub fn policy_id_not_deletable() -> Self {
        DittoError::new(
            400,
            "things:policyId.notdeletable",
            "The Policy ID of a Thing cannot be deleted.",
            "Remove Policy ID entry from the request body and retry the request.".to_string(),
        )
    }

    /// Ditto's `ThingIdNotDeletableException` (`things:id.notdeletable`, 400).
    pub fn thing_id_not_deletable() -> Self {
        DittoError::new(
            400,
            "things:id.notdeletable",
            "The Thing ID of a Thing cannot be deleted.",
            "Remove the Thing ID entry from the request body and retry the request.".to_string(),
        )
    }

    /// Ditto's `ThingIdNotExplicitlySettableException` (`things:id.notsettable`,
    /// 400) as `forPostMethod` builds it: POST generates the id itself.
    pub fn thing_id_not_settable_on_post() -> Self {
        DittoError::new(
            400,
            "things:id.notsettable",
            "It is not allowed to provide a Thing ID in the request body for method POST. The method POST will generate the Thing ID by itself.",
            "To provide your own Thing ID use a PUT request instead.".to_string(),
        )
    }

    /// Ditto's `ThingIdNotExplicitlySettableException` as `forPutOrPatchMethod`
    /// builds it: the body's `thingId` differs from the URL's.
    pub fn thing_id_not_settable_on_put_or_patch() -> Self {
        DittoError::new(
            400,
            "things:id.notsettable",
            "The Thing ID in the request body is not equal to the Thing ID in the request URL.",
            "Either delete the Thing ID from the request body or use the same Thing ID as in the request URL."
                .to_string(),
        )
    }

    /// Ditto's `PoliciesConflictingException` (`things:policy.conflicting`,
    /// 400): both `_policy` and `_copyPolicyFrom` in one body.
    pub fn policies_conflicting(thing_id: &ThingId) -> Self {
        DittoError::new(
            400,
            "things:policy.conflicting",
            format!(
                "The Thing with ID '{thing_id}' could not be created as it contained an inline Policy as well as a policyID to copy."
            ),
            "Please either define an inline Policy or define a policy to copy, but not both.".to_string(),
        )
    }

    /// Ditto's `ThingDefinitionNotAccessibleException`
    /// (`things:definition.notfound`, 404).
    pub fn thing_definition_not_found(thing_id: &ThingId) -> Self {
        DittoError::new(
            404,
            "things:definition.notfound",
            format!(
                "The Definition of the Thing with ID <{thing_id}> could not be found or the requester had insufficient permissions to access it."
            ),
            "Check if the ID of the thing and the key of your requested definition was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `AttributesNotAccessibleException` (`things:attributes.notfound`,
    /// 404).
    pub fn attributes_not_found(thing_id: &ThingId) -> Self {
        DittoError::new(
            404,
            "things:attributes.notfound",
            format!(
                "The Attributes of the Thing with ID '{thing_id}' could not be found or the requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Thing was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// Ditto's `AttributeNotAccessibleException` (`things:attribute.notfound`,
    /// 404).
    pub fn attribute_not_found(thing_id: &ThingId, pointer: &JsonPointer) -> Self {
        DittoError::new(
            404,
            "things:attribute.notfound",
            format!(
                "The attribute with key '{pointer}' on the thing with ID '{thing_id}' could not be found or the requester had insufficient permissions to access it."
            ),
            "Check if the ID of the thing and the key of your requested attribute was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `FeaturesNotAccessibleException` (`things:features.notfound`,
    /// 404).
    pub fn features_not_found(thing_id: &ThingId) -> Self {
        DittoError::new(
            404,
            "things:features.notfound",
            format!(
                "The Features on the Thing with ID '{thing_id}' do not exist or the requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Thing was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// Ditto's `FeatureNotAccessibleException` (`things:feature.notfound`,
    /// 404).
    pub fn feature_not_found(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            404,
            "things:feature.notfound",
            format!(
                "The Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' could not be found or the requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Thing and the ID of your requested Feature was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `FeatureDefinitionNotAccessibleException`
    /// (`things:feature.definition.notfound`, 404).
    pub fn feature_definition_not_found(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            404,
            "things:feature.definition.notfound",
            format!(
                "The Definition of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' does not exist or the requester had insufficient permissions to access it."
            ),
            CHECK_THING_AND_FEATURE.to_string(),
        )
    }

    /// Ditto's `FeaturePropertiesNotAccessibleException`
    /// (`things:feature.properties.notfound`, 404).
    pub fn feature_properties_not_found(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            404,
            "things:feature.properties.notfound",
            format!(
                "The Properties of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' do not exist or the requester had insufficient permissions to access it."
            ),
            CHECK_THING_AND_FEATURE.to_string(),
        )
    }

    /// Ditto's `FeaturePropertyNotAccessibleException`
    /// (`things:feature.property.notfound`, 404).
    pub fn feature_property_not_found(
        thing_id: &ThingId,
        feature_id: &str,
        pointer: &JsonPointer,
    ) -> Self {
        DittoError::new(
            404,
            "things:feature.property.notfound",
            format!(
                "The Property with JSON Pointer '{pointer}' of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' does not exist or the requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Thing, the Feature ID and the key of your requested property was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `FeatureDesiredPropertiesNotAccessibleException`
    /// (`things:feature.desiredProperties.notfound`, 404).
    pub fn feature_desired_properties_not_found(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            404,
            "things:feature.desiredProperties.notfound",
            format!(
                "The desired properties of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' do not exist or the requester had insufficient permissions to access it."
            ),
            CHECK_THING_AND_FEATURE.to_string(),
        )
    }

    /// Ditto's `FeatureDesiredPropertyNotAccessibleException`
    /// (`things:feature.desiredProperty.notfound`, 404).
    pub fn feature_desired_property_not_found(
        thing_id: &ThingId,
        feature_id: &str,
        pointer: &JsonPointer,
    ) -> Self {
        DittoError::new(
            404,
            "things:feature.desiredProperty.notfound",
            format!(
                "The desired property with JSON Pointer '{pointer}' of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' does not exist or the requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Thing, the Feature ID and the key of your requested desired property was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `DefinitionIdentifierInvalidException`
    /// (`things:definition.identifier.invalid`, 400).
    pub fn definition_identifier_invalid(identifier: &str) -> Self {
        DittoError::new(
            400,
            "things:definition.identifier.invalid",
            format!("Definition identifier <{identifier}> is invalid!"),
            "An identifier string is expected to have the structure 'namespace:name:version' where each segment must contain at least one char of [_a-zA-Z0-9\\-.] OR it must be a valid HTTP(s) URL."
                .to_string(),
        )
    }

    /// Ditto's `DefinitionIdentifierInvalidException` for an identifier that
    /// is not a JSON string, with the description
    /// `ImmutableFeatureDefinition.fromJson` gives it.
    pub fn definition_identifier_not_a_string(json: &str) -> Self {
        DittoError::definition_identifier_invalid(json).with_description(
            "The provided identifier is not a JSON string, please adjust it accordingly.",
        )
    }

    /// Ditto's `FeatureDefinitionEmptyException`
    /// (`things:feature.definition.empty`, 400).
    pub fn feature_definition_empty() -> Self {
        DittoError::new(
            400,
            "things:feature.definition.empty",
            "Feature Definition must not be empty!",
            "A Feature Definition must contain at least one element. It can however also be set to null or deleted completely."
                .to_string(),
        )
    }

    /// Ditto's `ThingTooLargeException` (`things:thing.toolarge`, 413). The
    /// sizes are bytes; Ditto prints them as kB (÷ 1024) through Java's
    /// default number format: grouping commas, at most three decimals,
    /// rounded half to even.
    pub fn thing_too_large(actual_bytes: u64, max_bytes: u64) -> Self {
        DittoError::new(
            413,
            "things:thing.toolarge",
            format!(
                "The size of '{}' kB exceeds the maximal allowed Thing size of '{}' kB.",
                java_kilobytes(actual_bytes),
                java_kilobytes(max_bytes)
            ),
            "Reduce the Thing size in the bounds of the specified limit".to_string(),
        )
    }

    /// Ditto's `ThingNotModifiableException` (`things:thing.notmodifiable`,
    /// 403): a write (or a create under an existing policy, or a merge)
    /// without WRITE.
    pub fn thing_not_modifiable(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "things:thing.notmodifiable",
            format!(
                "The Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions ('WRITE' is required)."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's `ThingNotDeletableException` (`things:thing.notdeletable`,
    /// 403).
    pub fn thing_not_deletable(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "things:thing.notdeletable",
            format!(
                "The Thing with ID '{thing_id}' could not be deleted as the requester had insufficient permissions ( 'WRITE' on root resource is required)."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's answer to a command on a thing whose policy is gone
    /// (`ThingEnforcerActor.errorForExistingThingWithDeletedPolicy`): the
    /// thing's not-found (a read) or not-modifiable (a write) error with
    /// its own message.
    pub fn thing_policy_deleted(thing_id: &ThingId, policy_id: &str, write: bool) -> Self {
        let base = if write {
            DittoError::thing_not_modifiable(thing_id)
        } else {
            DittoError::thing_not_found(thing_id)
        };
        DittoError {
            message: format!(
                "The Thing with ID '{thing_id}' could not be accessed as its Policy with ID '{policy_id}' is not or no longer existing."
            ),
            description: Some(format!(
                "Recreate/create the Policy with ID '{policy_id}' in order to get access to the Thing again."
            )),
            ..base
        }
    }

    /// Ditto's `PolicyIdNotModifiableException` (403).
    pub fn policy_id_not_modifiable(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "things:policyId.notmodifiable",
            format!(
                "The Policy ID of the Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions ('WRITE' is required)."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's `ThingDefinitionNotModifiableException` (403).
    pub fn thing_definition_not_modifiable(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "things:definition.notmodifiable",
            format!(
                "The Definition on the Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions ('WRITE' is required)."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's `AttributesNotModifiableException` (403).
    pub fn attributes_not_modifiable(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "things:attributes.notmodifiable",
            format!(
                "The Attributes on the Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions ('WRITE' is required)."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's `AttributeNotModifiableException` (403). Ditto fills in the
    /// command's resource path (`/attributes/a/b`), and so do we; its
    /// template starts with a space, kept.
    pub fn attribute_not_modifiable(thing_id: &ThingId, resource_path: &JsonPointer) -> Self {
        DittoError::new(
            403,
            "things:attribute.notmodifiable",
            format!(
                " The Attribute with name '{resource_path}' on the Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions ('WRITE' is required)."
            ),
            CHECK_THING.to_string(),
        )
    }

    /// Ditto's `FeaturesNotModifiableException` (403).
    pub fn features_not_modifiable(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "things:features.notmodifiable",
            format!(
                "The Features on the Thing with ID '{thing_id}' cannot be modified as requester had insufficient permissions to modify it ('WRITE' is required)."
            ),
            "Check if the ID of the Thing was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// Ditto's `FeatureNotModifiableException` (403).
    pub fn feature_not_modifiable(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            403,
            "things:feature.notmodifiable",
            format!(
                "The Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions to modify it ('WRITE' is required)."
            ),
            "Check if the ID of the Thing and the ID of your requested Feature was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `FeatureDefinitionNotModifiableException` (403).
    pub fn feature_definition_not_modifiable(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            403,
            "things:feature.definition.notmodifiable",
            format!(
                "The Definition of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' cannot be modified as the requester had insufficient permissions to modify it ('WRITE' is required)."
            ),
            CHECK_THING_AND_FEATURE.to_string(),
        )
    }

    /// Ditto's `FeaturePropertiesNotModifiableException` (403).
    pub fn feature_properties_not_modifiable(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            403,
            "things:feature.properties.notmodifiable",
            format!(
                "The Properties of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' cannot be modified as the requester had insufficient permissions to modify it ('WRITE' is required)."
            ),
            CHECK_THING_AND_FEATURE.to_string(),
        )
    }

    /// Ditto's `FeaturePropertyNotModifiableException` (403), with the
    /// command's resource path as Ditto fills it in.
    pub fn feature_property_not_modifiable(
        thing_id: &ThingId,
        feature_id: &str,
        resource_path: &JsonPointer,
    ) -> Self {
        DittoError::new(
            403,
            "things:feature.property.notmodifiable",
            format!(
                "The Property with JSON Pointer '{resource_path}' of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions to modify it ('WRITE' is required)."
            ),
            "Check if the ID of the Thing, the Feature ID and the key of your requested property was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `FeatureDesiredPropertiesNotModifiableException` (403).
    pub fn feature_desired_properties_not_modifiable(thing_id: &ThingId, feature_id: &str) -> Self {
        DittoError::new(
            403,
            "things:feature.desiredProperties.notmodifiable",
            format!(
                "The desired properties of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' cannot be modified as the requester had insufficient permissions to modify it ('WRITE' is required)."
            ),
            CHECK_THING_AND_FEATURE.to_string(),
        )
    }

    /// Ditto's `FeatureDesiredPropertyNotModifiableException` (403).
    pub fn feature_desired_property_not_modifiable(
        thing_id: &ThingId,
        feature_id: &str,
        resource_path: &JsonPointer,
    ) -> Self {
        DittoError::new(
            403,
            "things:feature.desiredProperty.notmodifiable",
            format!(
                "The desired property with JSON Pointer '{resource_path}' of the Feature with ID '{feature_id}' on the Thing with ID '{thing_id}' could not be modified as the requester had insufficient permissions to modify it ('WRITE' is required)."
            ),
            "Check if the ID of the Thing, the Feature ID and the key of your requested desired property was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// Ditto's `ThingNotCreatableException.newBuilderForPolicyExisting`
    /// (`things:thing.notcreatable`, 400): the policy a create would make
    /// exists already.
    pub fn thing_not_creatable_policy_existing(thing_id: &ThingId, policy_id: &str) -> Self {
        DittoError::new(
            400,
            "things:thing.notcreatable",
            format!(
                "The Thing with ID '{thing_id}' could not be created because creation of its implicit Policy ID '{policy_id}' failed."
            ),
            "If you want to use an existing Policy, specify it as 'policyId' in the Thing JSON you create."
                .to_string(),
        )
    }

    /// Ditto's `ThingNotCreatableException.newBuilderForOtherReason`: the
    /// policy a create would make was refused by the policies service
    /// (`cause`); the status is the cause's.
    pub fn thing_not_creatable_policy_refused(
        thing_id: &ThingId,
        policy_id: &str,
        cause: &DittoError,
    ) -> Self {
        DittoError::new(
            cause.status,
            "things:thing.notcreatable",
            format!(
                "The Thing with ID '{thing_id}' could not be created as the Policy with ID '{policy_id}' could not be created due to: '{}'",
                cause.message
            ),
            "Either check if the ID of the Policy you created the Thing with is correct and that the Policy is existing or If you want to use the existing Policy, specify it as 'policyId' in the Thing JSON you create."
                .to_string(),
        )
    }

    /// Ditto's `ThingNotCreatableException` for a creator without any
    /// subject, so no default policy can name one.
    pub fn thing_not_creatable_without_subject(thing_id: &ThingId) -> Self {
        DittoError {
            description: None,
            ..DittoError::new(
                400,
                "things:thing.notcreatable",
                format!(
                    "The Thing with ID '{thing_id}' could not be created with implicit Policy because no authorization subject is present."
                ),
                None,
            )
        }
    }

    /// Ditto's `PolicyInvalidException` (`things:policy.invalid`, 400): an
    /// inline `_policy` (or a copy) that is not a valid policy; the cause's
    /// message is the description, as Ditto's `newBuilderForCause` makes it.
    pub fn thing_policy_invalid(thing_id: &ThingId, cause: &DittoError) -> Self {
        DittoError::new(
            400,
            "things:policy.invalid",
            format!("The Policy specified for the Thing with ID '{thing_id}' is invalid."),
            cause.message.clone(),
        )
    }

    /// `PolicyInvalidException.newBuilder(MIN_REQUIRED_POLICY_PERMISSIONS, …)`:
    /// an inline policy in which no subject may WRITE `policy:/`.
    pub fn thing_policy_without_writer(thing_id: &ThingId) -> Self {
        DittoError::new(
            400,
            "things:policy.invalid",
            format!("The Policy specified for the Thing with ID '{thing_id}' is invalid."),
            "It must contain at least one Subject with the following permission(s): '[WRITE]'!"
                .to_string(),
        )
    }

    /// Ditto's `ThingPreconditionFailedException` (`things:precondition.failed`,
    /// 412): `If-Match` or `If-None-Match` did not hold for a write (or
    /// `If-Match` for a read). `actual` is `null` for a resource that does
    /// not exist, as Java's `String.valueOf(null)` prints it.
    pub fn thing_precondition_failed(header: &str, value: &str, actual: Option<&str>) -> Self {
        DittoError::new(
            412,
            "things:precondition.failed",
            format!(
                "The comparison of precondition header '{header}' for the requested Thing resource evaluated to false. Header value: '{value}', actual entity-tag: '{}'.",
                actual.unwrap_or("null")
            ),
            "The comparison of the provided precondition header with the current ETag value of the requested Thing resource evaluated to false. Check the value of your conditional header value."
                .to_string(),
        )
    }

    /// Ditto's `ThingPreconditionNotModifiedException`
    /// (`things:precondition.notmodified`, 304): `If-None-Match` matched on
    /// a read. The HTTP answer is a bare 304.
    pub fn thing_precondition_not_modified(expected: &str, actual: Option<&str>) -> Self {
        DittoError::new(
            304,
            "things:precondition.notmodified",
            format!(
                "The comparison of precondition header 'if-none-match' for the requested Thing resource evaluated to false. Expected: '{expected}' not to match actual: '{}'.",
                actual.unwrap_or("null")
            ),
            "The comparison of the provided precondition header 'if-none-match' with the current ETag value of the requested Thing resource evaluated to false. Check the value of your conditional header value."
                .to_string(),
        )
    }

    /// Ditto's `ThingConditionFailedException` (`things:condition.failed`,
    /// 412): `condition=` was false on the thing.
    pub fn thing_condition_failed() -> Self {
        DittoError::new(
            412,
            "things:condition.failed",
            "The specified condition does not match the state of the requested Thing.",
            "The provided condition did not match the actual Thing state. Please check your provided condition."
                .to_string(),
        )
    }

    /// `ThingConditionFailedException.newBuilderForInsufficientPermission`:
    /// the condition names a field the caller may not read.
    pub fn thing_condition_not_readable() -> Self {
        DittoError::new(
            412,
            "things:condition.failed",
            "The specified resource in the condition could not be found or the requester had insufficient permissions to access it.",
            "Check if you have sufficient permissions to access the specified resource (READ permission is required)."
                .to_string(),
        )
    }

    /// `DittoHeaderInvalidException.newInvalidTypeBuilder` as Ditto's
    /// metadata header validators throw it: `reason` is the parser's
    /// message and description.
    pub fn metadata_header_invalid(name: &str, value: &str, kind: &str, reason: String) -> Self {
        DittoError::new(
            400,
            "header.invalid",
            format!("The value '{value}' of the header '{name}' is not a valid {kind}."),
            reason,
        )
    }

    /// `MetadataHeadersConflictException` as `MetadataHeaderChecker`
    /// words it for a read or a write.
    pub fn metadata_headers_conflict(retrieve: bool) -> Self {
        let (message, description) = if retrieve {
            (
                "Metadata of the Thing could not be retrieved.",
                "Multiple metadata headers were specified. For GET requests only the 'get-metadata' header can be specified.",
            )
        } else {
            (
                "Metadata of the Thing could not be created, modified or deleted.",
                "Multiple metadata headers were specified. For PUT/PATCH requests either the 'put-metadata' or 'delete-metadata' header can be specified not both at the same time.",
            )
        };
        DittoError::new(400, "things:metadata.headersconflict", message, description.to_string())
    }

    /// `MetadataWildcardValidator`'s `DittoHeaderInvalidException`: a
    /// wildcard where the resource has none.
    pub fn metadata_wildcard_invalid(expression: &str, name: &str) -> Self {
        DittoError::new(
            400,
            "header.invalid",
            format!("The wildcard expression '{expression}' in header '{name}' is not valid."),
            format!("Verify that the value of the '{name}' header is valid and try again."),
        )
    }

    /// `MetadataNotModifiableException`, Ferry's reason: `put-metadata`
    /// would put a value that is not an object where the thing has a value
    /// (or a value below), whose metadata object holds its `_modified`.
    pub fn metadata_not_modifiable(path: &JsonPointer) -> Self {
        DittoError::new(
            400,
            "things:metadata.notmodifiable",
            format!("The metadata at '{path}' could not be modified."),
            "The metadata of a value of the Thing must be a JSON object: it holds the time of the value's last change ('_modified') beside what is put there."
                .to_string(),
        )
    }

    /// More metadata paths than one request may touch, once its wildcards
    /// are expanded (`metadata_wildcards.rs`).
    pub fn metadata_too_many_paths(name: &str, max: usize) -> Self {
        DittoError::new(
            400,
            "header.invalid",
            format!("The header '{name}' stands for more than {max} metadata paths."),
            "Use fewer entries or narrower wildcards.".to_string(),
        )
    }
}

/// `bytes / 1024.0` as Java's `MessageFormat` prints a double (the pattern
/// `#,##0.###`, `HALF_EVEN`). The division is exact in binary, so the
/// rounding is done on integers: thousandths of a kB are `bytes * 125 / 128`.
fn java_kilobytes(bytes: u64) -> String {
    let scaled = u128::from(bytes) * 125;
    let mut thousandths = scaled / 128;
    let remainder = scaled % 128;
    if remainder > 64 || (remainder == 64 && thousandths % 2 == 1) {
        thousandths += 1;
    }
    let whole = (thousandths / 1000).to_string();
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let fraction = thousandths % 1000;
    if fraction == 0 {
        grouped
    } else {
        let digits = format!("{fraction:03}");
        format!("{grouped}.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kilobytes_print_as_java_does() {
        assert_eq!(java_kilobytes(102_400), "100");
        assert_eq!(java_kilobytes(150_000), "146.484");
        assert_eq!(java_kilobytes(102_401), "100.001");
        assert_eq!(java_kilobytes(512), "0.5");
        assert_eq!(java_kilobytes(1_048_576), "1,024");
        assert_eq!(java_kilobytes(1_073_741_824), "1,048,576");
        // 64/1024 kB = 0.0625: the tie goes to the even 0.062.
        assert_eq!(java_kilobytes(64), "0.062");
        // 0.0009765625 kB rounds to 0.001.
        assert_eq!(java_kilobytes(1), "0.001");
        assert_eq!(java_kilobytes(0), "0");
    }

    #[test]
    fn too_large_reads_as_in_ditto() {
        let error = DittoError::thing_too_large(150_000, 102_400);
        assert_eq!(error.status, 413);
        assert_eq!(error.error, "things:thing.toolarge");
        assert_eq!(
            error.message,
            "The size of '146.484' kB exceeds the maximal allowed Thing size of '100' kB."
        );
    }
}
