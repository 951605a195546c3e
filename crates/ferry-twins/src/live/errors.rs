//! Ditto's exceptions of live signals as `DittoError` constructors, with
//! their codes, messages and descriptions as Ditto's classes have them.

use crate::error::DittoError;
use crate::id::ThingId;
use std::time::Duration;

impl DittoError {
    /// `MessageSendNotAllowedException`: no WRITE on the message resource.
    pub fn message_send_not_allowed(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "messages:send.notallowed",
            format!("You are not allowed to send messages for the Thing with id '{thing_id}'!"),
            "Please make sure that the Thing exists and that you have WRITE permissions on the message resource in the policy of the Thing.".to_string(),
        )
    }

    /// `EventSendNotAllowedException`: a live event without WRITE on the
    /// thing resource it is about.
    pub fn event_send_not_allowed(thing_id: &ThingId) -> Self {
        DittoError::new(
            403,
            "things:event.notallowed",
            format!("You are not allowed to send events for the Thing with id '{thing_id}'!"),
            "Please make sure that the Thing exists and that you have WRITE permissions on the message resource in the policy of the Thing.".to_string(),
        )
    }

    /// `SubjectInvalidException`: an empty message subject.
    pub fn subject_invalid(subject: &str) -> Self {
        DittoError::new(
            400,
            "messages:subject.invalid",
            format!("Subject '{subject}' is not valid!"),
            "It must not be empty and conform to RFC-3986 (URI) - check here if it does (select 'path' in the list): https://www.freeformatter.com/url-parser-query-string-splitter.html".to_string(),
        )
    }

    /// `CommandTimeoutException`: no response within the call's timeout.
    pub fn command_timeout(timeout: Duration) -> Self {
        DittoError::new(
            408,
            "command.timeout",
            format!(
                "The Command reached the specified timeout of {}ms.",
                java_grouped(timeout.as_millis())
            ),
            "Try increasing the command timeout.".to_string(),
        )
    }

    /// `TimeoutInvalidException`: a timeout above the maximum.
    pub fn timeout_invalid(timeout: Duration, max: Duration) -> Self {
        DittoError::new(
            400,
            "timeout.invalid",
            format!(
                "The timeout <{}ms> is not inside its allowed bounds <0ms - {}ms>",
                java_grouped(timeout.as_millis()),
                java_grouped(max.as_millis())
            ),
            "Please choose a valid timeout.".to_string(),
        )
    }

    /// `DittoHeaderInvalidException` of a header (or parameter) whose value
    /// is not of its type.
    pub fn header_invalid(name: &str, value: &str, kind: &str) -> Self {
        DittoError::new(
            400,
            "header.invalid",
            format!("The value '{value}' of the header '{name}' is not a valid {kind}."),
            format!("Verify that the value of the header '{name}' is a valid '{kind}'."),
        )
    }

    /// `LiveChannelConditionNotAllowedException`: a
    /// `live-channel-condition` on a request that is not a retrieve.
    pub fn live_channel_condition_not_allowed() -> Self {
        DittoError::new(
            400,
            "things:live.channelcondition.notallowed",
            "The specified 'live-channel-condition' is only allowed to be used for retrieving API calls.",
            "For modifying API calls the 'live-channel-condition' cannot be used, please remove the condition.".to_owned(),
        )
    }

    /// `TooManyRequestsException`: every slot for a pending live call is
    /// taken.
    pub fn too_many_requests() -> Self {
        DittoError::new(
            429,
            "too.many.requests",
            "You made too many requests.",
            "Try again soon.".to_string(),
        )
    }
}

/// Milliseconds as Java's `MessageFormat` writes them (`10,000`).
fn java_grouped(millis: u128) -> String {
    crate::rql::grouped(i64::try_from(millis).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_java_writes_them() {
        assert_eq!(
            DittoError::command_timeout(Duration::from_secs(10)).message,
            "The Command reached the specified timeout of 10,000ms."
        );
    }
}
