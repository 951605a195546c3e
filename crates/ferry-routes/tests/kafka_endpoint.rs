//! The kafka endpoint against a real Apache Kafka 4.x that this test
//! starts (`kafka/mod.rs`), read back with a real consumer (rdkafka's
//! `BaseConsumer` with its partition assigned: no group to join).
//!
//! One Kafka serves every step, and one of them stops and restarts it, so
//! the steps run in order in one test rather than as parallel tests.

mod kafka;

use bytes::Bytes;
use ferry_broker::endpoint::RoutedMessage;
use ferry_broker::Message;
use ferry_mqtt::{ByteStr, PropertyValues, QoS};
use ferry_routes::config::{EndpointConfig, EndpointKind};
use ferry_routes::endpoints::kafka::{KafkaEndpointConfig, KafkaSink, TOO_LARGE};
use ferry_routes::sink::Sink;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message as _, OwnedMessage};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::{json, Value};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A send must answer within this, success or failure: a hang is a bug.
const SEND_BOUND: Duration = Duration::from_secs(60);

fn message(offset: u64, topic: &str, payload: impl Into<Bytes>) -> RoutedMessage {
    let properties = PropertyValues {
        content_type: Some(ByteStr::from_static("application/json")),
        user_properties: vec![(ByteStr::from_static("site"), ByteStr::from_static("plant-1"))],
        ..PropertyValues::default()
    };
    RoutedMessage {
        offset,
        stored_bytes: 0,
        priority: 9,
        expires_at_ms: 0,
        message: Message::new(
            ByteStr::from(topic),
            payload.into(),
            QoS::AtLeastOnce,
            false,
            properties.into(),
            1,
        ),
        publisher: Some("device-1".into()),
    }
}

fn kafka_sink(brokers: &str, settings: Value) -> KafkaSink {
    let mut table = json!({ "brokers": brokers });
    for (key, value) in settings.as_object().unwrap() {
        table[key] = value.clone();
    }
    let config: KafkaEndpointConfig = serde_json::from_value(table).unwrap();
    KafkaSink::new("lake", &config).unwrap()
}

async fn connect(sink: &mut KafkaSink) {
    tokio::time::timeout(SEND_BOUND, sink.connect())
        .await
        .expect("connect answers")
        .expect("connected");
}

/// Reads `count` records of partition 0 of `topic` from its start, or what
/// there is after `within`.
async fn read(brokers: &str, topic: &str, count: usize, within: Duration) -> Vec<OwnedMessage> {
    let (brokers, topic) = (brokers.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            // assign() needs a group id in rdkafka 0.39 ("Unknown group"
            // without one), but joins no group: nothing waits for a
            // coordinator.
            .set("group.id", "ferry-test-reader")
            .set("enable.auto.commit", "false")
            .create()
            .expect("a consumer");
        let mut partitions = TopicPartitionList::new();
        partitions.add_partition_offset(&topic, 0, Offset::Beginning).unwrap();
        consumer.assign(&partitions).expect("assigned");
        let (mut records, deadline) = (Vec::new(), Instant::now() + within);
        while records.len() < count && Instant::now() < deadline {
            // An error (right after a topic is made its partition may
            // have no leader yet) is retried by the consumer itself.
            if let Some(Ok(record)) = consumer.poll(Duration::from_millis(100)) {
                records.push(record.detach());
            }
        }
        records
    })
    .await
    .unwrap()
}

fn header<'a>(record: &'a OwnedMessage, name: &str) -> Vec<&'a str> {
    let Some(headers) = record.headers() else { return Vec::new() };
    headers
        .iter()
        .filter(|header| header.key == name)
        .map(|header| std::str::from_utf8(header.value.unwrap()).unwrap())
        .collect()
}

fn payload(record: &OwnedMessage) -> &str {
    std::str::from_utf8(record.payload().unwrap_or_default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_endpoint_against_a_real_kafka() {
    let started = Instant::now();
    let mut kafka = kafka::Kafka::start();
    eprintln!("kafka started in {:?}", started.elapsed());
    let brokers = kafka.brokers();

    let step = Instant::now();
    a_batch_of_1000_arrives_in_order_with_keys_and_headers(&brokers).await;
    eprintln!("step: a batch of 1000: {:?}", step.elapsed());

    let step = Instant::now();
    every_compression_setting_is_accepted(&brokers).await;
    eprintln!("step: compression: {:?}", step.elapsed());

    let step = Instant::now();
    oversized_records_are_dropped_as_too_large(&brokers).await;
    eprintln!("step: too large: {:?}", step.elapsed());

    let step = Instant::now();
    topic_templates_choose_the_kafka_topic(&brokers).await;
    eprintln!("step: topic template: {:?}", step.elapsed());

    let step = Instant::now();
    a_stopped_kafka_fails_sends_and_a_restarted_one_takes_them(&mut kafka).await;
    eprintln!("step: stop and restart: {:?}", step.elapsed());

    let step = Instant::now();
    routed_messages_reach_kafka_through_the_flow(&brokers).await;
    eprintln!("step: through the flow: {:?}", step.elapsed());

    kafka.stop();
    eprintln!("kafka test, wall: {:?}", started.elapsed());
}

async fn a_batch_of_1000_arrives_in_order_with_keys_and_headers(brokers: &str) {
    let mut sink =
        kafka_sink(brokers, json!({ "topic": "telemetry", "key": "{clientid}/{topic[1]}" }));
    connect(&mut sink).await;
    let batch: Vec<RoutedMessage> = (0..1000u64)
        .map(|n| message(n, &format!("plant/dev{}/temp", n % 10), format!("{{\"n\":{n}}}")))
        .collect();
    let before_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let sent = tokio::time::timeout(SEND_BOUND, sink.send(&batch)).await.unwrap().unwrap();
    assert!(sent.rejected.is_empty(), "{:?}", sent.rejected);

    let records = read(brokers, "telemetry", 1000, Duration::from_secs(30)).await;
    assert_eq!(records.len(), 1000);
    for (n, record) in records.iter().enumerate() {
        assert_eq!(payload(record), format!("{{\"n\":{n}}}"), "in order");
        assert_eq!(record.key(), Some(format!("device-1/dev{}", n % 10).as_bytes()));
        assert_eq!(header(record, "mqtt.topic"), [format!("plant/dev{}/temp", n % 10)]);
        assert_eq!(header(record, "mqtt.qos"), ["1"]);
        assert_eq!(header(record, "mqtt.content_type"), ["application/json"]);
        assert_eq!(header(record, "site"), ["plant-1"]);
        let timestamp = record.timestamp().to_millis().unwrap();
        assert!((before_ms - 5_000..before_ms + 60_000).contains(&timestamp), "{timestamp}");
    }
}

async fn every_compression_setting_is_accepted(brokers: &str) {
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        let mut sink = kafka_sink(brokers, json!({ "topic": topic, "compression": codec }));
        connect(&mut sink).await;
        // Compressible, so each codec has something to do.
        let batch: Vec<RoutedMessage> =
            (0..20u64).map(|n| message(n, "a/b", format!("{n} {}", "x".repeat(500)))).collect();
        let sent = tokio::time::timeout(SEND_BOUND, sink.send(&batch)).await.unwrap();
        assert!(sent.unwrap().rejected.is_empty(), "{codec}");
        let records = read(brokers, &topic, 20, Duration::from_secs(30)).await;
        assert_eq!(records.len(), 20, "{codec}");
        assert!(payload(&records[19]).starts_with("19 xxx"), "{codec}");
    }
}

/// Random bytes, which no codec shrinks: a size the broker sees as is.
fn incompressible(len: usize) -> Bytes {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

async fn oversized_records_are_dropped_as_too_large(brokers: &str) {
    // Over the producer's own max_message_bytes: refused as it is enqueued.
    let mut sink = kafka_sink(brokers, json!({ "topic": "sizes" }));
    connect(&mut sink).await;
    let batch = [
        message(1, "a", "small-1"),
        message(2, "a", incompressible(1_200_000)),
        message(3, "a", "small-3"),
    ];
    let sent = tokio::time::timeout(SEND_BOUND, sink.send(&batch)).await.unwrap().unwrap();
    assert_eq!(sent.rejected, [(2, TOO_LARGE)]);

    // Within the producer's limit, over the broker's (1 MiB by default):
    // refused by Kafka in its answer, not retried for ever.
    let mut sink = kafka_sink(brokers, json!({ "topic": "sizes", "max_message_bytes": "4MiB" }));
    connect(&mut sink).await;
    let batch = [message(4, "a", incompressible(2_000_000)), message(5, "a", "small-5")];
    let sent = tokio::time::timeout(SEND_BOUND, sink.send(&batch)).await.unwrap().unwrap();
    assert_eq!(sent.rejected, [(4, TOO_LARGE)]);

    let records = read(brokers, "sizes", 3, Duration::from_secs(30)).await;
    let payloads: Vec<&str> = records.iter().map(payload).collect();
    assert_eq!(payloads, ["small-1", "small-3", "small-5"]);
}

async fn topic_templates_choose_the_kafka_topic(brokers: &str) {
    let mut sink = kafka_sink(brokers, json!({ "topic": "site-{topic[0]}" }));
    connect(&mut sink).await;
    let batch = [
        message(1, "north/t", "to site-north"),
        message(2, "south/t", "to site-south"),
        // "site-bad level" is no Kafka topic name.
        message(3, "bad level/t", "dropped"),
    ];
    let sent = tokio::time::timeout(SEND_BOUND, sink.send(&batch)).await.unwrap().unwrap();
    assert_eq!(sent.rejected, [(3, "invalid_topic")]);
    for site in ["north", "south"] {
        let records = read(brokers, &format!("site-{site}"), 1, Duration::from_secs(30)).await;
        assert_eq!(records.iter().map(payload).collect::<Vec<_>>(), [format!("to site-{site}")]);
    }
}

async fn a_stopped_kafka_fails_sends_and_a_restarted_one_takes_them(kafka: &mut kafka::Kafka) {
    let brokers = kafka.brokers();
    let mut sink = kafka_sink(&brokers, json!({ "topic": "outage", "message_timeout": "3s" }));
    connect(&mut sink).await;
    let first = [message(1, "a", "before")];
    tokio::time::timeout(SEND_BOUND, sink.send(&first)).await.unwrap().unwrap();

    kafka.stop();
    let batch: Vec<RoutedMessage> =
        (2..12u64).map(|n| message(n, "a", format!("during-{n}"))).collect();
    let failing = Instant::now();
    let sent = tokio::time::timeout(SEND_BOUND, sink.send(&batch)).await.expect("no hang");
    let error = sent.expect_err("Kafka is down");
    eprintln!("send with Kafka down failed after {:?}: {error}", failing.elapsed());
    // About message_timeout (3.1 s measured), with room for a loaded machine.
    assert!(failing.elapsed() < Duration::from_secs(15), "{:?}", failing.elapsed());
    let connected = tokio::time::timeout(SEND_BOUND, sink.connect()).await.expect("no hang");
    assert!(connected.is_err(), "connect with Kafka down");

    // What the flow does after a failure: connect again, send the batch
    // again.
    kafka.restart();
    connect(&mut sink).await;
    let sent = tokio::time::timeout(SEND_BOUND, sink.send(&batch)).await.unwrap();
    assert!(sent.expect("Kafka is back").rejected.is_empty());

    let records = read(&brokers, "outage", 11, Duration::from_secs(30)).await;
    let payloads: Vec<&str> = records.iter().map(payload).collect();
    let expected: Vec<String> = std::iter::once("before".to_owned())
        .chain((2..12).map(|n| format!("during-{n}")))
        .collect();
    assert_eq!(payloads, expected, "each once, in order: nothing reached Kafka while it was down");
}

/// The whole path: a message published on a broker with durability is
/// stored, routed, taken by the endpoint's flow and produced.
async fn routed_messages_reach_kafka_through_the_flow(brokers: &str) {
    use ferry_broker::{BrokerConfig, DurabilityConfig};
    use ferry_routes::config::RoutesConfig;
    use ferry_routes::RoutesService;
    use std::collections::BTreeMap;

    let dir = tempfile::tempdir().unwrap();
    let durability = DurabilityConfig { enabled: true, ..DurabilityConfig::default() };
    let broker =
        ferry_broker::Broker::open(BrokerConfig::default(), &durability, dir.path()).unwrap();
    let routes: RoutesConfig =
        serde_json::from_value(json!({"up": {"route": "FROM telemetry/# INTO lake"}})).unwrap();
    let endpoint: EndpointConfig = serde_json::from_value(json!({
        "type": "kafka",
        "brokers": brokers,
        "topic": "routed",
        "key": "{topic[1]}",
        "compression": "zstd",
        "batch": { "max_messages": 50 },
    }))
    .unwrap();
    assert!(matches!(endpoint.kind, EndpointKind::Kafka(_)));
    let endpoints = BTreeMap::from([("lake".to_owned(), endpoint)]);
    let service = RoutesService::start(broker.clone(), &routes, &endpoints).await.unwrap();
    for n in 0..200 {
        broker.publish(Message::new(
            ByteStr::from(format!("telemetry/dev{}", n % 3)),
            Bytes::from(format!("m{n}")),
            QoS::AtLeastOnce,
            false,
            Default::default(),
            0,
        ));
    }
    let records = read(brokers, "routed", 200, Duration::from_secs(60)).await;
    let payloads: Vec<&str> = records.iter().map(payload).collect();
    let expected: Vec<String> = (0..200).map(|n| format!("m{n}")).collect();
    assert_eq!(payloads, expected);
    assert_eq!(records[4].key(), Some(&b"dev1"[..]));

    // The flow reports a batch done a moment after Kafka has it: poll.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = service.status().into_iter().find(|status| status.name == "lake").unwrap();
        if status.figures.sent == 200 && status.queued.iter().sum::<usize>() == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "sent {} of 200", status.figures.sent);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    service.stop().await;
}

#[test]
fn an_endpoint_table_with_type_kafka_reads_its_settings_and_names_a_bad_key() {
    let endpoint: EndpointConfig = serde_json::from_value(json!({
        "type": "kafka",
        "brokers": "k1:9092,k2:9092",
        "topic": "telemetry",
        "key": "{topic[1]}",
        "compression": "zstd",
        "message_timeout": "10s",
        "batch": { "max_messages": 1000 },
    }))
    .unwrap();
    let EndpointKind::Kafka(kafka) = &endpoint.kind else { panic!("{:?}", endpoint.kind) };
    assert_eq!(kafka.brokers, "k1:9092,k2:9092");
    assert_eq!(endpoint.flow.batch.max_messages, 1000);

    for (bad, key) in [
        (json!({ "acks": "1" }), "acks"),
        (json!({ "key": "{client}" }), "key"),
        (json!({ "brokers": "k1" }), "brokers"),
        (json!({ "compression": "brotli" }), "brotli"),
    ] {
        let mut table = json!({ "type": "kafka", "brokers": "k:9092", "topic": "t" });
        for (name, value) in bad.as_object().unwrap() {
            table[name] = value.clone();
        }
        let error = serde_json::from_value::<EndpointConfig>(table).unwrap_err().to_string();
        assert!(error.contains("kafka endpoint") && error.contains(key), "{error}");
    }
}
