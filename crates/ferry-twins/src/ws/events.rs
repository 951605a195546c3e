//! `START-SEND-EVENTS`' options and what a session sees of one twin event
//! under them: the one place the WebSocket decides which events to send.
//!
//! The options are the ones SSE reads (`service/watch.rs`): `namespaces`
//! (comma-separated; empty for all), `filter` (RQL on the event's partial
//! thing with its extra fields) and `extraFields`, which Ditto's protocol
//! event carries as `extra`: the caller's view of those fields of the
//! thing.

use crate::error::DittoError;
use crate::protocol::{Envelope, EventView};
use crate::service::watch::Watch;
use crate::service::{Caller, ThingEvent, Twins};

/// The options of one session's `START-SEND-EVENTS`.
#[derive(Debug, Clone, Default)]
pub struct EventOptions {
    watch: Watch,
}

impl EventOptions {
    /// The options from the control message's parameters (Ditto's
    /// `StartStreaming`; `correlation-id` only labels an error). `ids` and
    /// `fields` are SSE's, not the WebSocket's: ignored, as Ditto does.
    pub fn parse(params: &[(String, String)]) -> Result<EventOptions, DittoError> {
        let known: Vec<(String, String)> = params
            .iter()
            .filter(|(name, _)| matches!(name.as_str(), "namespaces" | "filter" | "extraFields"))
            .filter(|(_, value)| !value.is_empty())
            .cloned()
            .collect();
        Ok(EventOptions { watch: Watch::parse(&known)? })
    }

    /// What `caller` gets of `event`, or `None` for nothing.
    pub async fn envelope_for(
        &self,
        twins: &Twins,
        caller: &Caller,
        event: ThingEvent,
    ) -> Option<Envelope> {
        if !self.watch.selects(&event) {
            return None;
        }
        if self.watch.filter.is_none() && self.watch.extra_fields.is_none() {
            return EventView::load(twins, event).await.envelope_for(caller);
        }
        let visible = match twins.visible_event(caller, &event, &self.watch).await {
            Ok(visible) => visible?,
            Err(error) => {
                tracing::warn!(thing_id = %event.thing_id, %error, "a twin event could not be shown to a WebSocket session");
                return None;
            }
        };
        let mut envelope = EventView::load(twins, event).await.envelope_for(caller)?;
        envelope.extra =
            self.watch.extra_fields.as_ref().map(|fields| fields.project(&visible.thing));
        Some(envelope)
    }
}

/// Ditto's `getNamespaces` for the live streams: comma-separated, empty
/// for all.
pub fn namespaces(value: &str) -> Vec<String> {
    value.split(',').filter(|namespace| !namespace.is_empty()).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ws::tests::params;

    #[test]
    fn the_options_are_sses_and_a_bad_filter_is_refused() {
        let options = EventOptions::parse(&params(&[
            ("namespaces", "a,,b"),
            ("filter", "eq(attributes/x,1)"),
        ]))
        .unwrap();
        assert_eq!(options.watch.namespaces, ["a", "b"]);
        assert!(options.watch.filter.is_some());
        assert!(EventOptions::parse(&params(&[("namespaces", "")]))
            .unwrap()
            .watch
            .namespaces
            .is_empty());
        let refused = EventOptions::parse(&params(&[("filter", "eq(a")])).unwrap_err();
        assert_eq!(refused.status, 400);
        assert!(EventOptions::parse(&params(&[("extraFields", "")])).is_ok());
    }
}
