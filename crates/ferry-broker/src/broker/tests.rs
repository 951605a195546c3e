//! The broker's own rules, called directly where a race between
//! connections decides them.

use super::*;
use crate::durable::DurabilityConfig;
use bytes::Bytes;

fn will(topic: &str) -> PendingWill {
    let message = Message::new(
        ByteStr::from(topic.to_string()),
        Bytes::from_static(b"gone"),
        QoS::AtLeastOnce,
        false,
        Default::default(),
        0,
    );
    PendingWill { message: Box::new(message), delay_secs: 1 }
}

/// A broker, a session subscribed to `will/#` whose queue shows what was
/// published, and the session of a device that is about to leave.
fn broker_watching_wills() -> (Arc<Broker>, Arc<Session>, Attached) {
    let broker = Broker::new(BrokerConfig::default());
    let observer = broker.attach(&Arc::from("observer"), true, 0).session;
    let options = SubscriptionOptions { qos: QoS::AtLeastOnce, ..Default::default() };
    broker.subscribe(&observer, &ByteStr::from("will/#"), options, None, None, None);
    let device = broker.attach(&Arc::from("device"), false, 30);
    (broker, observer, device)
}

#[tokio::test(start_paused = true)]
async fn a_delayed_will_left_after_a_new_connection_resumed_the_session_is_cancelled() {
    let (broker, watching, left) = broker_watching_wills();
    // The connection's socket broke; before its close reached the will, a
    // new connection resumed the session.
    let resumed = broker.attach(&left.session.client_id, false, 30);
    assert!(resumed.session_present);
    broker.delay_will(&left.session, left.generation, 30, will("will/device"));

    assert!(resumed.session.lock().take_will().is_none(), "not held by the resumed session");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(watching.lock().queue.is_empty(), "the will was published");
}

#[tokio::test(start_paused = true)]
async fn a_delayed_will_left_after_the_session_ended_is_published_at_once() {
    let (broker, watching, left) = broker_watching_wills();
    // A clean start ended the session before the close reached the will.
    broker.attach(&left.session.client_id, true, 30);
    broker.delay_will(&left.session, left.generation, 30, will("will/device"));

    let queue = &watching.lock().queue;
    assert_eq!(queue.len(), 1, "published without waiting out its delay");
    assert_eq!(&*queue.front().unwrap().message.topic, "will/device");
}

#[tokio::test(start_paused = true)]
async fn a_delayed_will_of_a_session_nobody_took_is_published_after_its_delay() {
    let (broker, watching, left) = broker_watching_wills();
    broker.delay_will(&left.session, left.generation, 30, will("will/device"));

    assert!(watching.lock().queue.is_empty(), "not before its delay");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(watching.lock().queue.len(), 1);
}

#[tokio::test]
async fn a_disconnect_recorded_after_a_new_connection_resumed_the_session_leaves_it_connected() {
    let dir = tempfile::tempdir().unwrap();
    let durability = DurabilityConfig::default();
    let broker = Broker::open(BrokerConfig::default(), &durability, dir.path()).unwrap();
    let device: Arc<str> = Arc::from("device");
    let left = broker.attach(&device, false, 30);
    // The old connection's close is recorded only after a new connection
    // resumed the session (and may have recorded that first).
    let resumed = broker.attach(&device, false, 30);
    broker.record_disconnect(&left.session, left.generation);
    broker.close_store();
    drop(broker);

    let ledger = crate::durable::recover(dir.path(), &durability).unwrap().ledger;
    let session = &ledger.sessions[&resumed.session.id];
    assert_eq!(session.disconnected_at_ms, None, "a restart would count it offline");
}
