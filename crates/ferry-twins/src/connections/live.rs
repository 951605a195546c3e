//! A connection's targets as receivers of live signals: each target with
//! live topics (`_/_/things/live/messages`, `…/commands`, `…/events`) is a
//! receiver of the live hub (`crate::live`) with the rights of its
//! `authorizationContext`, so it gets what those subjects may READ of a
//! signal, as a WebSocket session that sent `START-SEND-MESSAGES` would.
//! A target with `_/_/policies/announcements` gets the announcements of
//! its subjects' deletion (`crate::announcements`) the same way.
//! Every transport (`mqtt.rs`, `push.rs`, `kafka/target.rs`) sends what
//! comes out of the one queue.
//!
//! A target with an `issuedAcknowledgementLabel` acknowledges a signal
//! that requests its label once the signal is delivered, as for twin
//! events; it declares the label to the hub, so a signal it does not get
//! (not its kind, or not readable by its subjects) is weakly acknowledged
//! for it at once.

use super::model::{ConnectionSpec, Owed, TargetSpec};
use crate::protocol::Envelope;
use crate::service::Twins;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Live signals queued for one connection's targets, beyond which they
/// are dropped: a WebSocket session's bound.
const LIVE_QUEUE: usize = crate::ws::PUSH_QUEUE;

/// A live signal for one target.
pub struct LiveSignal {
    /// The target's index among the connection's.
    pub target: usize,
    pub envelope: Envelope,
    /// The acknowledgement the target owes for it, once delivered.
    pub owed: Option<Owed>,
}

/// The live signals of the connection's targets, out of the returned
/// queue with the target's index. The tasks hold the registrations.
pub fn signals(
    twins: &Arc<Twins>,
    spec: &ConnectionSpec,
) -> (Vec<AbortHandle>, mpsc::Receiver<LiveSignal>) {
    let (signals, queued) = mpsc::channel(LIVE_QUEUE);
    let mut tasks = Vec::new();
    let receives = |target: &&TargetSpec| !target.live.is_empty() || target.announcements.is_some();
    for (index, target) in spec.targets.iter().enumerate().filter(|(_, t)| receives(t)) {
        let (out, mut received) = mpsc::channel(LIVE_QUEUE);
        let subscription = twins.subscribe_live(target.caller.clone(), out);
        for (kind, namespaces) in &target.live {
            subscription.subscriber.set(*kind, Some(namespaces.clone()));
        }
        subscription.subscriber.set_announcements(target.announcements.clone());
        if let Some(label) = &target.issued_ack {
            subscription.subscriber.declare(std::slice::from_ref(label));
        }
        let issued = target.issued_ack.clone();
        let signals = signals.clone();
        tasks.push(
            tokio::spawn(async move {
                let _registered = subscription;
                while let Some(envelope) = received.recv().await {
                    let owed = issued.as_ref().and_then(|label| owed(label, &envelope));
                    let signal = LiveSignal { target: index, envelope, owed };
                    if signals.send(signal).await.is_err() {
                        return;
                    }
                }
            })
            .abort_handle(),
        );
    }
    (tasks, queued)
}

/// The acknowledgement `label` owes for `signal`, when it requests it.
fn owed(label: &str, signal: &Envelope) -> Option<Owed> {
    let requested = crate::acks::requested_labels(&signal.headers).ok()??;
    Owed::if_requested(label, &requested, &signal.correlation_id()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn signal(headers: serde_json::Value) -> Envelope {
        serde_json::from_value(json!({
            "topic": "org.acme/lamp/things/live/messages/ask",
            "headers": headers,
            "path": "/inbox/messages/ask",
        }))
        .unwrap()
    }

    #[test]
    fn a_target_owes_only_what_the_signal_requested_under_its_correlation_id() {
        let asked =
            signal(json!({"requested-acks": ["c:got", "c:delivered"], "correlation-id": "x"}));
        let delivered = owed("c:delivered", &asked).unwrap();
        assert_eq!(
            (delivered.label.as_str(), delivered.correlation_id.as_str()),
            ("c:delivered", "x")
        );
        assert!(owed("c:other", &asked).is_none());
        assert!(owed("c:delivered", &signal(json!({"correlation-id": "x"}))).is_none());
        assert!(owed("c:delivered", &signal(json!({"requested-acks": ["c:delivered"]}))).is_none());
    }
}
