//! The broker's side of authorization: the ACL in force (replaceable while
//! running, for reloads) and the three questions the broker asks it — may
//! this client publish here, subscribe to this, receive this message.
//!
//! With no ACL every client may do everything, and the publish path pays
//! one relaxed load of a flag for the question.

use ferry_auth::{Acl, Principal, SubscribeVerdict};
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

impl Authorization {
    /// The ACL from now on (`None`: everything allowed). Subscriptions
    /// already made stay until their client reconnects; messages to those
    /// that may only receive part of their filter are checked against the
    /// new rules at once.
    pub(crate) fn set(&self, acl: Option<Acl>) {
        let mut current = self.acl.write();
        self.active.store(acl.is_some(), Ordering::Release);
        *current = acl.map(Arc::new);
    }

    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// The ACL in force, if any.
    pub(crate) fn acl(&self) -> Option<Arc<Acl>> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        self.acl.read().clone()
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
