//! `START-SEND-EVENTS`' options and what a session sees of one twin event
//! under them: the one place the WebSocket decides which events to send.
//!
//! `namespaces` (comma-separated; empty for all) is read here. `filter`
//! and `extraFields` are the twin event options the SSE stream reads too
//! (`service/watch.rs`); a session that asks for them is refused with
//! [`unsupported_option`] rather than sent events it did not ask for,
//! until `EventOptions` holds those options and `envelope_for` takes the
//! SSE stream's view of an event.

use crate::error::DittoError;
use crate::protocol::{Envelope, EventView};
use crate::service::{Caller, ThingEvent, Twins};

/// The options of one session's `START-SEND-EVENTS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventOptions {
    /// Only things in these namespaces; empty for every namespace.
    namespaces: Vec<String>,
}

impl EventOptions {
    /// The options from the control message's parameters (Ditto's
    /// `StartStreaming`; `correlation-id` only labels an error).
    pub fn parse(params: &[(String, String)]) -> Result<EventOptions, DittoError> {
        let mut options = EventOptions::default();
        for (name, value) in params {
            match name.as_str() {
                "namespaces" => options.namespaces = namespaces(value),
                "filter" | "extraFields" if !value.is_empty() => {
                    return Err(unsupported_option(name));
                }
                _ => {}
            }
        }
        Ok(options)
    }

    /// What `caller` gets of `event`, or `None` for nothing.
    pub async fn envelope_for(
        &self,
        twins: &Twins,
        caller: &Caller,
        event: ThingEvent,
    ) -> Option<Envelope> {
        let namespace = event.thing_id.namespace();
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == namespace) {
            return None;
        }
        EventView::load(twins, event).await.envelope_for(caller)
    }
}

/// Ditto's `getNamespaces`: comma-separated, empty for all.
pub fn namespaces(value: &str) -> Vec<String> {
    value.split(',').filter(|namespace| !namespace.is_empty()).map(str::to_owned).collect()
}

/// An event option this build does not apply.
fn unsupported_option(name: &str) -> DittoError {
    DittoError::new(
        501,
        "gateway:streaming.option.unsupported",
        format!("The option '{name}' of START-SEND-EVENTS is not supported."),
        "Subscribe without it.".to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ws::tests::params;

    #[test]
    fn namespaces_are_read_and_unapplied_options_refused() {
        let options = EventOptions::parse(&params(&[("namespaces", "a,,b")])).unwrap();
        assert_eq!(options.namespaces, ["a", "b"]);
        assert_eq!(
            EventOptions::parse(&params(&[("namespaces", "")])).unwrap().namespaces.len(),
            0
        );
        let refused = EventOptions::parse(&params(&[("filter", "eq(a,1)")])).unwrap_err();
        assert_eq!(refused.status, 501);
        assert!(EventOptions::parse(&params(&[("extraFields", "")])).is_ok());
    }
}
