//! Ditto's connectivity errors, with the codes, messages and descriptions
//! of its exceptions (`connectivity/model/…/exceptions`).

use crate::error::DittoError;

impl DittoError {
    /// `ConnectionNotAccessibleException`.
    pub fn connection_not_found(id: &str) -> Self {
        DittoError::new(
            404,
            "connectivity:connection.notfound",
            format!("The Connection with ID '{id}' could not be found or requester had insufficient permissions to access it."),
            "Check if the ID of your requested Connection was correct and you have sufficient permissions.".to_string(),
        )
    }

    /// `ConnectionConflictException`: a POST or create for an id in use.
    pub fn connection_conflict(id: &str) -> Self {
        DittoError::new(
            409,
            "connectivity:connection.conflict",
            format!("The Connection with ID '{id}' was already created."),
            "If you need to update it, remove it first before creating it again.".to_string(),
        )
    }

    /// `ConnectionConfigurationInvalidException`, with what is wrong.
    pub fn connection_invalid(message: impl Into<String>) -> Self {
        DittoError::new(
            400,
            "connectivity:connection.configuration.invalid",
            message,
            "Make sure all required properties are set and valid in the configuration.".to_string(),
        )
    }

    /// `ConnectionIdInvalidException`.
    pub fn connection_id_invalid(id: &str) -> Self {
        DittoError::new(
            400,
            "connectivity:connection.id.invalid",
            format!("The Connection ID '{id}' is not valid."),
            "It must be conform to the regular expression: <[a-zA-Z0-9-_:]{1,100}>.".to_string(),
        )
    }

    /// `ConnectionUnavailableException`: Ferry could not store a change.
    pub fn connection_unavailable(id: &str) -> Self {
        DittoError::new(
            503,
            "connectivity:connection.unavailable",
            format!("The Connection with ID '{id}' is not available, please try again later."),
            "The requested Connection is temporarily not available, please retry the performed action in order to improve resiliency.".to_string(),
        )
    }

    /// Ditto's 403 for a caller who may not manage connections (its
    /// devops authentication refused).
    pub fn connections_forbidden() -> Self {
        DittoError::new(
            403,
            "gateway:authentication.failed",
            "Managing connections requires one of the subjects in [twins] connection_subjects.",
            "Authenticate as a user whose subject is listed there.".to_string(),
        )
    }

    /// `ConnectivityCommandInvalid`-like: an unknown `…/command`.
    pub fn connection_command_invalid(command: &str) -> Self {
        DittoError::new(
            400,
            "connectivity:connection.command.invalid",
            format!("The command '{command}' is not supported."),
            "Send one of: connectivity.commands:openConnection, connectivity.commands:closeConnection, connectivity.commands:resetConnectionMetrics.".to_string(),
        )
    }
}
