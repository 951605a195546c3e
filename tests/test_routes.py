"""Edge routes (issue 14): `FROM filter WHERE condition INTO endpoint`,
through the real binary with paho clients. The `topic` endpoint republishes
locally, so a subscriber on its topic sees exactly what the route sent.

Negative cases need no waiting: an endpoint sends in log order, so a
message wrongly routed would arrive before the one published after it."""

import subprocess

import pytest

from conftest import ferry_binary
from helpers import expect_nothing

pytestmark = pytest.mark.ferry_only


def _routes(routes: dict, topic: str = "archive/{topic}") -> dict:
    return {
        "routes": {name: {"route": text} for name, text in routes.items()},
        "endpoints": {"archive": {"type": "topic", "topic": topic}},
    }


def test_a_route_sends_what_matches_and_local_subscribers_still_get_everything(broker_factory):
    b = broker_factory(_routes({"hot": "FROM telemetry/# WHERE $body.temp > 50 INTO archive"}))
    archive = b.client(5, "archive-reader")
    archive.subscribe("archive/#", qos=1)
    local = b.client(5, "local-reader")
    local.subscribe("telemetry/#", qos=1)
    device = b.client(5, "device")
    published = [("telemetry/a", b'{"temp": 10}'), ("telemetry/b", b"not json"),
                 ("telemetry/c", b'{"temp": 51}'), ("other/d", b'{"temp": 99}'),
                 ("telemetry/e", b'{"temp": 70.5}')]
    for topic, payload in published:
        device.publish(topic, payload, qos=1)

    got = archive.get_n(2)
    assert [(m.topic, m.payload) for m in got] == [
        ("archive/telemetry/c", b'{"temp": 51}'), ("archive/telemetry/e", b'{"temp": 70.5}')]
    assert [m.topic for m in local.get_n(4)] == [
        "telemetry/a", "telemetry/b", "telemetry/c", "telemetry/e"]


def test_conditions_see_properties_topic_levels_and_the_publisher(broker_factory):
    route = ("FROM plant/+/temp WHERE $user.site = 'plant-1' AND $contentType = 'application/json'"
             " AND $qos = 1 AND $topic[1] = 'line7' AND STARTS_WITH($clientId, 'dev-')"
             " INTO archive")
    b = broker_factory(_routes({"props": route}))
    archive = b.client(5, "reader")
    archive.subscribe("archive/#", qos=1)
    good = {"UserProperty": [("site", "plant-1")], "ContentType": "application/json"}
    dev = b.client(5, "dev-1")
    other = b.client(5, "laptop")
    dev.publish("plant/line7/temp", b"1", qos=1, props={**good, "UserProperty": [("site", "plant-2")]})
    dev.publish("plant/line7/temp", b"2", qos=0, props=good)
    dev.publish("plant/line8/temp", b"3", qos=1, props=good)
    other.publish("plant/line7/temp", b"4", qos=1, props=good)
    dev.publish("plant/line7/temp", b"5", qos=1, props={"UserProperty": [("site", "plant-1")]})
    dev.publish("plant/line7/temp", b"6", qos=1, props=good)
    m = archive.get()
    assert (m.topic, m.payload) == ("archive/plant/line7/temp", b"6")
    assert ("site", "plant-1") in (m.props or {}).get("UserProperty", [])


def test_a_message_two_routes_send_to_one_endpoint_goes_there_once(broker_factory):
    b = broker_factory(_routes({"all": "FROM t/# INTO archive",
                                "some": "FROM t/x WHERE $body = 1 INTO archive"}))
    archive = b.client(5, "reader")
    archive.subscribe("archive/#", qos=1)
    device = b.client(5, "device")
    device.publish("t/x", b"1", qos=1)
    device.publish("t/y", b"marker", qos=1)
    assert [m.payload for m in archive.get_n(2)] == [b"1", b"marker"]


def test_what_an_endpoint_republishes_is_not_routed_again(broker_factory):
    """The template's topic matches the route's own filter: routed again,
    it would loop for ever."""
    b = broker_factory(_routes({"loop": "FROM a/# INTO archive"}, topic="a/again/{topic[1]}"))
    reader = b.client(5, "reader")
    reader.subscribe("a/#", qos=1)
    device = b.client(5, "device")
    device.publish("a/x", b"1", qos=1)
    device.publish("a/y", b"2", qos=1)
    # The endpoint's copies run on their own flow: they may overtake the
    # next original, so only each topic's arrival is fixed, not the order.
    topics = [m.topic for m in reader.get_n(4)]
    assert sorted(topics) == ["a/again/x", "a/again/y", "a/x", "a/y"], topics
    assert topics.index("a/x") < topics.index("a/y")
    expect_nothing(reader)  # no copy of a copy


def test_a_template_names_the_publishing_client(broker_factory):
    """{clientid} comes from the stored message, read back from the log."""
    b = broker_factory(_routes({"up": "FROM telemetry/# INTO archive"},
                               topic="by-client/{clientid}/{topic[1]}"))
    reader = b.client(5, "reader")
    reader.subscribe("by-client/#", qos=1)
    for device in ("dev-7", "dev-8"):
        b.client(5, device).publish("telemetry/temp", b"21", qos=1)
    assert sorted(m.topic for m in reader.get_n(2)) == ["by-client/dev-7/temp",
                                                         "by-client/dev-8/temp"]


def _check_config(tmp_path, text: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "ferry.toml"
    cfg.write_text(text)
    return subprocess.run([str(ferry_binary()), "check-config", str(cfg)], capture_output=True,
                          text=True, timeout=10, env={"PATH": "/usr/bin:/bin"})


def test_a_route_syntax_error_names_the_file_line_key_route_and_column(tmp_path):
    p = _check_config(tmp_path, '[endpoints.cloud]\ntype = "topic"\ntopic = "x"\n\n'
                                '[routes.hot]\nroute = "FROM t/# WHERE $body.temp > INTO cloud"\n')
    assert p.returncode == 1
    assert p.stderr.splitlines()[0] == (
        f"Error: {tmp_path / 'ferry.toml'}:6: key `routes.hot.route`: route \"hot\", column 29: "
        "expected a value after '>', found 'INTO'")


@pytest.mark.parametrize("text,key,words", [
    ('[routes.hot]\nroute = "FROM t/# INTO nowhere"\n', "routes.hot.route", "nowhere"),
    ('[routes.hot]\nroute = "FROM t/# INTO cloud"\npriority = 10\n[endpoints.cloud]\n'
     'type = "topic"\ntopic = "x"\n', "routes.hot.priority", "0 (highest) to 9"),
    ('[endpoints.cloud]\ntype = "carrier-pigeon"\n', "endpoints.cloud", "carrier-pigeon"),
    ('[endpoints.cloud]\ntype = "topic"\ntopik = "x"\n', "endpoints.cloud", "topik"),
    ('[endpoints.cloud]\ntype = "topic"\ntopic = "x"\nbatch = { max_messages = 0 }\n',
     "endpoints.cloud", "batch.max_messages"),
    ('[endpoints.cloud]\ntype = "topic"\ntopic = "x"\nwhen_full = "block"\nblock_timeout = "1h"\n',
     "endpoints.cloud", "block_timeout"),
    ('[endpoints.cloud]\ntype = "topic"\ntopic = "x"\nwhen_full = "wait"\n',
     "endpoints.cloud", "block"),
])
def test_bad_route_and_endpoint_settings_are_refused_with_their_key(tmp_path, text, key, words):
    p = _check_config(tmp_path, text)
    assert p.returncode == 1
    first = p.stderr.splitlines()[0]
    assert f"key `{key}`" in first and words in first, first


def test_routes_and_endpoints_reload_from_the_file_and_a_bad_file_changes_nothing(broker_factory):
    import os
    import signal

    from conftest import to_toml
    from helpers import post_reload

    b = broker_factory(_routes({"hot": "FROM t/# INTO archive"}))
    reader = b.client(5, "reader")
    reader.subscribe("archive/#", qos=1)
    reader.subscribe("moved/#", qos=1)
    device = b.client(5, "device")
    device.publish("t/1", b"1", qos=1)
    assert reader.get().topic == "archive/t/1"

    config = b.workdir / "ferry.toml"
    config.write_text(to_toml(_routes({"hot": "FROM t/# INTO archive"}, topic="moved/{topic}")))
    status, body = post_reload(b)
    assert status == 200 and body["loaded"]["routes"] == 1, body
    device.publish("t/2", b"2", qos=1)
    assert reader.get().topic == "moved/t/2"

    config.write_text(to_toml(_routes({"hot": "FROM t/# WHERE $body > INTO archive"})))
    status, body = post_reload(b)
    assert status == 422 and body["error"] == "reload_failed", body
    assert 'route "hot", column' in body["message"], body
    device.publish("t/3", b"3", qos=1)
    assert reader.get().topic == "moved/t/3", "the routes in force stay"

    config.write_text(to_toml(_routes({"cold": "FROM u/# INTO archive"})))
    since = len(b.log_lines())
    os.kill(b.proc.pid, signal.SIGHUP)
    b.wait_log(r"reloaded", since=since)
    device.publish("t/4", b"4", qos=1)
    device.publish("u/5", b"5", qos=1)
    assert reader.get().topic == "archive/u/5", "t/4 is routed no more"


def test_messages_no_route_takes_are_counted_when_asked(broker_factory):
    config = _routes({"hot": "FROM telemetry/# INTO archive"})
    config["routes"]["count_unrouted"] = True
    config["broker"] = {"sys_interval_secs": 1}
    b = broker_factory(config)
    device = b.client(5, "device")
    for topic in ["other/1", "telemetry/1", "other/2"]:
        device.publish(topic, b"x", qos=1)
    watcher = b.client(5, "sys")
    watcher.subscribe("$SYS/broker/routes/dropped/no_route")
    while (value := watcher.get().payload) != b"2":
        assert value in (b"0", b"1"), value
