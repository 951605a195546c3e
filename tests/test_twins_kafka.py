"""Ditto's Kafka connections on the real binary against a real Apache
Kafka 4.x (tests/kafka.py, started once for the module): the Ditto
benchmark's MODIFY_THINGS source (seeds/ditto-benchmark.txt) with its
`{{ header:device_id }}` enforcement, qos 1 offsets committed only after
the change is persisted (kill -9 loses nothing and re-reads nothing
committed), a Kafka target receiving twin events, and the figures."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
import requests
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka import SASL_PASSWORD, SASL_USER, Kafka
from twins import Ditto

pytestmark = pytest.mark.ferry_only

NS = "org.eclipse.ditto"
BREWER = {
    "definition": "org.eclipse.ditto:coffeebrewer:0.1.0",
    "attributes": {"location": "test location", "model": "Speaking coffee machine"},
    "features": {"coffee-brewer": {"properties": {"brewed-coffees": 0}}},
}
BREWED = "/features/coffee-brewer/properties/brewed-coffees"


@pytest.fixture(scope="module")
def kafka():
    k = Kafka()
    yield k
    k.close()


# A consumer of a killed Ferry stays in its group for its session, 10 s
# (docs/twins.md, Kafka connections); a restarted one gets the partitions
# in the rebalance after that. The rest is the slack of a loaded machine.
SESSION_AND_REBALANCE = 40.0


def _ditto(broker) -> Ditto:
    return Ditto(f"http://{broker.host}:{broker.http_port}")


def eventually(check, timeout: float = 20.0):
    """Polls `check` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.05)
    return result


def kafka_connection(brokers: str, topic: str, qos: int = 0, targets=()) -> dict:
    """The Ditto benchmark's Kafka connection (seeds/ditto-benchmark.txt),
    on the test's cluster and topic."""
    return {
        "name": "kafka-source",
        "connectionType": "kafka",
        "connectionStatus": "open",
        "uri": f"tcp://{brokers}",
        "sources": [{
            "addresses": [topic],
            "consumerCount": 1,
            "qos": qos,
            "authorizationContext": ["nginx:ditto"],
            "enforcement": {"input": "{{ header:device_id }}", "filters": ["{{ entity:id }}"]},
            "headerMapping": {},
            "payloadMapping": ["ditto"],
            "replyTarget": {"enabled": False},
        }],
        "targets": list(targets),
        "clientCount": 1,
        "failoverEnabled": True,
        "validateCertificates": True,
        "processorPoolSize": 1,
        "specificConfig": {"saslMechanism": "plain", "bootstrapServers": brokers},
        "mappingDefinitions": {"ditto": {"mappingEngine": "Ditto",
                                         "options": {"thingId": "{{ header:device_id }}"}}},
        "tags": ["benchmark"],
    }


def modify(name: str, value) -> bytes:
    """The seed's message: a Ditto protocol modify, its path without a
    leading slash as the benchmark writes it."""
    return json.dumps({
        "topic": f"{NS}/{name}/things/twin/commands/modify",
        "path": "features/coffee-brewer/properties/brewed-coffees",
        "value": value,
    }).encode()


def modified_events_target(address: str) -> dict:
    """A Kafka target that gets every `modified` event at `address`."""
    return {"address": address,
            "topics": ["_/_/things/twin/events?filter=eq(topic:action,'modified')"],
            "authorizationContext": ["nginx:ditto"]}


def produce(kafka: Kafka, topic: str, records) -> None:
    """`records`: (device_id, value bytes) pairs, produced in order to one
    partition and acknowledged by Kafka (acks=all) before this returns."""
    producer = Producer({"bootstrap.servers": kafka.brokers, "enable.idempotence": True})
    for device_id, value in records:
        producer.produce(topic, value=value, headers=[("device_id", device_id.encode())])
    assert producer.flush(30) == 0, "records not delivered"


def committed(kafka: Kafka, group: str, topic: str) -> int:
    """The group's committed offset on the topic's partition 0."""
    consumer = Consumer({"bootstrap.servers": kafka.brokers, "group.id": group})
    try:
        [partition] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return partition.offset
    finally:
        consumer.close()


def brewed(ditto: Ditto, name: str):
    response = ditto.get(f"/things/{NS}:{name}{BREWED}")
    return response.json() if response.status_code == 200 else None


def source_metrics(ditto: Ditto, connection: str) -> dict:
    metrics = ditto.get(f"/connections/{connection}/metrics").json()
    return metrics["connectionMetrics"]["inbound"]


def counts(ditto: Ditto, connection: str) -> tuple[int, int, int]:
    inbound = source_metrics(ditto, connection)
    return (inbound["consumed"]["success"]["total"], inbound["mapped"]["success"]["total"],
            inbound["mapped"]["failure"]["total"])


def test_the_seeds_modifies_land_and_another_devices_are_refused(broker_factory, kafka):
    b = broker_factory()
    ditto = _ditto(b)
    topic = f"create-update-{uuid.uuid4().hex[:8]}"
    for name in ["test-thing-1", "test-thing-2"]:
        assert ditto.put(f"/things/{NS}:{name}", BREWER).status_code == 201
    created = ditto.put("/connections/kafka-source", kafka_connection(kafka.brokers, topic))
    assert created.status_code == 201, created.text

    produce(kafka, topic, [(f"{NS}:test-thing-1", modify("test-thing-1", "10"))])
    eventually(lambda: brewed(ditto, "test-thing-1") == "10")

    # test-thing-2's device writes into test-thing-1: not executed, counted.
    produce(kafka, topic, [(f"{NS}:test-thing-2", modify("test-thing-1", "99")),
                           (f"{NS}:test-thing-2", modify("test-thing-2", "7"))])
    # One partition: the refused record was handled before the next lands.
    eventually(lambda: brewed(ditto, "test-thing-2") == "7")
    assert brewed(ditto, "test-thing-1") == "10"
    revision = ditto.get(f"/things/{NS}:test-thing-1", params={"fields": "_revision"}).json()
    assert revision["_revision"] == 2
    eventually(lambda: counts(ditto, "kafka-source") == (3, 2, 1))

    metrics = ditto.get("/connections/kafka-source/metrics").json()
    assert metrics["containsFailures"] is True
    address = metrics["sourceMetrics"]["addressMetrics"][topic]
    assert address["consumed"]["success"]["total"] == 3
    assert address["mapped"]["failure"]["lastMessageAt"] is not None
    status = ditto.get("/connections/kafka-source/status").json()
    assert status["sourceStatus"][0]["address"] == topic
    # A refused command is the device's mistake: the connection is open.
    assert (status["liveStatus"], status["sourceStatus"][0]["status"]) == ("open", "open")

    text = requests.get(ditto.base.replace("/api/2", "/metrics"), timeout=10).text
    labels = f'connection="kafka-source",source="{topic}"'
    assert f"ferry_twin_connection_consumed_total{{{labels}}} 3" in text
    assert f"ferry_twin_connection_applied_total{{{labels}}} 2" in text
    assert f"ferry_twin_connection_source_failed_total{{{labels}}} 1" in text


def test_qos1_commits_after_persistence_and_kill_9_loses_nothing(broker_factory, kafka):
    b = broker_factory()
    ditto = _ditto(b)
    topic = f"create-update-{uuid.uuid4().hex[:8]}"
    names = [f"thing-{i}" for i in range(20)]
    for name in names:
        assert ditto.put(f"/things/{NS}:{name}", BREWER).status_code == 201
    connection = kafka_connection(kafka.brokers, topic, qos=1)
    assert ditto.put("/connections/k1", connection).status_code == 201

    produce(kafka, topic, [(f"{NS}:{name}", modify(name, 1)) for name in names])
    eventually(lambda: all(brewed(ditto, name) == 1 for name in names))
    # Committed behind the applied records, all 20 of them.
    eventually(lambda: committed(kafka, "ferry-connection-k1", topic) == 20)

    # A crash right after: the restarted connection reads from the commit,
    # so nothing applied is read again. Its consumer gets the partition
    # once the group has waited out the killed one's session (10 s).
    b.restart(kill=True)
    ditto = _ditto(b)
    produce(kafka, topic, [(f"{NS}:thing-0", modify("thing-0", 2))])
    eventually(lambda: brewed(ditto, "thing-0") == 2, timeout=SESSION_AND_REBALANCE)
    eventually(lambda: counts(ditto, "k1")[1] == 1)
    assert counts(ditto, "k1") == (1, 1, 0), "records applied before the crash were read again"

    # A crash while records are on their way: the restart applies every
    # one that was not committed; none is lost.
    produce(kafka, topic, [(f"{NS}:{name}", modify(name, 3)) for name in names])
    b.restart(kill=True)
    ditto = _ditto(b)
    eventually(lambda: all(brewed(ditto, name) == 3 for name in names),
               timeout=SESSION_AND_REBALANCE)
    eventually(lambda: committed(kafka, "ferry-connection-k1", topic) == 41)


def group_members(kafka: Kafka, group: str) -> list[str]:
    """The client ids of a stable group's members, else [] (also while
    Kafka's group coordinator is still loading)."""
    admin = AdminClient({"bootstrap.servers": kafka.brokers})
    try:
        description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    except KafkaException as error:
        if error.args[0].code() in (KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                    KafkaError.COORDINATOR_NOT_AVAILABLE):
            return []
        raise
    if description.state != ConsumerGroupState.STABLE:
        return []
    return sorted(member.client_id for member in description.members)


def test_two_ferrys_with_one_connection_share_its_group(broker_factory, kafka):
    """Two Ferrys (their own data directories) both run connection
    `shared`: one consumer group, each Ferry's consumer named for its
    Ferry; the partition's records are applied once, by whichever holds
    it."""
    ferrys = [broker_factory(), broker_factory()]
    dittos = [_ditto(b) for b in ferrys]
    topic = f"create-update-{uuid.uuid4().hex[:8]}"
    # Made first: a consumer joins its group only once its topic exists.
    admin = AdminClient({"bootstrap.servers": kafka.brokers})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=30)
    names = [f"thing-{i}" for i in range(10)]
    for ditto in dittos:
        for name in names:
            assert ditto.put(f"/things/{NS}:{name}", BREWER).status_code == 201
        assert ditto.put("/connections/shared", kafka_connection(kafka.brokers, topic)).status_code == 201
    members = eventually(lambda: group_members(kafka, "ferry-connection-shared")
                         if len(group_members(kafka, "ferry-connection-shared")) == 2 else None)
    assert len(set(members)) == 2, members

    produce(kafka, topic, [(f"{NS}:{name}", modify(name, 5)) for name in names])
    eventually(lambda: sum(counts(ditto, "shared")[1] for ditto in dittos) == 10)
    # Still both in the group, and every record applied once.
    assert group_members(kafka, "ferry-connection-shared") == members
    assert sorted(counts(ditto, "shared")[1] for ditto in dittos) == [0, 10]


def test_a_kafka_target_gets_the_modified_events(broker_factory, kafka):
    b = broker_factory()
    ditto = _ditto(b)
    source_topic = f"create-update-{uuid.uuid4().hex[:8]}"
    events_topic = f"twin-events-{uuid.uuid4().hex[:8]}"
    target = {
        "address": events_topic + "/{{ thing:id }}",
        "topics": ["_/_/things/twin/events?filter=eq(topic:action,'modified')"],
        "authorizationContext": ["nginx:ditto"],
        "issuedAcknowledgementLabel": "{{connection:id}}:produced",
    }
    connection = kafka_connection(kafka.brokers, source_topic, targets=[target])
    assert ditto.put("/connections/both", connection).status_code == 201
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code == 201  # filtered
    produce(kafka, source_topic, [(f"{NS}:test-thing-1", modify("test-thing-1", "12"))])

    consumer = Consumer({"bootstrap.servers": kafka.brokers, "group.id": f"reader-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([events_topic])
    try:
        deadline = time.monotonic() + 30
        record = None
        while record is None or record.error():
            assert time.monotonic() < deadline, "no event on the target topic"
            record = consumer.poll(0.5)
        event = json.loads(record.value())
        assert event["topic"] == f"{NS}/test-thing-1/things/twin/events/modified"
        assert (event["path"], event["value"], event["revision"]) == (BREWED, "12", 2)
        assert record.key() == f"{NS}:test-thing-1".encode()
        assert dict(record.headers())["content-type"] == b"application/vnd.eclipse.ditto+json"
    finally:
        consumer.close()

    def outbound():
        metrics = ditto.get("/connections/both/metrics").json()
        return metrics["connectionMetrics"]["outbound"]
    eventually(lambda: outbound()["published"]["success"]["total"] == 1)
    assert outbound()["filtered"]["success"]["total"] == 1  # the create

    # The target acknowledges a record Kafka took with 204.
    answer = ditto.put(f"/things/{NS}:test-thing-1{BREWED}", 13,
                       headers={"requested-acks": "twin-persisted,both:produced",
                                "timeout": "30s"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["both:produced"]["status"] == 204


def read_records(kafka: Kafka, topic: str, count: int) -> list:
    """The first `count` records of `topic`, waiting up to 30 s for them."""
    consumer = Consumer({"bootstrap.servers": kafka.brokers, "group.id": f"reader-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    records = []
    try:
        deadline = time.monotonic() + 30
        while len(records) < count:
            assert time.monotonic() < deadline, f"{len(records)} of {count} records on {topic}"
            record = consumer.poll(0.5)
            if record is not None and not record.error():
                records.append(record)
    finally:
        consumer.close()
    return records


def answering(kafka: Kafka, ditto: Ditto, name: str, types: list[str]) -> tuple[str, str]:
    """A connection `name` like the seed's whose source answers on the
    reply target `{{ header:reply-to }}` with `types`; its source and
    reply topics."""
    source_topic = f"commands-{uuid.uuid4().hex[:8]}"
    replies = f"replies-{uuid.uuid4().hex[:8]}"
    connection = kafka_connection(kafka.brokers, source_topic)
    connection["sources"][0]["replyTarget"] = {
        "enabled": True, "address": "{{ header:reply-to }}", "expectedResponseTypes": types}
    created = ditto.put(f"/connections/{name}", connection)
    assert created.status_code == 201, created.text
    return source_topic, replies


def send_commands(kafka: Kafka, topic: str, replies: str, commands) -> None:
    """`commands`: (device, Ditto protocol message) pairs, produced in
    order with the device's id and its reply address as headers."""
    producer = Producer({"bootstrap.servers": kafka.brokers, "enable.idempotence": True})
    for device, message in commands:
        headers = [("device_id", f"{NS}:{device}".encode()),
                   ("reply-to", f"{replies}/{NS}:{device}".encode())]
        producer.produce(topic, value=json.dumps(message).encode(), headers=headers)
    assert producer.flush(30) == 0, "records not delivered"


def correlated(message: bytes, correlation: str) -> dict:
    body = json.loads(message)
    body["headers"] = {"correlation-id": correlation}
    return body


def test_a_kafka_source_answers_on_its_reply_target(broker_factory, kafka):
    """Ditto's replyTarget on a Kafka source: the response of each command,
    and the error response of one that fails or that enforcement refuses,
    produced to the topic `{{ header:reply-to }}` names (`topic/key`), with
    the correlation id."""
    ditto = _ditto(broker_factory())
    source_topic, replies = answering(kafka, ditto, "answering", ["response", "error"])
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code == 201
    send_commands(kafka, source_topic, replies, [
        ("test-thing-1", correlated(modify("test-thing-1", "12"), "c-applied")),
        ("test-thing-2", correlated(modify("test-thing-2", "1"), "c-missing")),  # no such thing
        ("test-thing-1", correlated(modify("test-thing-3", "1"), "c-enforced")),  # not its own
    ])
    answers = {}
    for record in read_records(kafka, replies, 3):
        answer = json.loads(record.value())
        headers = dict(record.headers())
        assert headers["content-type"] == b"application/vnd.eclipse.ditto+json"
        assert headers["correlation-id"].decode() == answer["headers"]["correlation-id"]
        answers[answer["headers"]["correlation-id"]] = (record.key(), answer)
    key, applied = answers["c-applied"]
    assert key == f"{NS}:test-thing-1".encode()
    assert applied["topic"] == f"{NS}/test-thing-1/things/twin/commands/modify"
    assert applied["status"] == 204, applied
    assert brewed(ditto, "test-thing-1") == "12"
    key, missing = answers["c-missing"]
    assert key == f"{NS}:test-thing-2".encode()
    assert (missing["status"], missing["value"]["error"]) == (404, "things:thing.notfound")
    _, enforced = answers["c-enforced"]
    assert enforced["status"] >= 400, enforced


def test_a_kafka_source_serves_the_search_protocol_on_its_reply_target(broker_factory, kafka):
    """Ditto's search protocol through a connection: `subscribe` is
    answered `created`, a `request` for pages with `next` and `complete`,
    each on the reply target, as over a WebSocket."""
    ditto = _ditto(broker_factory())
    source_topic = f"searches-{uuid.uuid4().hex[:8]}"
    replies = f"found-{uuid.uuid4().hex[:8]}"
    connection = kafka_connection(kafka.brokers, source_topic)
    source = connection["sources"][0]
    del source["enforcement"]  # a search names no thing to hold it to
    source["replyTarget"] = {"enabled": True, "address": "{{ header:reply-to }}",
                             "expectedResponseTypes": ["response", "error"]}
    assert ditto.put("/connections/searching", connection).status_code == 201
    for name in ("test-thing-1", "test-thing-2"):
        assert ditto.put(f"/things/{NS}:{name}", BREWER).status_code == 201

    def search(action: str, value: dict) -> None:
        message = {"topic": f"_/_/things/twin/search/{action}", "path": "/", "value": value,
                   "headers": {"correlation-id": f"s-{action}"}}
        producer = Producer({"bootstrap.servers": kafka.brokers})
        producer.produce(source_topic, value=json.dumps(message).encode(),
                         headers=[("reply-to", f"{replies}/search".encode())])
        assert producer.flush(30) == 0, "records not delivered"

    search("subscribe", {"filter": f'like(thingId,"{NS}:test-thing-*")',
                         "options": "size(2),sort(+thingId)"})
    [created] = [json.loads(record.value()) for record in read_records(kafka, replies, 1)]
    assert created["topic"] == "_/_/things/twin/search/created", created
    assert created["headers"]["correlation-id"] == "s-subscribe"
    subscription = created["value"]["subscriptionId"]

    search("request", {"subscriptionId": subscription, "demand": 1})
    _, page, complete = [json.loads(record.value()) for record in read_records(kafka, replies, 3)]
    assert page["topic"] == "_/_/things/twin/search/next", page
    assert [item["thingId"] for item in page["value"]["items"]] == [
        f"{NS}:test-thing-1", f"{NS}:test-thing-2"]
    assert complete["topic"] == "_/_/things/twin/search/complete", complete
    assert complete["value"]["subscriptionId"] == subscription


def test_a_reply_target_for_errors_only_does_not_answer_successes(broker_factory, kafka):
    ditto = _ditto(broker_factory())
    source_topic, replies = answering(kafka, ditto, "errors", ["error"])
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code == 201
    # One thing's commands are applied in order, and their answers share
    # the reply topic's partition (the key): an answer to the first would
    # come before the second's.
    missing = json.loads(modify("test-thing-1", None))
    missing["topic"] = f"{NS}/test-thing-1/things/twin/commands/delete"
    missing["path"] = "features/coffee-brewer/properties/nothing-here"
    del missing["value"]
    send_commands(kafka, source_topic, replies, [
        ("test-thing-1", correlated(modify("test-thing-1", "13"), "c-quiet")),
        ("test-thing-1", correlated(json.dumps(missing).encode(), "c-loud")),
    ])
    [record] = read_records(kafka, replies, 1)
    answer = json.loads(record.value())
    assert answer["headers"]["correlation-id"] == "c-loud", answer
    assert answer["status"] == 404
    assert brewed(ditto, "test-thing-1") == "13"


def test_a_kafka_target_carries_live_messages_and_a_source_brings_the_answer(
        broker_factory, kafka):
    ditto = _ditto(broker_factory())
    source_topic = f"answers-{uuid.uuid4().hex[:8]}"
    live_topic = f"messages-{uuid.uuid4().hex[:8]}"
    target = {"address": live_topic + "/{{ thing:id }}", "topics": ["_/_/things/live/messages"],
              "authorizationContext": ["nginx:ditto"]}
    connection = kafka_connection(kafka.brokers, source_topic, targets=[target])
    assert ditto.put("/connections/devices", connection).status_code == 201
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code == 201

    answered: list = []
    caller = threading.Thread(target=lambda: answered.append(ditto.post(
        f"/things/{NS}:test-thing-1/inbox/messages/brew", {"cups": 2},
        headers={"correlation-id": "brew-1"}, params={"timeout": "30"})))
    caller.start()
    [record] = read_records(kafka, live_topic, 1)
    message = json.loads(record.value())
    assert message["topic"] == f"{NS}/test-thing-1/things/live/messages/brew"
    assert (message["path"], message["value"]) == ("/inbox/messages/brew", {"cups": 2})
    assert record.key() == f"{NS}:test-thing-1".encode()
    assert dict(record.headers())["correlation-id"] == b"brew-1"

    response = {"topic": message["topic"], "path": message["path"], "status": 200,
                "headers": {"correlation-id": "brew-1", "content-type": "application/json"},
                "value": {"brewing": True}}
    produce(kafka, source_topic, [(f"{NS}:test-thing-1", json.dumps(response).encode())])
    caller.join(30)
    [answer] = answered
    assert (answer.status_code, answer.json()) == (200, {"brewing": True})


def test_a_kafka_target_acknowledges_the_live_messages_it_produced(broker_factory, kafka):
    """issuedAcknowledgementLabel on a live target: a message requesting
    the label is answered once Kafka's delivery report is in."""
    ditto = _ditto(broker_factory())
    live_topic = f"messages-{uuid.uuid4().hex[:8]}"
    target = {"address": live_topic + "/{{ thing:id }}", "topics": ["_/_/things/live/messages"],
              "authorizationContext": ["nginx:ditto"],
              "issuedAcknowledgementLabel": "{{connection:id}}:produced",
              "headerMapping": {"device": "{{ thing:name }}"}}
    connection = kafka_connection(kafka.brokers, f"unused-{uuid.uuid4().hex[:8]}",
                                  targets=[target])
    assert ditto.put("/connections/devices", connection).status_code == 201
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code == 201

    answer = ditto.post(f"/things/{NS}:test-thing-1/inbox/messages/brew", {"cups": 1},
                        headers={"correlation-id": "brew-acked", "response-required": "false",
                                 "requested-acks": "devices:produced"},
                        params={"timeout": "20"})
    assert answer.status_code == 202, answer.text
    [record] = read_records(kafka, live_topic, 1)
    message = json.loads(record.value())
    assert message["headers"]["requested-acks"] == ["devices:produced"]
    assert message["headers"]["correlation-id"] == "brew-acked"
    assert dict(record.headers())["device"] == b"test-thing-1"


def test_a_device_acknowledges_an_event_through_the_kafka_source(broker_factory, kafka):
    """A Kafka source's declaredAcks: the event goes out asking for the
    label, and the device's acknowledgement record, read by the source, is
    the command's answer."""
    ditto = _ditto(broker_factory())
    source_topic = f"device-acks-{uuid.uuid4().hex[:8]}"
    events_topic = f"device-events-{uuid.uuid4().hex[:8]}"
    target = {"address": events_topic, "topics": ["_/_/things/twin/events"],
              "authorizationContext": ["nginx:ditto"]}
    connection = kafka_connection(kafka.brokers, source_topic, targets=[target])
    connection["sources"][0]["declaredAcks"] = ["{{connection:id}}:brewed"]
    assert ditto.put("/connections/brewery", connection).status_code == 201
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code == 201

    answered: list = []
    caller = threading.Thread(target=lambda: answered.append(ditto.put(
        f"/things/{NS}:test-thing-1{BREWED}", "14",
        headers={"requested-acks": "brewery:brewed", "timeout": "30s", "correlation-id": "b-1"})))
    caller.start()
    created, modified = (json.loads(record.value()) for record in read_records(kafka, events_topic, 2))
    assert created["headers"]["requested-acks"] == []  # as every Ditto event without labels
    assert modified["topic"] == f"{NS}/test-thing-1/things/twin/events/modified"
    assert modified["headers"]["requested-acks"] == ["brewery:brewed"]
    assert modified["headers"]["correlation-id"] == "b-1"
    ack = {"topic": f"{NS}/test-thing-1/things/twin/acks/brewery:brewed", "path": "/",
           "status": 200, "value": "brewing", "headers": {"correlation-id": "b-1"}}
    produce(kafka, source_topic, [(f"{NS}:test-thing-1", json.dumps(ack).encode())])
    caller.join(30)
    [answer] = answered
    # The one label requested: its status and payload are the answer.
    assert (answer.status_code, answer.json()) == (200, "brewing")


def test_a_kafka_sources_commands_wait_for_the_acknowledgements_it_requests(broker_factory,
                                                                            kafka):
    """A Kafka source's acknowledgementRequests: its command's offset is
    stored only once the label it requests came back; the device's
    acknowledgement record, behind the command on the same partition and
    thing, is not held behind it. A refusal (400) counts the command as
    failed."""
    ditto = _ditto(broker_factory())
    source_topic = f"requested-acks-{uuid.uuid4().hex[:8]}"
    events_topic = f"requested-events-{uuid.uuid4().hex[:8]}"
    target = modified_events_target(events_topic)
    connection = kafka_connection(kafka.brokers, source_topic, qos=1, targets=[target])
    connection["sources"][0]["declaredAcks"] = ["{{connection:id}}:brewed"]
    connection["sources"][0]["acknowledgementRequests"] = {
        "includes": ["{{connection:id}}:brewed"]}
    assert ditto.put("/connections/brewery", connection).status_code == 201
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code == 201

    def acknowledge(event: dict, status: int) -> None:
        ack = {"topic": f"{NS}/test-thing-1/things/twin/acks/brewery:brewed", "path": "/",
               "status": status, "headers": {"correlation-id": event["headers"]["correlation-id"]}}
        produce(kafka, source_topic, [(f"{NS}:test-thing-1", json.dumps(ack).encode())])

    command = json.loads(modify("test-thing-1", "7"))
    command["headers"] = {"correlation-id": "k-1"}
    produce(kafka, source_topic, [(f"{NS}:test-thing-1", json.dumps(command).encode())])
    [event] = [json.loads(record.value()) for record in read_records(kafka, events_topic, 1)]
    assert event["headers"]["requested-acks"] == ["brewery:brewed"]
    assert counts(ditto, "brewery") == (1, 0, 0)  # waiting for its acknowledgement
    acknowledge(event, 200)
    eventually(lambda: counts(ditto, "brewery") == (2, 2, 0))

    command["headers"] = {"correlation-id": "k-2"}
    command["value"] = "8"
    produce(kafka, source_topic, [(f"{NS}:test-thing-1", json.dumps(command).encode())])
    second = json.loads(read_records(kafka, events_topic, 2)[1].value())
    acknowledge(second, 400)
    eventually(lambda: counts(ditto, "brewery") == (4, 3, 1))
    assert brewed(ditto, "test-thing-1") == "8"


def _modifies_through(ditto: Ditto, kafka: Kafka, name: str, connection: dict,
                      value: str) -> None:
    """Stores `connection` (given a source and a target of its own
    topics) and checks that a command read by its source lands and that
    the target produces the event."""
    source_topic = f"{name}-commands-{uuid.uuid4().hex[:8]}"
    events_topic = f"{name}-events-{uuid.uuid4().hex[:8]}"
    connection = {**connection, "targets": [modified_events_target(events_topic)]}
    connection["sources"] = [{**connection["sources"][0], "addresses": [source_topic], "qos": 1}]
    created = ditto.put(f"/connections/{name}", connection)
    assert created.status_code == 201, created.text
    assert ditto.put(f"/things/{NS}:test-thing-1", BREWER).status_code in (201, 204)
    produce(kafka, source_topic, [(f"{NS}:test-thing-1", modify("test-thing-1", value))])
    eventually(lambda: brewed(ditto, "test-thing-1") == value)
    [record] = read_records(kafka, events_topic, 1)
    assert json.loads(record.value())["value"] == value


def _fails(ditto: Ditto, name: str, connection: dict) -> str:
    """Stores `connection` and returns the detail of its failed status."""
    assert ditto.put(f"/connections/{name}", connection).status_code == 201
    status = eventually(lambda: (answer := ditto.get(f"/connections/{name}/status").json())
                        ["liveStatus"] == "failed" and answer)
    assert SASL_PASSWORD not in json.dumps(status)
    return status["clientStatus"][0]["statusDetails"]


def test_a_connection_authenticates_with_sasl_plain(broker_factory, kafka):
    """Ditto's `tcp://user:password@host:port` with `saslMechanism: plain`:
    the source's consumer and the target's producer authenticate on a
    listener that wants SASL. A wrong password fails the connection, and
    its status does not show the password."""
    ditto = _ditto(broker_factory())
    connection = kafka_connection(kafka.sasl_brokers, "unused")
    connection["uri"] = f"tcp://{SASL_USER}:{SASL_PASSWORD}@{kafka.sasl_brokers}"
    connection["specificConfig"] = {"saslMechanism": "plain"}
    _modifies_through(ditto, kafka, "sasl", connection, "21")
    wrong = {**connection, "uri": f"tcp://{SASL_USER}:not-the-secret@{kafka.sasl_brokers}"}
    details = _fails(ditto, "wrong", wrong)
    assert "uthenticat" in details and "not-the-secret" not in details, details


def test_a_connection_authenticates_with_scram_over_tls(broker_factory, kafka):
    """Ditto's `ssl://user:password@host:port` with its `ca` (PEM text)
    and `saslMechanism: scram-sha-512`: the source's consumer and the
    target's producer connect over TLS to a listener that wants SCRAM.
    Without the `ca` the broker's certificate (from the test's own CA) is
    not trusted, and the connection fails with an SSL error whose status
    says why, in librdkafka's words, not only its code."""
    ditto = _ditto(broker_factory())
    connection = kafka_connection(kafka.tls_brokers, "unused")
    connection["uri"] = f"ssl://{SASL_USER}:{SASL_PASSWORD}@{kafka.tls_brokers}"
    connection["specificConfig"] = {"saslMechanism": "scram-sha-512"}
    connection["validateCertificates"] = True
    connection["ca"] = kafka.ca.read_text()
    _modifies_through(ditto, kafka, "tls", connection, "34")
    untrusted = {key: value for key, value in connection.items() if key != "ca"}
    assert "SSL" in _fails(ditto, "untrusted", untrusted)
    eventually(lambda: "certificate verify failed" in ditto.get("/connections/untrusted/status")
               .json()["clientStatus"][0]["statusDetails"])


@pytest.mark.parametrize("security", ["sasl-plain", "tls-scram"])
def test_an_edge_route_authenticates_to_kafka(broker_factory, kafka, security):
    """The edge `kafka` endpoint (docs/routes.md) has the same client as
    the connections above: with SASL PLAIN on the listener that wants it,
    or with `tls`, the cluster's CA and SCRAM on the TLS listener, a
    route's messages reach Kafka, and the password is in no log line."""
    topic = f"edge-{security}-{uuid.uuid4().hex[:8]}"
    settings = {
        "sasl-plain": {"brokers": kafka.sasl_brokers, "sasl_mechanism": "plain"},
        "tls-scram": {"brokers": kafka.tls_brokers, "tls": True, "tls_ca_file": str(kafka.ca),
                      "sasl_mechanism": "scram-sha-256"},
    }[security]
    edge = broker_factory({
        "routes": {"up": {"route": "FROM telemetry/# INTO lake"}},
        "endpoints": {"lake": {"type": "kafka", "topic": topic, "sasl_username": SASL_USER,
                               "sasl_password": SASL_PASSWORD, **settings}},
    })
    device = edge.client(5, "device")
    assert device.publish("telemetry/room-1", b'{"t": 21.5}', qos=1) == 0
    [record] = read_records(kafka, topic, 1)
    assert record.value() == b'{"t": 21.5}'
    assert not any(SASL_PASSWORD in line for line in edge.log_lines())


def test_what_a_kafka_connection_cannot_do_is_refused(broker_factory, kafka):
    ditto = _ditto(broker_factory())
    connection = kafka_connection(kafka.brokers, "t")
    connection["sources"][0]["payloadMapping"] = ["javascript"]
    refused = ditto.put("/connections/bad", connection)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == "connectivity:connection.configuration.invalid"
    assert "'javascript'" in refused.json()["message"]
    assert ditto.get("/connections/bad").status_code == 404
