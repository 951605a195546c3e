//! What is due when: for every subject of a policy with an `expiry` or an
//! `announcement`, the instant it is announced (`beforeExpiry` before its
//! expiry, up to `randomizationInterval` earlier) and the instant it
//! expires. Pure bookkeeping, as Ditto's `PolicyAnnouncementManager` and
//! its `SubjectExpiryActor`s keep it; `announcements.rs` does what falls
//! due.
//!
//! A subject is one `(policy, subject id)`. When a policy changes, a
//! subject whose settings are unchanged keeps its plan, a changed one is
//! planned afresh, and one no longer there (nor with any expiry or
//! announcement) counts as deleted: with `whenDeleted` it is announced at
//! once, unless it was announced before.

use crate::policy::{Policy, Subject, Timestamp};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// Subjects planned at most. Each plan is a few hundred bytes; past the
/// bound a subject's expiry still takes effect (the enforcer ignores an
/// expired subject) but it is neither announced nor removed from its
/// policy, and a warning says so.
pub const MAX_PLANS: usize = 100_000;

/// Something due now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Tell `subject` it is deleted at `delete_at` (its expiry, or now
    /// when it was deleted).
    Announce { policy_id: String, subject: Subject, delete_at: Timestamp },
    /// The subject expired: remove it from its policy.
    Expire { policy_id: String, subject_id: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Announce,
    Expire,
}

#[derive(Debug)]
struct Plan {
    subject: Subject,
    announce_at: Option<Timestamp>,
    /// An announcement went out (or is going out, with its retries): the
    /// deletion is not announced again.
    announced: bool,
}

#[derive(Default)]
pub struct Agenda {
    /// Policy id → subject id → plan.
    plans: HashMap<String, HashMap<String, Plan>>,
    planned: usize,
    timeline: BTreeSet<(Timestamp, Stage, String, String)>,
    /// Whether the bound was met (and said) since it last had room.
    full: bool,
}

impl Agenda {
    /// Takes the policy as it is now (`None`: deleted) and returns what
    /// is due at once: the announcements of deleted subjects.
    /// `earlier_by` picks how much earlier than `beforeExpiry` to announce
    /// within a randomization interval.
    pub fn policy_changed(
        &mut self,
        policy_id: &str,
        policy: Option<&Policy>,
        now: Timestamp,
        earlier_by: &mut dyn FnMut(Duration) -> Duration,
    ) -> Vec<Due> {
        let current = policy.map(timed_subjects).unwrap_or_default();
        let mut due = Vec::new();
        let mut plans = self.plans.remove(policy_id).unwrap_or_default();
        plans.retain(|subject_id, plan| {
            if current.get(subject_id.as_str()) == Some(&&plan.subject) {
                return true;
            }
            self.unschedule(policy_id, subject_id, plan);
            self.planned -= 1;
            let deleted = !current.contains_key(subject_id.as_str());
            let when_deleted = plan.subject.announcement.as_ref().is_some_and(|a| a.when_deleted);
            if deleted && when_deleted && !plan.announced {
                due.push(Due::Announce {
                    policy_id: policy_id.to_owned(),
                    subject: plan.subject.clone(),
                    delete_at: now,
                });
            }
            false
        });
        for (subject_id, subject) in current {
            if plans.contains_key(subject_id) {
                continue;
            }
            if self.planned >= MAX_PLANS {
                if !self.full {
                    tracing::warn!(
                        max = MAX_PLANS,
                        "policy subjects with an expiry or announcement past the bound: their expiry still counts, but they are neither announced nor removed from their policies"
                    );
                    self.full = true;
                }
                break;
            }
            let plan = self.plan(policy_id, subject.clone(), earlier_by);
            plans.insert(subject_id.to_owned(), plan);
            self.planned += 1;
        }
        self.full &= self.planned >= MAX_PLANS;
        if !plans.is_empty() {
            self.plans.insert(policy_id.to_owned(), plans);
        }
        due
    }

    /// The next instant something falls due.
    pub fn next(&self) -> Option<Timestamp> {
        self.timeline.first().map(|(at, ..)| *at)
    }

    /// Everything due at `now`, in order.
    pub fn take_due(&mut self, now: Timestamp) -> Vec<Due> {
        let mut due = Vec::new();
        while let Some((at, ..)) = self.timeline.first() {
            if *at > now {
                break;
            }
            let Some((at, stage, policy_id, subject_id)) = self.timeline.pop_first() else {
                break;
            };
            let Some(plan) = self.plans.get_mut(&policy_id).and_then(|p| p.get_mut(&subject_id))
            else {
                continue;
            };
            match stage {
                Stage::Announce => {
                    plan.announced = true;
                    let delete_at = plan.subject.expiry.unwrap_or(at);
                    due.push(Due::Announce { policy_id, subject: plan.subject.clone(), delete_at });
                }
                Stage::Expire => due.push(Due::Expire { policy_id, subject_id }),
            }
        }
        due
    }

    /// Tries an expiry again at `at`: removing the subject failed.
    pub fn expire_again(&mut self, policy_id: &str, subject_id: &str, at: Timestamp) {
        if self.plans.get(policy_id).is_some_and(|plans| plans.contains_key(subject_id)) {
            self.timeline.insert((at, Stage::Expire, policy_id.to_owned(), subject_id.to_owned()));
        }
    }

    /// Subjects planned now.
    pub fn len(&self) -> usize {
        self.planned
    }

    fn plan(
        &mut self,
        policy_id: &str,
        subject: Subject,
        earlier_by: &mut dyn FnMut(Duration) -> Duration,
    ) -> Plan {
        let announcement = subject.announcement.as_ref();
        let announce_at = match (subject.expiry, announcement.and_then(|a| a.before_expiry)) {
            (Some(expiry), Some(before)) => {
                let spread = announcement
                    .and_then(|a| a.randomization_interval)
                    .map_or(Duration::ZERO, |interval| earlier_by(interval.as_duration()));
                Some(expiry.minus(before.as_duration()).minus(spread))
            }
            _ => None,
        };
        let key = |stage, at| (at, stage, policy_id.to_owned(), subject.id.to_string());
        if let Some(at) = announce_at {
            self.timeline.insert(key(Stage::Announce, at));
        }
        if let Some(expiry) = subject.expiry {
            self.timeline.insert(key(Stage::Expire, expiry));
        }
        Plan { subject, announce_at, announced: false }
    }

    fn unschedule(&mut self, policy_id: &str, subject_id: &str, plan: &Plan) {
        let key = |stage, at| (at, stage, policy_id.to_owned(), subject_id.to_owned());
        if let Some(at) = plan.announce_at {
            self.timeline.remove(&key(Stage::Announce, at));
        }
        if let Some(expiry) = plan.subject.expiry {
            self.timeline.remove(&key(Stage::Expire, expiry));
        }
    }
}

/// The subjects of `policy` with an expiry or an announcement, by id:
/// the first entry's settings where several entries name one.
fn timed_subjects(policy: &Policy) -> HashMap<&str, &Subject> {
    let mut subjects = HashMap::new();
    for subject in policy.entries().flat_map(|entry| entry.subjects.iter()) {
        if subject.is_timed() {
            subjects.entry(subject.id.as_str()).or_insert(subject);
        }
    }
    subjects
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const POLICY: &str = "org.acme:lamp";

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_unix(seconds, 0)
    }

    /// A policy with an owner and `subjects` (id → subject JSON) in a
    /// second entry.
    fn policy(subjects: serde_json::Value) -> Policy {
        Policy::from_json(
            POLICY,
            &json!({"entries": {
                "owner": {
                    "subjects": {"nginx:owner": {"type": "owner"}},
                    "resources": {"policy:/": {"grant": ["READ", "WRITE"], "revoke": []}},
                },
                "guests": {
                    "subjects": subjects,
                    "resources": {"thing:/": {"grant": ["READ"], "revoke": []}},
                },
            }}),
        )
        .unwrap()
    }

    fn expiring(expiry: &str, announcement: serde_json::Value) -> serde_json::Value {
        json!({"type": "guest", "expiry": expiry, "announcement": announcement})
    }

    fn no_spread(_: Duration) -> Duration {
        Duration::ZERO
    }

    fn announced(due: &[Due]) -> Vec<(String, Timestamp)> {
        due.iter()
            .filter_map(|due| match due {
                Due::Announce { subject, delete_at, .. } => {
                    Some((subject.id.to_string(), *delete_at))
                }
                Due::Expire { .. } => None,
            })
            .collect()
    }

    #[test]
    fn announces_before_expiry_then_expires() {
        let mut agenda = Agenda::default();
        let guest = expiring("1970-01-01T01:00:00Z", json!({"beforeExpiry": "10m"}));
        let policy = policy(json!({"nginx:guest": guest}));
        assert!(agenda.policy_changed(POLICY, Some(&policy), at(0), &mut no_spread).is_empty());
        assert_eq!(agenda.len(), 1);
        assert_eq!(agenda.next(), Some(at(3000)));
        assert!(agenda.take_due(at(2999)).is_empty());
        assert_eq!(announced(&agenda.take_due(at(3000))), [("nginx:guest".to_owned(), at(3600))]);
        assert_eq!(agenda.next(), Some(at(3600)));
        assert_eq!(
            agenda.take_due(at(3600)),
            [Due::Expire { policy_id: POLICY.to_owned(), subject_id: "nginx:guest".to_owned() }]
        );
        // Removed from the policy: announced already, so not again.
        let without = self::policy(json!({"nginx:other": {"type": "guest"}}));
        assert!(agenda.policy_changed(POLICY, Some(&without), at(3600), &mut no_spread).is_empty());
        assert_eq!((agenda.len(), agenda.next()), (0, None));
    }

    #[test]
    fn a_deleted_subject_is_announced_at_once_when_it_asks_and_was_not_before() {
        let mut agenda = Agenda::default();
        let subjects = json!({
            "nginx:told": expiring("1970-01-01T01:00:00Z", json!({"whenDeleted": true})),
            "nginx:quiet": expiring("1970-01-01T01:00:00Z", json!({"whenDeleted": false})),
        });
        agenda.policy_changed(POLICY, Some(&policy(subjects)), at(0), &mut no_spread);
        let due = agenda.policy_changed(POLICY, None, at(60), &mut no_spread);
        assert_eq!(announced(&due), [("nginx:told".to_owned(), at(60))]);
        assert_eq!((agenda.len(), agenda.next()), (0, None));
    }

    #[test]
    fn a_changed_subject_is_planned_afresh_and_not_announced() {
        let mut agenda = Agenda::default();
        let announcement = json!({"beforeExpiry": "1m", "whenDeleted": true});
        let first =
            policy(json!({"nginx:guest": expiring("1970-01-01T01:00:00Z", announcement.clone())}));
        agenda.policy_changed(POLICY, Some(&first), at(0), &mut no_spread);
        let later = policy(json!({"nginx:guest": expiring("1970-01-01T02:00:00Z", announcement)}));
        assert!(agenda.policy_changed(POLICY, Some(&later), at(10), &mut no_spread).is_empty());
        assert_eq!((agenda.len(), agenda.next()), (1, Some(at(7140))));
        // The same policy again changes nothing.
        assert!(agenda.policy_changed(POLICY, Some(&later), at(20), &mut no_spread).is_empty());
        assert_eq!((agenda.len(), agenda.next()), (1, Some(at(7140))));
    }

    #[test]
    fn a_randomization_interval_moves_the_announcement_earlier() {
        let mut agenda = Agenda::default();
        let announcement = json!({"beforeExpiry": "10m", "randomizationInterval": "5m"});
        let policy = policy(json!({"nginx:guest": expiring("1970-01-01T01:00:00Z", announcement)}));
        let mut spread = |interval: Duration| {
            assert_eq!(interval, Duration::from_secs(300));
            Duration::from_secs(120)
        };
        agenda.policy_changed(POLICY, Some(&policy), at(0), &mut spread);
        assert_eq!(agenda.next(), Some(at(2880)));
    }

    #[test]
    fn an_expiry_tried_again_falls_due_again() {
        let mut agenda = Agenda::default();
        let policy =
            policy(json!({"nginx:guest": {"type": "guest", "expiry": "1970-01-01T01:00:00Z"}}));
        agenda.policy_changed(POLICY, Some(&policy), at(0), &mut no_spread);
        assert_eq!(agenda.take_due(at(3600)).len(), 1);
        assert_eq!(agenda.next(), None);
        agenda.expire_again(POLICY, "nginx:guest", at(3660));
        assert_eq!(agenda.take_due(at(3660)).len(), 1);
        agenda.expire_again("org.acme:unknown", "nginx:guest", at(3720));
        assert_eq!(agenda.next(), None);
    }
}
