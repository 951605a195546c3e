//! The errors of policies, one constructor per Ditto exception: code,
//! status, message template and default description copied from the
//! class named in each doc comment (all under
//! `org.eclipse.ditto.policies.model`).

use crate::error::DittoError;

/// The wrong-type message of Ditto's JSON field definitions, for a field
/// whose value is not of the type the model reads.
pub(crate) fn wrong_type(value: &serde_json::Value, pointer: &str, type_name: &str) -> DittoError {
    DittoError::json_parse(format!("Value <{value}> for <{pointer}> is not of type <{type_name}>!"))
}

const ENTRY_NOT_FOUND_DESCRIPTION: &str =
    "Check if the ID of the Policy and the Label of your requested \
     PolicyEntry was correct and you have sufficient permissions.";
const MODIFICATION_INVALID_DESCRIPTION: &str = "There must always be at least one PolicyEntry with 'WRITE' permissions on resource 'policy:/'.";

impl DittoError {
    /// `LabelInvalidException`: a label with a prefix reserved for imported
    /// entries.
    pub fn label_invalid(label: &str) -> Self {
        DittoError::new(
            400,
            "policies:label.invalid",
            format!("Label '{label}' is not valid!"),
            "It must not start with the blocklisted 'imported' or 'nsimported' prefix.".to_string(),
        )
    }

    /// `PolicyEntryInvalidException`, with the message and description the
    /// failing rule sets (a label or resource key with forbidden
    /// characters, an unknown `importable`).
    pub fn policy_entry_invalid(
        message: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        DittoError::new(400, "policies:entry.invalid", message, description.into())
    }

    /// `PolicyIdInvalidException`.
    pub fn policy_id_invalid(policy_id: &str) -> Self {
        DittoError::new(
            400,
            "policies:id.invalid",
            format!("Policy ID '{policy_id}' is not valid!"),
            "It must conform to the namespaced entity ID notation (see Ditto documentation)"
                .to_string(),
        )
        .with_href("https://www.eclipse.dev/ditto/basic-namespaces-and-names.html#namespaced-id")
    }

    /// `PolicyIdNotExplicitlySettableException`: a body whose `policyId`
    /// differs from the one in the URL.
    pub fn policy_id_not_settable() -> Self {
        DittoError::new(
            400,
            "policies:id.notsettable",
            "The Policy ID in the request body is not equal to the Policy ID in the request URL.",
            "Either delete the Policy ID from the request body or use the same Policy ID as in the request URL."
                .to_string(),
        )
    }

    /// `SubjectIdInvalidException`: no `issuer:` prefix, or a control
    /// character.
    pub fn subject_id_invalid(subject_id: &str) -> Self {
        DittoError::new(
            400,
            "policies:subjectid.invalid",
            format!("Subject ID '{subject_id}' is not valid!"),
            "It must contain an issuer as prefix separated by a colon ':' from the actual subject"
                .to_string(),
        )
    }

    /// `SubjectExpiryInvalidException` as `newBuilder`: not an ISO-8601
    /// instant.
    pub fn subject_expiry_invalid(expiry: &str) -> Self {
        DittoError::new(
            400,
            "policies:subjectexpiry.invalid",
            format!("Subject expiry timestamp '{expiry}' is not valid."),
            "It must be provided as ISO-8601 formatted char sequence.".to_string(),
        )
    }

    /// `SubjectAnnouncementInvalidException`: a duration of an
    /// `announcement` that is not one (or `beforeExpiry` not in seconds,
    /// minutes or hours).
    pub fn subject_announcement_invalid(duration: &str) -> Self {
        DittoError::new(
            400,
            "policies:subjectannouncement.invalid",
            format!("The 'beforeExpiry' duration '{duration}' is not valid."),
            "It must be a positive integer followed by 'h' (hours), 'm' (minutes) or 's' (seconds)."
                .to_string(),
        )
    }

    /// `SubjectExpiryInvalidException` as `newBuilderTimestampInThePast`: a
    /// subject written with an expiry already passed.
    pub fn subject_expiry_in_the_past(expiry: &str) -> Self {
        DittoError::new(
            400,
            "policies:subjectexpiry.invalid",
            format!("Subject expiry timestamp '{expiry}' is not valid."),
            "It must not be in the past, please adjust to a timestamp in the future.".to_string(),
        )
    }

    /// `PolicyTooLargeException` (413). Ditto formats the sizes as kB with
    /// `MessageFormat`, which prints a double as `#,##0.###`.
    pub fn policy_too_large(actual_bytes: u64, max_bytes: u64) -> Self {
        DittoError::new(
            413,
            "policies:policy.toolarge",
            format!(
                "The size of '{}' kB exceeds the maximal allowed Policy size of '{}' kB.",
                kilobytes(actual_bytes),
                kilobytes(max_bytes)
            ),
            "Reduce the Policy size in the bounds of the specified limit".to_string(),
        )
    }

    /// `PolicyNotAccessibleException`.
    pub fn policy_not_found(policy_id: &str) -> Self {
        DittoError::new(
            404,
            "policies:policy.notfound",
            format!(
                "The Policy with ID '{policy_id}' could not be found or requester had insufficient permissions to access it."
            ),
            "Check if the ID of your requested Policy was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// `PolicyConflictException`: creating a policy that exists.
    pub fn policy_conflict(policy_id: &str) -> Self {
        DittoError::new(
            409,
            "policies:policy.conflict",
            format!("The Policy with ID '{policy_id}' already exists"),
            "Choose another Policy ID".to_string(),
        )
    }

    /// `PolicyEntryNotAccessibleException`.
    pub fn policy_entry_not_found(policy_id: &str, label: &str) -> Self {
        DittoError::new(
            404,
            "policies:entry.notfound",
            format!(
                "The PolicyEntry with Label '{label}' on the Policy with ID '{policy_id}' could not be found or \
                 requester had insufficient permissions to access it."
            ),
            ENTRY_NOT_FOUND_DESCRIPTION.to_string(),
        )
    }

    /// `SubjectNotAccessibleException`.
    pub fn subject_not_found(policy_id: &str, label: &str, subject_id: &str) -> Self {
        DittoError::new(
            404,
            "policies:subject.notfound",
            format!(
                "The Subject with ID '{subject_id}' of the PolicyEntry with Label '{label}' on the Policy with ID \
                 '{policy_id}' could not be found or requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Policy, the Label of the PolicyEntry and ID of your requested Subject was \
             correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// `ResourceNotAccessibleException`.
    pub fn resource_not_found(policy_id: &str, label: &str, resource_key: &str) -> Self {
        DittoError::new(
            404,
            "policies:resource.notfound",
            format!(
                "The Resource '{resource_key}' of the PolicyEntry with Label '{label}' on the Policy with ID \
                 '{policy_id}' could not be found or requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Policy, the Label of the PolicyEntry and the path of your requested Resource \
             was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// `PolicyModificationInvalidException` (403): a write of the whole
    /// policy or all its entries that would lock every writer out.
    pub fn policy_modification_invalid(policy_id: &str, description: Option<String>) -> Self {
        DittoError::new(
            403,
            "policies:policy.modificationinvalid",
            format!(
                "The Policy with ID '{policy_id}' could not be modified as the resulting Policy would be invalid."
            ),
            description.unwrap_or_else(|| MODIFICATION_INVALID_DESCRIPTION.to_string()),
        )
    }

    /// `PolicyEntryModificationInvalidException` (403): the same for a
    /// write below one entry.
    pub fn policy_entry_modification_invalid(
        policy_id: &str,
        label: &str,
        description: Option<String>,
    ) -> Self {
        DittoError::new(
            403,
            "policies:entry.modificationinvalid",
            format!(
                "The PolicyEntry with Label '{label}' on the Policy with ID '{policy_id}' could not be modified as \
                 the resulting Policy would be invalid."
            ),
            description.unwrap_or_else(|| MODIFICATION_INVALID_DESCRIPTION.to_string()),
        )
    }

    /// `PolicyNotModifiableException`: a write to the policy or all its
    /// entries without WRITE there.
    pub fn policy_not_modifiable(policy_id: &str) -> Self {
        DittoError::new(
            403,
            "policies:policy.notmodifiable",
            format!(
                "The Policy with ID '{policy_id}' could not be modified as the requester had insufficient permissions."
            ),
            "Check if the ID of your requested Policy was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// `PolicyNotCreatableException`: a new policy that would not give its
    /// creator WRITE on `policy:/`.
    pub fn policy_not_creatable(policy_id: &str) -> Self {
        DittoError::new(
            403,
            "policies:policy.notcreatable",
            format!(
                "The Policy with ID '{policy_id}' could not be created as the requester had insufficient permissions."
            ),
            "Check if you have sufficient permissions in the new policy to create.".to_string(),
        )
    }

    /// `PolicyEntryNotModifiableException`.
    pub fn policy_entry_not_modifiable(policy_id: &str, label: &str) -> Self {
        DittoError::new(
            403,
            "policies:entry.notmodifiable",
            format!(
                "The PolicyEntry with Label '{label}' on the Policy with ID '{policy_id}' could not be modified as \
                 the requester had insufficient permissions."
            ),
            ENTRY_NOT_FOUND_DESCRIPTION.to_string(),
        )
    }

    /// `SubjectsNotModifiableException`.
    pub fn subjects_not_modifiable(policy_id: &str, label: &str) -> Self {
        DittoError::new(
            403,
            "policies:subjects.notmodifiable",
            format!(
                "The Subjects of the PolicyEntry with Label '{label}' on the Policy with ID '{policy_id}' could not \
                 be modified as the requester had insufficient permissions."
            ),
            "Check if the ID of the Policy and the PolicyEntry's Label of your requested Subjects was correct and \
             you have sufficient permissions."
                .to_string(),
        )
    }

    /// `SubjectNotModifiableException`.
    pub fn subject_not_modifiable(policy_id: &str, label: &str, subject_id: &str) -> Self {
        DittoError::new(
            403,
            "policies:subject.notmodifiable",
            format!(
                "The Subject with ID '{subject_id}' of the PolicyEntry with Label '{label}' on the Policy with ID \
                 '{policy_id}' could not be modified as the requester had insufficient permissions."
            ),
            "Check if the ID of the Policy, the Label of the PolicyEntry and ID of your requested Subject was \
             correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// `ResourcesNotModifiableException`.
    pub fn resources_not_modifiable(policy_id: &str, label: &str) -> Self {
        DittoError::new(
            403,
            "policies:resources.notmodifiable",
            format!(
                "The Resources of the PolicyEntry with Label '{label}' on the Policy with ID '{policy_id}' could not \
                 be modified as the requester had insufficient permissions."
            ),
            "Check if the ID of the Policy and the PolicyEntry's Label of your requested Resources was correct and \
             you have sufficient permissions."
                .to_string(),
        )
    }

    /// `ResourceNotModifiableException`.
    pub fn resource_not_modifiable(policy_id: &str, label: &str, resource_key: &str) -> Self {
        DittoError::new(
            403,
            "policies:resource.notmodifiable",
            format!(
                "The Resource '{resource_key}' of the PolicyEntry with Label '{label}' on the Policy with ID \
                 '{policy_id}' could not be modified as the requester had insufficient permissions."
            ),
            "Check if the ID of the Policy, the Label of the PolicyEntry and the path of your requested Resource \
             was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// `PolicyImportInvalidException` as `PolicyImportsValidator` throws
    /// it: a policy importing itself.
    pub fn policy_import_of_itself() -> Self {
        DittoError::new(
            400,
            "policies:import.invalid",
            "The Policy Import is invalid.",
            "The Policy Import references the policy where it is defined.".to_string(),
        )
    }

    /// `PolicyImportInvalidException` for a `transitiveImports` list that
    /// names the importing policy (`PolicyImportsValidator`).
    pub fn policy_import_transitive_of_itself(policy_id: &str) -> Self {
        DittoError::new(
            400,
            "policies:import.invalid",
            "The policy import contains a transitive resolution of the policy itself.",
            format!(
                "The 'transitiveImports' array must not contain the importing policy's own ID '{policy_id}'."
            ),
        )
    }

    /// `PolicyImportInvalidException` for a `transitiveImports` element
    /// that is not a string (`ImmutableEffectedImports.fromJson`).
    pub fn policy_import_transitive_not_a_string(element: &serde_json::Value) -> Self {
        DittoError::new(
            400,
            "policies:import.invalid",
            format!("The 'transitiveImports' array contains a non-string element: {element}"),
            "Every element in 'transitiveImports' must be a string representing a valid policy ID."
                .to_string(),
        )
    }

    /// `PolicyImportsTooLargeException`, message of the builder taking an
    /// id: `ImmutablePolicy.of` names the policy, `setPolicyImport` (one
    /// import added) names the imported policy.
    pub fn policy_imports_too_large(id: &str, max: usize) -> Self {
        DittoError::new(
            400,
            "policies:imports.toolarge",
            format!(
                "The Imports of the Policy with ID '{id}' could not be modified as they exceed the allowed number of '{max}'."
            ),
            format!("Please reduce the number of imports you're trying to add to {max}"),
        )
    }

    /// `PolicyImportsTooLargeException`, message of the builder taking a
    /// count (`PolicyBuilder.setPolicyImports`: all imports replaced).
    pub fn policy_imports_too_many(count: usize, max: usize) -> Self {
        DittoError::new(
            400,
            "policies:imports.toolarge",
            format!(
                "The number of '{count}' policy imports exceeds the allowed maximum number of '{max}'."
            ),
            format!("Please reduce the number of imports you're trying to add to {max}"),
        )
    }

    /// `PolicyImportNotAccessibleException`.
    pub fn policy_import_not_found(policy_id: &str, imported_policy_id: &str) -> Self {
        DittoError::new(
            404,
            "policies:import.notfound",
            format!(
                "The Policy import '{imported_policy_id}' of Policy '{policy_id}' could not be found or requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Policy and the imported Policy was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// `PolicyImportsNotAccessibleException`.
    pub fn policy_imports_not_found(policy_id: &str) -> Self {
        DittoError::new(
            404,
            "policies:imports.notfound",
            format!(
                "The imports of the Policy with ID '{policy_id}' could not be found or requester had insufficient permissions to access it."
            ),
            "Check if the ID of the Policy was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// `PolicyImportNotModifiableException`.
    pub fn policy_import_not_modifiable(policy_id: &str, imported_policy_id: &str) -> Self {
        DittoError::new(
            403,
            "policies:import.notmodifiable",
            format!(
                "The Import of the Policy with ID '{imported_policy_id}' in Policy with ID '{policy_id}' could not be modified as the requester had insufficient permissions."
            ),
            "Check if the ID of your requested Policy and imported Policy was correct and you have sufficient permissions."
                .to_string(),
        )
    }

    /// `PolicyImportsNotModifiableException`.
    pub fn policy_imports_not_modifiable(policy_id: &str) -> Self {
        DittoError::new(
            403,
            "policies:imports.notmodifiable",
            format!(
                "The Imports of the Policy with ID '{policy_id}' could not be modified as the requester had insufficient permissions."
            ),
            "Check if the ID of your requested Policy was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// `PolicyNotAccessibleException` as `PolicyImportsPreEnforcer` throws
    /// it: the caller may not READ every entry an import brings in.
    pub fn imported_policy_not_readable(imported_policy_id: &str) -> Self {
        DittoError::policy_not_found(imported_policy_id).with_description(
            "Check if the ID of the imported Policy was correct and you have sufficient permissions on all imported policy entries.",
        )
    }

    /// `PolicyUnavailableException`: the store failed.
    pub fn policy_unavailable(policy_id: &str) -> Self {
        DittoError::new(
            503,
            "policies:policy.unavailable",
            format!("The Policy with ID '{policy_id}' is not available, please try again later."),
            "The requested Policy is temporarily not available, please retry the performed action in order to \
             improve resiliency."
                .to_string(),
        )
    }
}

/// `bytes / 1024.0` as Java's default `NumberFormat` prints it: grouping
/// commas, at most three decimals rounded half-even, no trailing zeros.
/// Integer arithmetic, so no float rounding decides a digit.
fn kilobytes(bytes: u64) -> String {
    let scaled = u128::from(bytes) * 1000;
    let (mut thousandths, remainder) = (scaled / 1024, scaled % 1024);
    if remainder * 2 > 1024 || (remainder * 2 == 1024 && thousandths % 2 == 1) {
        thousandths += 1;
    }
    let (whole, fraction) = (thousandths / 1000, thousandths % 1000);
    let digits = whole.to_string();
    let mut grouped = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if fraction > 0 {
        let decimals = format!("{fraction:03}");
        grouped.push('.');
        grouped.push_str(decimals.trim_end_matches('0'));
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kilobytes_print_as_java_message_format_does() {
        assert_eq!(kilobytes(102_400), "100");
        assert_eq!(kilobytes(102_401), "100.001");
        assert_eq!(kilobytes(150_000), "146.484");
        assert_eq!(kilobytes(512), "0.5");
        assert_eq!(kilobytes(2_000_000), "1,953.125");
    }

    #[test]
    fn too_large_is_413_with_both_sizes() {
        let error = DittoError::policy_too_large(150_000, 102_400);
        assert_eq!(error.status, 413);
        assert_eq!(error.error, "policies:policy.toolarge");
        assert_eq!(
            error.message,
            "The size of '146.484' kB exceeds the maximal allowed Policy size of '100' kB."
        );
    }
}
