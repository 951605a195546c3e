//! The commands of one source reader in flight at once: applied side by
//! side, so that a reader fills the store's group commit rather than
//! waiting for one commit per message, yet finished in the order their
//! messages came (a Kafka offset is stored, an MQTT PUBACK sent, only
//! once everything before it is done, as MQTT requires PUBACKs in order).
//! Two commands for the same entity never run side by side: the later
//! waits for the earlier, so a thing's changes land in the order they
//! were sent.

use futures_util::stream::{FuturesOrdered, StreamExt};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

/// Commands one reader has on their way at once: enough to fill a group
/// commit of the store (a few dozen writes share one fsync), few enough
/// that a reader holds at most this many messages beyond its transport's
/// own bounded buffer.
pub const IN_FLIGHT: usize = 64;

type Applying<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The commands in flight, in the order their messages came, with the
/// entity of each (a scan of at most `IN_FLIGHT`, cheaper than a map kept
/// in step).
pub struct Window<'a, T> {
    applying: FuturesOrdered<Applying<'a, T>>,
    entities: VecDeque<Option<String>>,
}

impl<'a, T> Default for Window<'a, T> {
    fn default() -> Self {
        Window { applying: FuturesOrdered::new(), entities: VecDeque::new() }
    }
}

impl<'a, T> Window<'a, T> {
    pub fn is_empty(&self) -> bool {
        self.applying.is_empty()
    }

    /// Whether another command may start.
    pub fn has_room(&self) -> bool {
        self.applying.len() < IN_FLIGHT
    }

    /// The earliest command's result, once it is done (`None` when none
    /// is in flight).
    pub async fn next(&mut self) -> Option<T> {
        let done = self.applying.next().await?;
        self.entities.pop_front();
        Some(done)
    }

    /// Whether a command for `entity` is in flight: the next one for it
    /// waits until it is not.
    pub fn holds(&self, entity: &Option<String>) -> bool {
        entity.is_some() && self.entities.contains(entity)
    }

    /// Starts `applying`, the command of a message for `entity`; the caller
    /// has made sure the window has room and does not hold the entity.
    pub fn push(&mut self, entity: Option<String>, applying: impl Future<Output = T> + Send + 'a) {
        self.entities.push_back(entity);
        self.applying.push_back(Box::pin(applying));
    }
}

/// The entity id in a Ditto protocol message's topic, read without
/// parsing the rest (the command parses it in full). An acknowledgement
/// has none: it changes nothing, and the command of its entity may be
/// the one waiting for it (a source's `acknowledgementRequests`).
pub fn entity_of(payload: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct TopicOnly<'a> {
        #[serde(borrow)]
        topic: std::borrow::Cow<'a, str>,
    }
    let only: TopicOnly<'_> = serde_json::from_slice(payload).ok()?;
    let topic = crate::protocol::Topic::parse(&only.topic).ok()?;
    if crate::protocol::acks::is_ack(&topic) {
        return None;
    }
    topic.entity_id()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn results_come_in_order_and_one_entity_waits_for_its_earlier_command() {
        let mut window = Window::default();
        let (first_done, first) = oneshot::channel::<()>();
        window.push(Some("ns:a".to_owned()), async move {
            first.await.unwrap();
            1
        });
        window.push(Some("ns:b".to_owned()), async { 2 });
        assert!(window.holds(&Some("ns:a".to_owned())));
        assert!(!window.holds(&Some("ns:c".to_owned())));
        assert!(!window.holds(&None), "a message without an entity waits for none");
        // The second is done, yet waits for the first.
        {
            let next = window.next();
            tokio::pin!(next);
            assert!(futures_util::poll!(next.as_mut()).is_pending());
        }
        first_done.send(()).unwrap();
        assert_eq!(window.next().await, Some(1));
        assert!(!window.holds(&Some("ns:a".to_owned())));
        assert_eq!(window.next().await, Some(2));
        assert_eq!(window.next().await, None);
    }

    #[test]
    fn the_entity_is_read_from_the_topic() {
        let modify = br#"{"topic":"org.acme/lamp-1/things/twin/commands/modify","value":1}"#;
        assert_eq!(entity_of(modify).as_deref(), Some("org.acme:lamp-1"));
        assert_eq!(entity_of(b"not json"), None);
        let ack = br#"{"topic":"org.acme/lamp-1/things/twin/acks/a:b","status":200}"#;
        assert_eq!(entity_of(ack), None);
    }
}
