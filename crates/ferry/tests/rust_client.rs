//! The real `ferry` binary driven by a Rust MQTT client (rumqttc), over
//! MQTT 3.1.1 and 5.0.

mod support;

use rumqttc::{AsyncClient, Event, EventLoop, MqttOptions, Packet, QoS};
use std::time::Duration;
use support::Ferry;

async fn next_publish(events: &mut EventLoop) -> rumqttc::Publish {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.poll()).await {
            Ok(Ok(Event::Incoming(Packet::Publish(publish)))) => return publish,
            Ok(Ok(_)) => {}
            Ok(Err(error)) => panic!("connection failed: {error}"),
            Err(_) => panic!("no PUBLISH within 5 s"),
        }
    }
}

#[tokio::test]
async fn mqtt311_qos1_and_retained_round_trip() {
    let ferry = Ferry::start("rust-client");
    let mut options = MqttOptions::new("rust-sub", "127.0.0.1", ferry.port);
    options.set_keep_alive(Duration::from_secs(30));
    let (subscriber, mut sub_events) = AsyncClient::new(options, 16);
    let (publisher, mut pub_events) =
        AsyncClient::new(MqttOptions::new("rust-pub", "127.0.0.1", ferry.port), 16);

    // The retained message must be stored before the subscription exists,
    // so wait for its PUBACK before subscribing.
    publisher.publish("plant/line1/state", QoS::AtLeastOnce, true, "running").await.unwrap();
    loop {
        if let Event::Incoming(Packet::PubAck(_)) =
            pub_events.poll().await.expect("publisher connected")
        {
            break;
        }
    }
    tokio::spawn(async move { while pub_events.poll().await.is_ok() {} });
    subscriber.subscribe("plant/+/state", QoS::AtLeastOnce).await.unwrap();
    let retained = next_publish(&mut sub_events).await;
    assert_eq!(retained.topic, "plant/line1/state");
    assert_eq!(&retained.payload[..], b"running");
    assert!(retained.retain, "a retained message sent on subscribe carries RETAIN");

    publisher.publish("plant/line2/state", QoS::AtLeastOnce, false, "stopped").await.unwrap();
    let live = next_publish(&mut sub_events).await;
    assert_eq!(live.topic, "plant/line2/state");
    assert_eq!(&live.payload[..], b"stopped");
    assert_eq!(live.qos, QoS::AtLeastOnce);
    assert!(!live.retain);
}

#[tokio::test]
async fn mqtt5_user_properties_and_correlation_data_are_forwarded() {
    use rumqttc::v5::mqttbytes::v5::{Packet as Packet5, PublishProperties};
    use rumqttc::v5::mqttbytes::QoS as QoS5;
    use rumqttc::v5::{AsyncClient as AsyncClient5, Event as Event5, MqttOptions as MqttOptions5};

    let ferry = Ferry::start("rust-client");
    let (subscriber, mut sub_events) =
        AsyncClient5::new(MqttOptions5::new("rust5-sub", "127.0.0.1", ferry.port), 16);
    let (publisher, mut pub_events) =
        AsyncClient5::new(MqttOptions5::new("rust5-pub", "127.0.0.1", ferry.port), 16);
    tokio::spawn(async move { while pub_events.poll().await.is_ok() {} });

    subscriber.subscribe("rpc/request", QoS5::ExactlyOnce).await.unwrap();
    loop {
        if let Event5::Incoming(Packet5::SubAck(_)) = sub_events.poll().await.unwrap() {
            break;
        }
    }
    let properties = PublishProperties {
        response_topic: Some("rpc/response/7".into()),
        correlation_data: Some("req-7".into()),
        user_properties: vec![("b".into(), "2".into()), ("a".into(), "1".into())],
        content_type: Some("application/json".into()),
        ..Default::default()
    };
    publisher
        .publish_with_properties("rpc/request", QoS5::ExactlyOnce, false, "{}", properties.clone())
        .await
        .unwrap();
    let received = loop {
        match tokio::time::timeout(Duration::from_secs(5), sub_events.poll()).await {
            Ok(Ok(Event5::Incoming(Packet5::Publish(publish)))) => break publish,
            Ok(Ok(_)) => {}
            other => panic!("no PUBLISH: {other:?}"),
        }
    };
    assert_eq!(received.qos, QoS5::ExactlyOnce);
    let got = received.properties.expect("properties forwarded");
    assert_eq!(got.response_topic, properties.response_topic);
    assert_eq!(got.correlation_data, properties.correlation_data);
    assert_eq!(got.user_properties, properties.user_properties, "order preserved");
    assert_eq!(got.content_type, properties.content_type);
}
