//! `ferry bench` run as a subprocess against a real `ferry serve`: every
//! scenario completes with full delivery and writes well-formed JSON.
//! Small counts, and never an assertion on speed.

mod support;

use serde_json::Value;
use std::process::Command;
use support::Ferry;

/// Runs `ferry bench <args> --json FILE` against `ferry` and returns the JSON.
fn bench(ferry: &Ferry, name: &str, args: &[&str]) -> Value {
    let (stdout, report) = run_bench(ferry, name, args);
    assert!(stdout.contains("p99.9"), "the table is printed:\n{stdout}");
    report
}

/// Runs `ferry bench <args> --json FILE`, asserts it succeeded, and returns
/// its table and JSON.
fn run_bench(ferry: &Ferry, name: &str, args: &[&str]) -> (String, Value) {
    let json =
        std::env::temp_dir().join(format!("ferry-bench-smoke-{name}-{}.json", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("bench")
        .args(args)
        .arg("--broker")
        .arg(format!("mqtt://127.0.0.1:{}", ferry.port))
        .arg("--broker-pid")
        .arg(ferry.pid().to_string())
        .arg("--json")
        .arg(&json)
        .output()
        .expect("ferry bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&json).expect("JSON written");
    let _ = std::fs::remove_file(&json);
    (stdout, serde_json::from_str(&text).expect("JSON parses"))
}

fn assert_complete(report: &Value, sent: u64) {
    let delivery = &report["delivery"];
    assert_eq!(delivery["sent"], sent, "{report:#}");
    assert_eq!(delivery["received"], sent, "{report:#}");
    assert_eq!(delivery["delivered_percent"], 100.0, "{report:#}");
    assert_eq!(delivery["lost"], 0, "{report:#}");
    assert_eq!(delivery["duplicates"], 0, "{report:#}");
    // Every run here is QoS 1 or 2: each message's PUBACK or PUBREC is
    // timed once, as well as its arrival.
    for latency in [&report["latency"], &report["ack_latency"]] {
        assert_eq!(latency["count"], sent, "{report:#}");
        for p in ["p50_us", "p75_us", "p90_us", "p95_us", "p99_us", "p99_9_us", "max_us"] {
            assert!(latency[p].as_f64().is_some_and(|v| v > 0.0), "{p} in {latency}");
        }
    }
    assert!(report["broker"]["cpu_seconds"].as_f64().is_some(), "broker sampled: {report:#}");
    // Every message wakes some thread of the broker at least once in a while.
    let switches = &report["broker"]["context_switches"];
    assert!(switches["voluntary"].as_u64().is_some_and(|v| v > 0), "{report:#}");
    assert!(report["broker"]["context_switches_per_message"].as_f64().is_some_and(|v| v > 0.0));
    assert!(report["bench"]["rss_end_bytes"].as_u64().is_some_and(|v| v > 0));
    assert_eq!(
        report["disconnections"]["count"], report["connections"]["count"],
        "every connection is closed at the end: {report:#}"
    );
    let cdf = report["latency_cdf"].as_array().expect("latency CDF points");
    assert_eq!(cdf.first().map(|p| &p["percentile"]), Some(&Value::from(0.0)), "{cdf:?}");
    assert_eq!(cdf.last().map(|p| &p["percentile"]), Some(&Value::from(100.0)), "{cdf:?}");
    let timeline = report["timeline"].as_array().expect("timeline ticks");
    let last = timeline.last().expect("at least the final tick");
    assert_eq!(last["sent"], sent, "the final tick has every message: {last}");
    assert!(last["received"].as_u64().is_some_and(|r| r >= sent), "{last}");
}

#[test]
fn pubsub_qos1_delivers_everything() {
    let ferry = Ferry::start("bench-pubsub");
    let report = bench(
        &ferry,
        "pubsub",
        &["pubsub", "--publishers", "4", "--messages", "2000", "--qos", "1"],
    );
    assert_eq!(report["scenario"], "pubsub");
    assert_eq!(report["parameters"]["publishers"], 4);
    assert_eq!(report["parameters"]["qos"], 1);
    assert_complete(&report, 2000);
}

/// The device shape: one message in flight per publisher, with the
/// broker's system calls counted by perf where perf works, and a reason
/// where it does not (the run goes on either way).
#[test]
fn pubsub_one_in_flight_counts_the_broker_syscalls() {
    let ferry = Ferry::start("bench-pubsub-syscalls");
    let args =
        ["pubsub", "--publishers", "10", "--inflight", "1", "--messages", "1000", "--qos", "1"];
    let args = [&args[..], &["--syscalls"]].concat();
    let (stdout, report) = run_bench(&ferry, "pubsub-syscalls", &args);
    assert_complete(&report, 1000);
    assert!(stdout.contains("syscalls/msg"), "{stdout}");
    let syscalls = &report["syscalls"];
    match syscalls["status"].as_str() {
        Some("counted") => {
            let calls = |family: &str| syscalls[family]["calls"].as_u64().unwrap_or(0);
            // At least a read of each PUBLISH and a write of its PUBACK.
            assert!(calls("total") >= 2 * 1000, "{syscalls:#}");
            assert!(calls("send") > 0 && calls("recv") > 0, "{syscalls:#}");
            let families = ["send", "recv", "epoll_wait", "epoll_ctl", "futex", "other"];
            assert_eq!(families.iter().map(|f| calls(f)).sum::<u64>(), calls("total"));
        }
        Some("unavailable") => {
            assert!(syscalls["reason"].as_str().is_some_and(|r| !r.is_empty()), "{syscalls:#}");
            assert!(stdout.contains("n/a syscalls/msg"), "{stdout}");
        }
        _ => panic!("syscalls counted or not, and why: {report:#}"),
    }
}

#[test]
fn pubsub_qos2_over_mqtt311_delivers_everything() {
    let ferry = Ferry::start("bench-pubsub-qos2");
    let args = [
        "pubsub",
        "--publishers",
        "3",
        "--messages",
        "600",
        "--qos",
        "2",
        "--mqtt-version",
        "3.1.1",
    ];
    assert_complete(&bench(&ferry, "pubsub-qos2", &args), 600);
}

/// Persistent subscribers make every QoS 1 message go through Ferry's
/// durable log before it is delivered and acknowledged, in both versions.
#[test]
fn pubsub_to_persistent_sessions_delivers_everything() {
    let ferry = Ferry::start("bench-pubsub-durable");
    for version in ["5", "3.1.1"] {
        let args = [
            "pubsub",
            "--publishers",
            "4",
            "--messages",
            "2000",
            "--qos",
            "1",
            "--session-expiry",
            "60",
            "--mqtt-version",
            version,
        ];
        let report = bench(&ferry, "pubsub-durable", &args);
        assert_eq!(report["parameters"]["session_expiry"], 60);
        assert_complete(&report, 2000);
    }
}

#[test]
fn p2p_open_loop_delivers_everything() {
    let ferry = Ferry::start("bench-p2p");
    let args = ["p2p", "--pairs", "5", "--rate", "2000", "--count", "500", "--qos", "1"];
    let report = bench(&ferry, "p2p", &args);
    assert_eq!(report["latency_from"], "intended send time");
    assert_complete(&report, 500);
}

#[test]
fn burst_reports_source_rate_drain_and_backlog() {
    let ferry = Ferry::start("bench-burst");
    let plots = std::env::temp_dir().join(format!("ferry-bench-plots-{}", std::process::id()));
    let args = [
        "burst",
        "--plots",
        plots.to_str().expect("a UTF-8 temp dir"),
        "--burst-length",
        "600",
        "--target-rate",
        "3000",
        "--publishers",
        "2",
        "--payload-size",
        "1024",
        "--qos",
        "1",
    ];
    let report = bench(&ferry, "burst", &args);
    assert_eq!(report["scenario"], "burst");
    assert_eq!(report["latency_from"], "intended send time");
    assert_complete(&report, 600);
    let burst = &report["burst"];
    assert_eq!(burst["target_rate"], 3000.0, "{report:#}");
    for figure in ["source_rate", "delivery_rate", "last_message_latency_ms"] {
        assert!(burst[figure].as_f64().is_some_and(|v| v > 0.0), "{figure}: {report:#}");
    }
    assert!(burst["max_backlog"].as_u64().is_some(), "{report:#}");
    for chart in ["burst-latency.svg", "burst-rate.svg", "burst-backlog.svg"] {
        let svg = std::fs::read_to_string(plots.join(chart)).expect("chart written");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{chart}");
    }
    let _ = std::fs::remove_dir_all(&plots);
}

#[test]
fn fanout_delivers_every_message_to_every_subscriber() {
    let ferry = Ferry::start("bench-fanout");
    let args =
        ["fanout", "--publishers", "2", "--subscribers", "10", "--messages", "200", "--qos", "1"];
    let report = bench(&ferry, "fanout", &args);
    assert_eq!(report["scenario"], "fanout");
    assert_eq!(report["parameters"]["subscribers"], 10);
    let delivery = &report["delivery"];
    assert_eq!(delivery["sent"], 200, "{report:#}");
    assert_eq!(delivery["received"], 200 * 10, "every subscriber gets every message: {report:#}");
    assert_eq!(delivery["delivered_percent"], 100.0, "{report:#}");
    assert_eq!(delivery["lost"], 0, "{report:#}");
    assert_eq!(delivery["duplicates"], 0, "{report:#}");
    assert_eq!(report["receive"]["messages"], 2000, "{report:#}");
    assert_eq!(report["latency"]["count"], 2000, "{report:#}");
    assert_eq!(report["ack_latency"]["count"], 200, "one ack per message published: {report:#}");
}

#[test]
fn fanin_delivers_every_message_once_across_the_group() {
    let ferry = Ferry::start("bench-fanin");
    let args =
        ["fanin", "--publishers", "10", "--subscribers", "3", "--messages", "1000", "--qos", "1"];
    let report = bench(&ferry, "fanin", &args);
    assert_eq!(report["scenario"], "fanin");
    assert_complete(&report, 1000);
    let per: Vec<u64> = report["per_subscriber"]
        .as_array()
        .expect("per-subscriber counts")
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(per.len(), 3, "{report:#}");
    assert_eq!(per.iter().sum::<u64>(), 1000, "each message to exactly one member: {report:#}");
}

#[test]
fn conn_opens_holds_and_closes_every_connection() {
    let ferry = Ferry::start("bench-conn");
    let args = ["conn", "--connections", "200", "--hold", "0", "--concurrency", "50"];
    let (stdout, report) = run_bench(&ferry, "conn", &args);
    assert!(stdout.contains("bytes/conn"), "the table is printed:\n{stdout}");
    assert_eq!(report["scenario"], "conn");
    assert_eq!(report["parameters"]["connections"], 200);
    let conn = &report["conn"];
    assert_eq!(conn["attempted"], 200, "{report:#}");
    assert_eq!(conn["connected"], 200, "{report:#}");
    assert_eq!(conn["failed"], 0, "{report:#}");
    assert!(conn["first_error"].is_null(), "{report:#}");
    assert!(conn["broker_rss_before_bytes"].as_u64().is_some_and(|v| v > 0), "{report:#}");
    assert!(conn["broker_rss_per_connection_bytes"].as_f64().is_some(), "{report:#}");
    assert!(conn["bench_rss_connected_bytes"].as_u64().is_some_and(|v| v > 0), "{report:#}");
}
