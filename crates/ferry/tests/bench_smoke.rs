//! `ferry bench` run as a subprocess against a real `ferry serve`: every
//! scenario completes with full delivery and writes well-formed JSON.
//! Small counts, and never an assertion on speed.

mod support;

use serde_json::Value;
use std::process::Command;
use support::Ferry;

/// Runs `ferry bench <args> --json FILE` against `ferry` and returns the JSON.
fn bench(ferry: &Ferry, name: &str, args: &[&str]) -> Value {
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
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("p99.9"), "the table is printed:\n{stdout}");
    let text = std::fs::read_to_string(&json).expect("JSON written");
    let _ = std::fs::remove_file(&json);
    serde_json::from_str(&text).expect("JSON parses")
}

fn assert_complete(report: &Value, sent: u64) {
    let delivery = &report["delivery"];
    assert_eq!(delivery["sent"], sent, "{report:#}");
    assert_eq!(delivery["received"], sent, "{report:#}");
    assert_eq!(delivery["delivered_percent"], 100.0, "{report:#}");
    assert_eq!(delivery["lost"], 0, "{report:#}");
    assert_eq!(delivery["duplicates"], 0, "{report:#}");
    let latency = &report["latency"];
    assert_eq!(latency["count"], sent);
    for p in ["p50_us", "p75_us", "p90_us", "p95_us", "p99_us", "p99_9_us", "max_us"] {
        assert!(latency[p].as_f64().is_some_and(|v| v > 0.0), "{p} in {latency}");
    }
    assert!(report["broker"]["cpu_seconds"].as_f64().is_some(), "broker sampled: {report:#}");
    assert!(report["bench"]["rss_end_bytes"].as_u64().is_some_and(|v| v > 0));
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

#[test]
fn p2p_open_loop_delivers_everything() {
    let ferry = Ferry::start("bench-p2p");
    let args = ["p2p", "--pairs", "5", "--rate", "2000", "--count", "500", "--qos", "1"];
    let report = bench(&ferry, "p2p", &args);
    assert_eq!(report["latency_from"], "intended send time");
    assert_complete(&report, 500);
}
