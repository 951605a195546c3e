//! A connection's targets as receivers of live signals: each target with
//! live topics (`_/_/things/live/messages`, `…/commands`, `…/events`) is a
//! receiver of the live hub (`crate::live`) with the rights of its
//! `authorizationContext`, so it gets what those subjects may READ of a
//! signal, as a WebSocket session that sent `START-SEND-MESSAGES` would.
//! Every transport (`mqtt.rs`, `push.rs`, `kafka/target.rs`) sends what
//! comes out of the one queue.

use super::model::ConnectionSpec;
use crate::protocol::Envelope;
use crate::service::Twins;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// Live signals queued for one connection's targets, beyond which they
/// are dropped: a WebSocket session's bound.
const LIVE_QUEUE: usize = crate::ws::PUSH_QUEUE;

/// A live signal for the target of that index.
pub type LiveSignal = (usize, Envelope);

/// The live signals of the connection's targets, out of the returned
/// queue with the target's index. The tasks hold the registrations.
pub fn signals(
    twins: &Arc<Twins>,
    spec: &ConnectionSpec,
) -> (Vec<AbortHandle>, mpsc::Receiver<LiveSignal>) {
    let (signals, queued) = mpsc::channel(LIVE_QUEUE);
    let mut tasks = Vec::new();
    for (index, target) in spec.targets.iter().enumerate().filter(|(_, t)| !t.live.is_empty()) {
        let (out, mut received) = mpsc::channel(LIVE_QUEUE);
        let subscription = twins.subscribe_live(target.caller.clone(), out);
        for (kind, namespaces) in &target.live {
            subscription.subscriber.set(*kind, Some(namespaces.clone()));
        }
        let signals = signals.clone();
        tasks.push(
            tokio::spawn(async move {
                let _registered = subscription;
                while let Some(envelope) = received.recv().await {
                    if signals.send((index, envelope)).await.is_err() {
                        return;
                    }
                }
            })
            .abort_handle(),
        );
    }
    (tasks, queued)
}
