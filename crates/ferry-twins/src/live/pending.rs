//! Live calls waiting for their response, by correlation id, and the
//! outcomes of persistent (`qos=1`) messages kept for polling.
//!
//! **Why the bounds.** A pending call is a waiting HTTP request, a
//! WebSocket client's command or a persistent message's timer, each
//! holding its signal until the device answers or the timeout passes; a
//! caller sending to devices that never answer would otherwise grow the
//! table for up to a minute (or a message's whole TTL) at any rate it
//! likes. At [`MAX_PENDING`] a new call is refused with Ditto's 429
//! `too.many.requests` instead, which costs the caller a retry and the
//! process nothing. Outcomes are kept [`OUTCOME_KEPT`] after they are
//! known and at most [`MAX_OUTCOMES`] of them, the oldest forgotten first:
//! a poller that comes back later than that gets 404, as for an id never
//! sent.

use crate::error::DittoError;
use crate::id::ThingId;
use crate::protocol::Envelope;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Calls waiting at once: at ~1 KiB each (the signal's headers and the
/// waiter), about 10 MiB.
pub const MAX_PENDING: usize = 10_000;

/// Outcomes remembered at once, answered or not.
pub const MAX_OUTCOMES: usize = 10_000;

/// How long a known outcome stays to be polled.
pub const OUTCOME_KEPT: Duration = Duration::from_secs(600);

/// One call's place in the table, and what a response must match.
struct Waiting {
    /// Which registration this is: a correlation id can be used again once
    /// its call is over, and the old call's clean-up must not remove the
    /// new one.
    serial: u64,
    thing_id: ThingId,
    answer: oneshot::Sender<Envelope>,
}

#[derive(Default)]
pub struct Pending {
    calls: Mutex<Calls>,
}

#[derive(Default)]
struct Calls {
    by_id: HashMap<String, Waiting>,
    next_serial: u64,
}

/// A registration: its serial, for [`Pending::forget`], and where its
/// response arrives.
#[derive(Debug)]
pub struct Registered {
    pub serial: u64,
    pub response: oneshot::Receiver<Envelope>,
}

impl Pending {
    /// Waits for the response to `correlation_id` about `thing_id`. The
    /// id must not be waiting already (the first caller would get the
    /// second one's answer); the table must have room.
    pub fn register(
        &self,
        correlation_id: &str,
        thing_id: &ThingId,
    ) -> Result<Registered, DittoError> {
        let mut calls = self.calls.lock();
        if calls.by_id.contains_key(correlation_id) {
            return Err(DittoError::header_invalid(
                "correlation-id",
                correlation_id,
                "correlation-id of no other pending call",
            ));
        }
        if calls.by_id.len() >= MAX_PENDING {
            return Err(DittoError::too_many_requests());
        }
        calls.next_serial += 1;
        let serial = calls.next_serial;
        let (answer, response) = oneshot::channel();
        calls.by_id.insert(
            correlation_id.to_owned(),
            Waiting { serial, thing_id: thing_id.clone(), answer },
        );
        Ok(Registered { serial, response })
    }

    /// Hands `response` to the call waiting for `correlation_id` about
    /// `thing_id`; `false` when none is (answered already, timed out, or
    /// never sent), as Ditto drops a live response nobody waits for.
    pub fn answer(&self, correlation_id: &str, thing_id: &ThingId, response: Envelope) -> bool {
        let mut calls = self.calls.lock();
        if calls.by_id.get(correlation_id).is_none_or(|waiting| waiting.thing_id != *thing_id) {
            return false;
        }
        let Some(waiting) = calls.by_id.remove(correlation_id) else { return false };
        drop(calls);
        waiting.answer.send(response).is_ok()
    }

    /// Ends registration `serial` of `correlation_id`, if it still waits.
    pub fn forget(&self, correlation_id: &str, serial: u64) {
        let mut calls = self.calls.lock();
        if calls.by_id.get(correlation_id).is_some_and(|waiting| waiting.serial == serial) {
            calls.by_id.remove(correlation_id);
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.calls.lock().by_id.len()
    }
}

/// What became of a persistent message.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Sent; neither answered nor past its TTL.
    Pending,
    /// The device's response (or error response).
    Answered(Box<Envelope>),
    /// The TTL passed without a response.
    Expired,
    /// The acknowledgements it requested, settled (all in, or the TTL
    /// passed), with their combined status; `live-response` among them
    /// when a response was required too.
    Acknowledged { status: u16, acks: Vec<crate::acks::Ack> },
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub thing_id: ThingId,
    /// Whose message it is: only the same subjects may poll it.
    pub subjects: Vec<String>,
    pub state: State,
    forget_at: Instant,
}

#[derive(Default)]
pub struct Outcomes {
    entries: Mutex<OutcomeMap>,
}

#[derive(Default)]
struct OutcomeMap {
    by_id: HashMap<String, Outcome>,
    /// Ids in the order they were sent, for evicting the oldest.
    order: VecDeque<String>,
}

impl Outcomes {
    /// Records a persistent message just sent, to be forgotten
    /// `OUTCOME_KEPT` after its TTL at the latest.
    pub fn sent(
        &self,
        correlation_id: &str,
        thing_id: &ThingId,
        subjects: &[String],
        ttl: Duration,
    ) {
        let mut map = self.entries.lock();
        let now = Instant::now();
        map.forget_expired(now);
        while map.by_id.len() >= MAX_OUTCOMES {
            let Some(oldest) = map.order.pop_front() else { break };
            map.by_id.remove(&oldest);
        }
        let outcome = Outcome {
            thing_id: thing_id.clone(),
            subjects: subjects.to_vec(),
            state: State::Pending,
            forget_at: now + ttl + OUTCOME_KEPT,
        };
        if map.by_id.insert(correlation_id.to_owned(), outcome).is_none() {
            map.order.push_back(correlation_id.to_owned());
        }
    }

    /// Records how a persistent message ended.
    pub fn settle(&self, correlation_id: &str, state: State) {
        let mut map = self.entries.lock();
        if let Some(outcome) = map.by_id.get_mut(correlation_id) {
            outcome.state = state;
            outcome.forget_at = Instant::now() + OUTCOME_KEPT;
        }
    }

    /// The outcome of `correlation_id`, if it is still known.
    pub fn get(&self, correlation_id: &str) -> Option<Outcome> {
        let mut map = self.entries.lock();
        map.forget_expired(Instant::now());
        map.by_id.get(correlation_id).filter(|outcome| outcome.forget_at > Instant::now()).cloned()
    }
}

impl OutcomeMap {
    /// Forgets the expired outcomes at the front: the order is of sending,
    /// not of expiry, so an expired one behind a live one waits for it
    /// (and `get` hides it meanwhile); the count bound holds either way.
    fn forget_expired(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            match self.by_id.get(oldest) {
                Some(outcome) if outcome.forget_at > now => return,
                _ => {
                    let oldest = self.order.pop_front().expect("front exists");
                    self.by_id.remove(&oldest);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thing(name: &str) -> ThingId {
        ThingId::parse(&format!("org.acme:{name}")).unwrap()
    }

    fn response(status: u16) -> Envelope {
        let mut envelope = Envelope::new("org.acme/a/things/live/messages/x", "/inbox/messages/x");
        envelope.status = Some(status);
        envelope
    }

    #[test]
    fn a_response_reaches_the_call_with_its_correlation_id_and_thing() {
        let pending = Pending::default();
        let mut first = pending.register("c1", &thing("a")).unwrap();
        let mut second = pending.register("c2", &thing("a")).unwrap();
        assert!(!pending.answer("c1", &thing("b"), response(200)), "another thing's response");
        assert!(!pending.answer("c3", &thing("a"), response(200)), "nobody waits for c3");
        assert!(pending.answer("c2", &thing("a"), response(201)));
        assert_eq!(second.response.try_recv().unwrap().status, Some(201));
        assert!(first.response.try_recv().is_err());
        assert!(!pending.answer("c2", &thing("a"), response(200)), "answered once only");
        assert_eq!(pending.len(), 1);
    }

    #[test]
    fn a_correlation_id_waits_once_and_is_free_again_after() {
        let pending = Pending::default();
        let old = pending.register("c", &thing("a")).unwrap();
        assert_eq!(pending.register("c", &thing("a")).unwrap_err().error, "header.invalid");
        assert!(pending.answer("c", &thing("a"), response(204)));
        let new = pending.register("c", &thing("a")).unwrap();
        pending.forget("c", old.serial);
        assert_eq!(pending.len(), 1, "the old call's clean-up leaves the new one");
        pending.forget("c", new.serial);
        assert_eq!(pending.len(), 0);
    }

    #[test]
    fn the_table_is_bounded() {
        let pending = Pending::default();
        let held: Vec<_> = (0..MAX_PENDING)
            .map(|i| pending.register(&format!("c{i}"), &thing("a")).unwrap())
            .collect();
        let refused = pending.register("one-more", &thing("a")).unwrap_err();
        assert_eq!((refused.status, refused.error), (429, "too.many.requests"));
        pending.forget("c0", held[0].serial);
        assert!(pending.register("one-more", &thing("a")).is_ok());
    }

    #[test]
    fn outcomes_are_bounded_and_settled() {
        let outcomes = Outcomes::default();
        let subjects = vec!["nginx:alice".to_owned()];
        for i in 0..=MAX_OUTCOMES {
            outcomes.sent(&format!("c{i}"), &thing("a"), &subjects, Duration::from_secs(60));
        }
        assert!(outcomes.get("c0").is_none(), "the oldest was forgotten");
        assert_eq!(outcomes.get("c1").unwrap().state, State::Pending);
        outcomes.settle("c1", State::Answered(Box::new(response(200))));
        assert_eq!(outcomes.get("c1").unwrap().state, State::Answered(Box::new(response(200))));
        outcomes.settle("c2", State::Expired);
        assert_eq!(outcomes.get("c2").unwrap().state, State::Expired);
    }

    #[test]
    fn outcomes_expire() {
        let outcomes = Outcomes::default();
        outcomes.sent("c", &thing("a"), &[], Duration::ZERO);
        outcomes.entries.lock().by_id.get_mut("c").unwrap().forget_at = Instant::now();
        assert!(outcomes.get("c").is_none());
        assert!(outcomes.entries.lock().order.is_empty());
    }
}
