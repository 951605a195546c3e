//! Where acknowledgements of subscribers meet the commands waiting for
//! them: which subscriber declared which label (a label has one
//! declarer, as in Ditto), which commands wait for which labels by
//! correlation id, and the weak acknowledgements of declarers that will
//! not see an event.
//!
//! A waiter is registered before its command is applied, so an
//! acknowledgement that comes back at once is not missed; it is removed
//! when dropped, answered or not.

use super::Ack;
use crate::error::DittoError;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Commands waiting for subscribers' acknowledgements at once: each
/// holds its caller's answer for up to 60 s.
const MAX_WAITING: usize = 10_000;

/// What a command asked its event's subscribers to acknowledge, carried
/// on the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAcks {
    pub correlation_id: String,
    /// The labels subscribers fulfil (no built-in one).
    pub labels: Vec<String>,
}

#[derive(Default)]
pub struct AckHub {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Label → the declaring subscriber and whether it takes events now.
    declared: HashMap<String, Declarer>,
    /// Correlation id → the labels still awaited and where they go.
    waiting: HashMap<String, Waiting>,
    next_declarer: u64,
}

struct Declarer {
    id: u64,
    streaming: bool,
}

struct Waiting {
    labels: Vec<String>,
    sender: mpsc::Sender<Ack>,
}

impl AckHub {
    /// Declares `labels` for one subscriber, or Ditto's 409
    /// `acknowledgement:label.not.unique` when another holds one of them.
    pub fn declare(self: &Arc<Self>, labels: Vec<String>) -> Result<Declaration, DittoError> {
        let mut state = self.state.lock();
        if labels.iter().any(|label| state.declared.contains_key(label)) {
            return Err(DittoError::new(
                409,
                "acknowledgement:label.not.unique",
                "One or more declared acknowledgement labels are taken by other subscribers.",
                "Please ensure all other subscribers with the declared acknowledgement labels are offline.".to_owned(),
            ));
        }
        state.next_declarer += 1;
        let id = state.next_declarer;
        for label in &labels {
            state.declared.insert(label.clone(), Declarer { id, streaming: false });
        }
        Ok(Declaration { hub: self.clone(), id, labels })
    }

    /// Registers a command waiting for `acks`, or Ditto's 409
    /// `acknowledgement:request.duplicate.correlation-id` when another
    /// waits under the same correlation id.
    pub fn expect(self: &Arc<Self>, acks: &EventAcks) -> Result<Waiter, DittoError> {
        let mut state = self.state.lock();
        if state.waiting.contains_key(&acks.correlation_id) {
            return Err(DittoError::new(
                409,
                "acknowledgement:request.duplicate.correlation-id",
                format!(
                    "The correlation-id <{}> of the acknowledgement request is already in use.",
                    acks.correlation_id
                ),
                "Please use a unique correlation-id for each request that requests acknowledgements.".to_owned(),
            ));
        }
        if state.waiting.len() >= MAX_WAITING {
            return Err(DittoError::too_many_requests());
        }
        let (sender, receiver) = mpsc::channel(acks.labels.len().max(1));
        state
            .waiting
            .insert(acks.correlation_id.clone(), Waiting { labels: acks.labels.clone(), sender });
        Ok(Waiter {
            hub: self.clone(),
            correlation_id: acks.correlation_id.clone(),
            expected: acks.labels.len(),
            receiver,
        })
    }

    /// Hands a subscriber's acknowledgement to the command waiting for
    /// it; one nobody waits for (any more) is dropped, as Ditto drops it.
    pub fn deliver(&self, correlation_id: &str, ack: Ack) {
        let mut state = self.state.lock();
        let Some(waiting) = state.waiting.get_mut(correlation_id) else { return };
        let Some(index) = waiting.labels.iter().position(|label| *label == ack.label) else {
            return;
        };
        waiting.labels.swap_remove(index);
        // Room for each label once: never full.
        let _ = waiting.sender.try_send(ack);
    }

    /// An event asking for `acks` was published: the labels whose
    /// declarers take no events now are weakly acknowledged at once.
    pub fn published(&self, acks: &EventAcks) {
        let weak: Vec<&String> = {
            let state = self.state.lock();
            acks.labels
                .iter()
                .filter(|label| state.declared.get(*label).is_some_and(|d| !d.streaming))
                .collect()
        };
        for label in weak {
            self.deliver(&acks.correlation_id, weak_ack(label, &acks.correlation_id));
        }
    }
}

/// Ditto's weak acknowledgement: the declarer did not get the signal
/// (not subscribed, filtered out, not allowed to read it), so it cannot
/// acknowledge it, and the command is not failed for that.
pub fn weak_ack(label: &str, correlation_id: &str) -> Ack {
    let mut headers = super::correlation_headers(correlation_id);
    headers.insert("ditto-weak-ack".into(), Value::Bool(true));
    Ack { label: label.to_owned(), status: 200, payload: None, headers }
}

/// One subscriber's labels, released when dropped (its session ended).
pub struct Declaration {
    hub: Arc<AckHub>,
    id: u64,
    labels: Vec<String>,
}

impl Declaration {
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Whether the subscriber takes twin events now: a declarer that does
    /// not is answered for with weak acknowledgements.
    pub fn set_streaming(&self, streaming: bool) {
        let mut state = self.hub.state.lock();
        for label in &self.labels {
            if let Some(declarer) = state.declared.get_mut(label).filter(|d| d.id == self.id) {
                declarer.streaming = streaming;
            }
        }
    }
}

impl Drop for Declaration {
    fn drop(&mut self) {
        let mut state = self.hub.state.lock();
        for label in &self.labels {
            if state.declared.get(label).is_some_and(|d| d.id == self.id) {
                state.declared.remove(label);
            }
        }
    }
}

/// A command waiting for its subscribers' acknowledgements.
pub struct Waiter {
    hub: Arc<AckHub>,
    correlation_id: String,
    expected: usize,
    receiver: mpsc::Receiver<Ack>,
}

impl Waiter {
    /// The acknowledgements that came within `timeout`.
    pub async fn collect(mut self, timeout: Duration) -> Vec<Ack> {
        let mut received = Vec::with_capacity(self.expected);
        let deadline = tokio::time::Instant::now() + timeout;
        while received.len() < self.expected {
            match tokio::time::timeout_at(deadline, self.receiver.recv()).await {
                Ok(Some(ack)) => received.push(ack),
                Ok(None) | Err(_) => break,
            }
        }
        received
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.hub.state.lock().waiting.remove(&self.correlation_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acks(id: &str, labels: &[&str]) -> EventAcks {
        EventAcks {
            correlation_id: id.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
        }
    }

    fn ack(label: &str) -> Ack {
        Ack { label: label.into(), status: 200, payload: None, headers: Default::default() }
    }

    #[tokio::test]
    async fn labels_have_one_declarer_and_acks_reach_their_waiter() {
        let hub = Arc::new(AckHub::default());
        let mine = hub.declare(vec!["app:done".into()]).unwrap();
        let error = hub.declare(vec!["other".into(), "app:done".into()]).err().unwrap();
        assert_eq!((error.status, error.error), (409, "acknowledgement:label.not.unique"));

        let waiter = hub.expect(&acks("c1", &["app:done", "nobody"])).unwrap();
        let error = hub.expect(&acks("c1", &["app:done"])).err().unwrap();
        assert_eq!(error.error, "acknowledgement:request.duplicate.correlation-id");
        hub.deliver("c1", ack("unrequested"));
        hub.deliver("c1", ack("app:done"));
        hub.deliver("c1", ack("app:done")); // a second one is not taken
        let got = waiter.collect(Duration::from_millis(50)).await;
        assert_eq!(got, vec![ack("app:done")]);
        // Answered: the correlation id may be used again.
        drop(hub.expect(&acks("c1", &["app:done"])).unwrap());

        // A declarer that takes no events is answered for with a weak ack.
        let waiter = hub.expect(&acks("c2", &["app:done"])).unwrap();
        hub.published(&acks("c2", &["app:done"]));
        let got = waiter.collect(Duration::from_secs(5)).await;
        assert_eq!(got[0].headers["ditto-weak-ack"], true);
        mine.set_streaming(true);
        let waiter = hub.expect(&acks("c3", &["app:done"])).unwrap();
        hub.published(&acks("c3", &["app:done"]));
        assert!(waiter.collect(Duration::from_millis(20)).await.is_empty());

        // Released with its session.
        drop(mine);
        assert!(hub.declare(vec!["app:done".into()]).is_ok());
    }
}
