//! Policy announcements and subject expiry, as Ditto's policies service
//! does them (`PolicyAnnouncementManager`, `SubjectExpiryActor`):
//!
//! - a subject whose `expiry` passes is removed from its policy (the
//!   enforcer stops counting it at that instant already);
//! - a subject with `announcement.beforeExpiry` is told, that long before
//!   its expiry, with Ditto's `SubjectDeletionAnnouncement`
//!   (`{ns}/{name}/policies/announcements/subjectDeletion`, value
//!   `{deleteAt, subjectIds}`);
//! - one with `announcement.whenDeleted` is told when it is deleted (by a
//!   write, with its policy, or at expiry), unless it was told before;
//! - the announcement goes to the WebSocket sessions that sent
//!   `START-SEND-POLICY-ANNOUNCEMENTS` and the connection targets with the
//!   topic `_/_/policies/announcements` whose subjects include the
//!   announced one (`live.rs` holds both);
//! - with `requestedAcks`, it waits for those acknowledgements and is sent
//!   again after a back-off (1 s doubling to 1 h, Ditto's) while one
//!   fails with 408, 424 or 5xx, until four hours past the deletion
//!   (Ditto's grace period).
//!
//! The agenda (`agenda.rs`) is kept in memory: read from the store at
//! start (the policies whose JSON names an `expiry` or `announcement`),
//! then told of every policy this Ferry writes. As after a restart of
//! Ditto's policy actor, an announcement whose time passed while Ferry
//! was down is sent at start.

mod agenda;

pub use agenda::MAX_PLANS;

use crate::acks::{weak_ack, EventAcks};
use crate::policy::{Policy, Subject, Timestamp};
use crate::protocol::Envelope;
use crate::service::Twins;
use agenda::{Agenda, Due};
use parking_lot::Mutex;
use serde_json::json;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Ditto's `policies.announcement.grace-period`: how long after its
/// subject's deletion an announcement whose acknowledgements failed is
/// still sent again.
const GRACE_PERIOD: Duration = Duration::from_secs(4 * 3600);

/// Ditto's announcement back-off (`exponential-backoff.min`, `.max`).
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(3600);

/// Ditto's `policies.announcement.max-timeout`: one sending waits at most
/// this long for its acknowledgements (also the default).
const ACK_TIMEOUT_MAX: Duration = Duration::from_secs(60);

/// How soon a subject whose removal failed (the store was away) is tried
/// again.
const EXPIRE_RETRY: Duration = Duration::from_secs(60);

/// Policies read at a time while the agenda is filled at start.
const LOAD_PAGE: usize = 500;

/// Announcements being sent at once, each with its retries: one waiting
/// out its back-off holds a task for up to the grace period. Past the
/// bound an announcement is dropped with a warning.
const MAX_ANNOUNCING: usize = 10_000;

/// The agenda, and what fell due at once (deleted subjects' announcements)
/// for the runner to send.
#[derive(Default)]
pub struct Announcements {
    agenda: Mutex<Agenda>,
    ready: Mutex<Vec<Due>>,
    changed: tokio::sync::Notify,
    sent: AtomicU64,
    announcing: Arc<AtomicUsize>,
}

/// One of the [`MAX_ANNOUNCING`] announcements in flight, given back
/// when its task ends.
struct Announcing(Arc<AtomicUsize>);

impl Drop for Announcing {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Announcements {
    /// Subjects with an expiry or announcement being watched, for metrics.
    pub fn planned(&self) -> usize {
        self.agenda.lock().len()
    }

    /// Announcements sent, each sending again counted, for metrics.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

impl Twins {
    /// Tells the agenda that `policy_id` is now `policy` (`None`:
    /// deleted), after the write committed.
    pub(crate) fn policy_changed(&self, policy_id: &str, policy: Option<&Policy>) {
        let announcements = self.announcements();
        let due = announcements.agenda.lock().policy_changed(
            policy_id,
            policy,
            Timestamp::now(),
            &mut random_part,
        );
        announcements.ready.lock().extend(due);
        announcements.changed.notify_one();
    }

    /// Removes expired subjects and sends announcements as they fall due,
    /// until the service closes.
    pub async fn run_announcements(self: Arc<Self>) {
        let mut closing = self.closing();
        if let Err(error) = self.load_agenda().await {
            tracing::error!(%error, "policy subjects with an expiry or announcement not read: none are announced or removed until a restart");
        }
        let announcements = self.announcements();
        loop {
            let now = Timestamp::now();
            let mut due = std::mem::take(&mut *announcements.ready.lock());
            due.extend(announcements.agenda.lock().take_due(now));
            for due in due {
                match due {
                    Due::Announce { policy_id, subject, delete_at } => {
                        let announcing = announcements.announcing.clone();
                        if announcing.fetch_add(1, Ordering::Relaxed) >= MAX_ANNOUNCING {
                            announcing.fetch_sub(1, Ordering::Relaxed);
                            tracing::warn!(policy = %policy_id, subject = %subject.id, max = MAX_ANNOUNCING, "policy announcement dropped: too many being sent");
                            continue;
                        }
                        let slot = Announcing(announcing);
                        let twins = self.clone();
                        tokio::spawn(async move {
                            let _slot = slot;
                            twins.announce_deletion(policy_id, subject, delete_at).await;
                        });
                    }
                    Due::Expire { policy_id, subject_id } => {
                        self.expire(&policy_id, &subject_id).await;
                    }
                }
            }
            let next = announcements.agenda.lock().next();
            // A day at most, so that a clock set forward is noticed.
            let wait =
                next.map_or(Duration::MAX, |at| now.until(at)).min(Duration::from_secs(86_400));
            tokio::select! {
                _ = closing.wait_for(|&closed| closed) => return,
                _ = announcements.changed.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Fills the agenda from the store: every policy whose JSON names an
    /// `expiry` or an `announcement`, a page at a time.
    async fn load_agenda(&self) -> Result<(), crate::store::StoreError> {
        let mut after = String::new();
        loop {
            let page = self.store().policies_with_timed_subjects(&after, LOAD_PAGE).await?;
            let Some(last) = page.last() else { return Ok(()) };
            after = last.id.clone();
            for record in &page {
                // Written since the page was read: the write told the
                // agenda of a newer revision already.
                if self.cached_policy_revision(&record.id).is_some_and(|r| r > record.revision) {
                    continue;
                }
                match crate::service::policy_of(record) {
                    Ok(policy) => self.policy_changed(&record.id, Some(&policy)),
                    Err(error) => {
                        tracing::warn!(policy = %record.id, error = %error.message, "stored policy not readable: its subjects are not announced")
                    }
                }
            }
        }
    }

    /// Removes the expired `subject_id` from its policy; tried again a
    /// minute later when that fails.
    async fn expire(&self, policy_id: &str, subject_id: &str) {
        match self.remove_expired_subjects(policy_id).await {
            Ok(()) => {}
            Err(error) => {
                tracing::warn!(policy = policy_id, error = %error.message, "expired policy subject not removed; trying again in a minute");
                let again = Timestamp::now().plus(EXPIRE_RETRY);
                self.announcements().agenda.lock().expire_again(policy_id, subject_id, again);
                self.announcements().changed.notify_one();
            }
        }
    }

    /// Sends `subject`'s deletion announcement, again after a back-off
    /// while its requested acknowledgements fail, within the grace period.
    async fn announce_deletion(
        self: Arc<Self>,
        policy_id: String,
        subject: Subject,
        delete_at: Timestamp,
    ) {
        let Some(settings) = subject.announcement.clone() else { return };
        let Some((namespace, name)) = policy_id.split_once(':') else { return };
        let subject_ids = [subject.id.to_string()];
        // Ditto's `isInGracePeriod`: from the expiry, else the deletion.
        let give_up_at = subject.expiry.unwrap_or(delete_at).plus(GRACE_PERIOD);
        let timeout = settings
            .requested_acks_timeout
            .map_or(ACK_TIMEOUT_MAX, |timeout| timeout.as_duration().min(ACK_TIMEOUT_MAX));
        let mut closing = self.closing();
        let mut backoff = BACKOFF_MIN;
        loop {
            let correlation_id = crate::id::random_uuid();
            let mut envelope = Envelope::new(
                format!("{namespace}/{name}/policies/announcements/subjectDeletion"),
                "/",
            );
            envelope.headers = crate::acks::correlation_headers(&correlation_id);
            envelope.value = Some(json!({
                "deleteAt": delete_at.to_string(),
                "subjectIds": subject_ids,
            }));
            let acks = (!settings.requested_acks.is_empty()).then(|| EventAcks {
                correlation_id: correlation_id.clone(),
                labels: settings.requested_acks.clone(),
            });
            let waiter = match &acks {
                Some(acks) => {
                    envelope.headers.insert("requested-acks".into(), acks.labels.clone().into());
                    envelope.headers.insert("timeout".into(), header_duration(timeout).into());
                    self.ack_hub().expect(acks).ok()
                }
                None => None,
            };
            let not_got = self.live().announce(&envelope, namespace, &subject_ids, acks.as_ref());
            self.announcements().sent.fetch_add(1, Ordering::Relaxed);
            for label in not_got {
                self.ack_hub().deliver(&correlation_id, weak_ack(&label, &correlation_id));
            }
            let failed = match (&acks, waiter) {
                (None, _) => return,
                // The hub is full: as a failed sending, tried again.
                (Some(_), None) => true,
                (Some(acks), Some(waiter)) => {
                    let received = waiter.collect(timeout).await;
                    acks.labels.iter().any(|label| {
                        received
                            .iter()
                            .find(|ack| ack.label == *label)
                            .is_none_or(|ack| to_be_sent_again(ack.status))
                    })
                }
            };
            if !failed {
                return;
            }
            if Timestamp::now().plus(backoff) >= give_up_at {
                tracing::warn!(policy = %policy_id, subject = %subject.id, "policy announcement not acknowledged within the grace period; given up");
                return;
            }
            tokio::select! {
                _ = closing.wait_for(|&closed| closed) => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }
}

/// Ditto's `requiresRedelivery`: a timeout, a failed dependency or a
/// server error.
fn to_be_sent_again(status: u16) -> bool {
    matches!(status, 408 | 424) || status >= 500
}

/// `duration` as a Ditto header writes it: seconds when whole.
fn header_duration(duration: Duration) -> String {
    match duration.subsec_millis() {
        0 => format!("{}s", duration.as_secs()),
        _ => format!("{}ms", duration.as_millis()),
    }
}

/// A random part of `interval`, to spread announcements.
fn random_part(interval: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return Duration::ZERO;
    }
    let millis = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(u64::from_le_bytes(bytes) % millis.saturating_add(1))
}
