//! The broker's side of authorization: the ACL in force (replaceable while
//! running, for reloads) and the three questions the broker asks it — may
//! this client publish here, subscribe to this, receive this message.
//!
//! With no ACL every client may do everything, and the publish path pays
//! one relaxed load of a flag for the question.

use crate::broker::Broker;
use crate::durable::record::Record;
use crate::session::Session;
use ferry_auth::{Acl, Principal, SubscribeVerdict};
use ferry_mqtt::ByteStr;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub(crate) struct Authorization {
    /// Whether `acl` holds one: read on every publish, so a flag that
    /// never changes under load rather than the lock's shared counter.
    active: AtomicBool,
    acl: RwLock<Option<Arc<Acl>>>,
}

impl Broker {
    /// The ACL from now on (`None`: everything allowed). Subscriptions
    /// already made stay until their client reconnects; messages to those
    /// that may only receive part of their filter are checked against the
    /// new rules at once.
    pub fn set_acl(&self, acl: Option<Acl>) {
        let mut current = self.authorization.acl.write();
        self.authorization.active.store(acl.is_some(), Ordering::Release);
        *current = acl.map(Arc::new);
    }

    pub(crate) fn has_acl(&self) -> bool {
        self.authorization.active.load(Ordering::Relaxed)
    }

    fn acl(&self) -> Option<Arc<Acl>> {
        if !self.authorization.active.load(Ordering::Acquire) {
            return None;
        }
        self.authorization.acl.read().clone()
    }

    pub(crate) fn may_publish(&self, principal: &Principal, topic: &str) -> bool {
        self.acl().is_none_or(|acl| acl.may_publish(principal, topic))
    }

    pub(crate) fn may_subscribe(&self, principal: &Principal, filter: &str) -> SubscribeVerdict {
        self.acl().map_or(SubscribeVerdict::Allowed, |acl| acl.may_subscribe(principal, filter))
    }

    /// Whether a subscriber granted only part of its filter may receive a
    /// message on `topic`. Without an ACL (removed by a reload) it may.
    pub(crate) fn may_receive(&self, reader: &Principal, topic: &str) -> bool {
        self.acl().is_none_or(|acl| acl.may_receive(reader, topic))
    }
}

impl Broker {
    /// Checks a resumed session's subscriptions against the ACL for the
    /// client now connected: a client id taken over by another user must
    /// not inherit subscriptions the ACL would refuse that user. Refused
    /// ones are removed (and the removal stored); the rest are marked for
    /// per-message checks as the ACL now says.
    pub(crate) fn recheck_subscriptions(&self, session: &Arc<Session>, principal: &Arc<Principal>) {
        let Some(acl) = self.acl() else { return };
        let filters: Vec<ByteStr> = session.lock().subscriptions.iter().cloned().collect();
        let mut refused = Vec::new();
        {
            let mut tree = self.subscriptions.write();
            for filter in filters {
                let verdict = acl.may_subscribe(principal, &filter);
                let Some(mut subscription) = tree.remove(&filter, &session.id) else { continue };
                match verdict {
                    SubscribeVerdict::Denied => refused.push(filter),
                    SubscribeVerdict::Allowed | SubscribeVerdict::Filtered => {
                        subscription.reader =
                            (verdict == SubscribeVerdict::Filtered).then(|| principal.clone());
                        tree.insert(&filter, session.id, subscription);
                    }
                }
            }
        }
        if refused.is_empty() {
            return;
        }
        let mut state = session.lock();
        for filter in &refused {
            state.subscriptions.remove(filter);
        }
        drop(state);
        tracing::info!(
            client_id = %session.client_id,
            filters = ?refused.iter().map(ByteStr::as_str).collect::<Vec<_>>(),
            "subscriptions the ACL refuses this client removed from its session"
        );
        if let Some(store) = self.store_for(session) {
            let filters = refused.iter().map(ToString::to_string).collect();
            store.note(Record::Unsubscribed { session: session.id, filters });
        }
    }
}
