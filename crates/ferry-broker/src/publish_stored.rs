//! Publishing a message that comes from outside any client session (the
//! cloud-to-device direction of an MQTT uplink, in `ferry-routes`) and
//! learning when the durable log has it, so that the remote's PUBACK can
//! wait for it exactly as a local client's does.
//!
//! The publish path (`Broker::publish`) tells nobody when its record is
//! stored. Rather than thread a second kind of answer through it, this
//! appends a record that changes nothing (a barrier) right behind the
//! message's: the log writer answers appends in the order they were made,
//! so when the barrier is answered the message's own answer has run. The
//! barrier costs a record of a few bytes per inbound message; commands
//! are rare next to telemetry.

use crate::broker::Broker;
use crate::durable::record::Record;
use crate::message::Message;
use ferry_mqtt::ReasonCode;
use tokio::sync::oneshot;

impl Broker {
    /// Publishes `message` as the broker's own (there is no publisher to
    /// slow down) and answers once it is stored as the fsync policy says:
    /// `Success`, or the reason code to refuse it with — `QuotaExceeded`
    /// when the disk limits refuse new work, `UnspecifiedError` when the
    /// log failed. With durability off it answers `Success` at once:
    /// nothing is ever stored then, as for a client's publish.
    ///
    /// Refusals err on the safe side: the publish path does not say which
    /// message it refused, so a refusal counted (`refused_disk_full`,
    /// `store_failures`) by another publisher in between refuses this one
    /// too. Both happen only when the disk is full or failing, when
    /// refusing is right anyway, and the sender may send it again.
    pub fn publish_stored(&self, message: Message) -> oneshot::Receiver<ReasonCode> {
        let store = match &self.store {
            Some(store) if !message.topic.starts_with("$SYS") => store,
            // `$SYS` is never stored (see `publish_with`): nothing to wait for.
            _ => {
                self.publish(message);
                return answered_now(ReasonCode::Success);
            }
        };
        if !store.has_room() {
            self.stats.refused_disk_full.inc();
            return answered_now(ReasonCode::QuotaExceeded);
        }
        let refused_before = self.stats.refused_disk_full.get();
        let failures_before = self.stats.store_failures.get();
        // Appends the message's record (when anything needs it stored)
        // before it returns, so the barrier below lands behind it.
        self.publish(message);
        if self.stats.refused_disk_full.get() != refused_before {
            return answered_now(ReasonCode::QuotaExceeded);
        }
        let (answer, answered) = oneshot::channel();
        let me = self.me();
        let barrier = Record::Forwarded { endpoint: String::new(), offsets: Vec::new() };
        store.append(barrier, move |result| {
            // A failed append is counted by its own answer, which ran
            // before this one.
            let failed = me
                .upgrade()
                .is_none_or(|broker| broker.stats.store_failures.get() != failures_before);
            let reason = if result.is_err() || failed {
                ReasonCode::UnspecifiedError
            } else {
                ReasonCode::Success
            };
            // The caller may have gone (its connection closed): then
            // nobody waits for the answer.
            let _ = answer.send(reason);
        });
        answered
    }
}

fn answered_now(reason: ReasonCode) -> oneshot::Receiver<ReasonCode> {
    let (answer, answered) = oneshot::channel();
    let _ = answer.send(reason);
    answered
}
