//! The `mqtt` endpoint against real brokers: Debian's Mosquitto started
//! per test on an ephemeral port, read back with `mosquitto_sub`, and
//! (for the reverse direction) a real Ferry broker in-process with its
//! durable log in a temporary directory.
//!
//! Nothing here sleeps to wait: each step waits for the event it needs
//! (a log line, a SUBACK printed, a message stored). Timeouts are safety
//! nets that turn a hang into a failure.

use bytes::Bytes;
use ferry_broker::endpoint::RoutedMessage;
use ferry_broker::routing::{EndpointTarget, RouteSource, Router};
use ferry_broker::{Broker, BrokerConfig, DurabilityConfig, Message};
use ferry_mqtt::{ByteStr, Properties, QoS};
use ferry_routes::endpoints::mqtt::{MqttEndpointConfig, MqttSink, REJECTED_BY_ENDPOINT};
use ferry_routes::sink::Sink;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long any one step may take before the test is declared hung.
const SAFETY: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(SAFETY, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {} s", SAFETY.as_secs()))
}

/// A Mosquitto process with its configuration in a temporary directory.
struct Mosquitto {
    child: Child,
    /// The listener the uplink connects to.
    port: u16,
    /// A plain listener for the test's own clients (the TLS tests' uplink
    /// port is TLS).
    plain_port: u16,
    dir: tempfile::TempDir,
}

impl Mosquitto {
    /// Starts Mosquitto with a plain listener and `extra` configuration
    /// (settings per listener: what follows the plain listener applies to
    /// it), which may use `{dir}` for its temporary directory and `{port}`
    /// for a second free port (then the uplink's).
    async fn start(extra: &str) -> Mosquitto {
        let dir = tempfile::tempdir().unwrap();
        Mosquitto::start_in(dir, extra).await
    }

    async fn start_in(dir: tempfile::TempDir, extra: &str) -> Mosquitto {
        let plain_port = free_port();
        let second = free_port();
        let extra = extra
            .replace("{dir}", &dir.path().display().to_string())
            .replace("{port}", &second.to_string());
        let port = if extra.contains(&format!("listener {second}")) { second } else { plain_port };
        let conf = format!(
            "per_listener_settings true\nlog_dest stderr\nlog_type all\n\
             listener {plain_port} 127.0.0.1\nallow_anonymous true\n{extra}\n"
        );
        let path = dir.path().join("mosquitto.conf");
        std::fs::write(&path, conf).unwrap();
        let mut child = Command::new("/usr/sbin/mosquitto")
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            // Its log, on stderr: unbuffered, so each line comes as written.
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("mosquitto runs (Debian package mosquitto)");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        within("mosquitto start", async {
            let mut log = Vec::new();
            loop {
                let Some(line) = lines.next_line().await.unwrap() else {
                    panic!("mosquitto exited at start:\n{}", log.join("\n"));
                };
                if line.contains("running") {
                    break;
                }
                log.push(line);
            }
        })
        .await;
        // Keep reading its log, or a full pipe would stop it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Mosquitto { child, port, plain_port, dir }
    }

    fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
    }
}

/// A port free now. Mosquitto binds it right after; another process
/// taking it in between would fail the start loudly, not silently.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `mosquitto_sub` on `filter`, ready once its SUBACK is printed.
struct Subscriber {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

/// One message as `mosquitto_sub -F` printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Received {
    topic: String,
    payload: String,
    retained: bool,
    content_type: String,
    user_properties: String,
    expiry: String,
}

impl Subscriber {
    async fn start(port: u16, filter: &str, count: usize) -> Subscriber {
        // Line-buffered, or its debug lines (the SUBACK) would wait in
        // stdio's buffer while stdout is a pipe.
        let mut child = Command::new("stdbuf")
            .args(["-oL", "mosquitto_sub"])
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-V", "5", "-q", "1", "-d"])
            .args(["-t", filter, "-C", &count.to_string()])
            .args(["-F", "MSG|%t|%p|%r|%C|%P|%E"])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("mosquitto_sub runs (Debian package mosquitto-clients)");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        within("SUBACK", async {
            loop {
                let line = lines.next_line().await.unwrap().expect("mosquitto_sub exited");
                if line.contains("received SUBACK") {
                    break;
                }
            }
        })
        .await;
        Subscriber { _child: child, lines }
    }

    async fn receive(&mut self, count: usize) -> Vec<Received> {
        let mut received = Vec::with_capacity(count);
        within("messages at the subscriber", async {
            while received.len() < count {
                let line = self.lines.next_line().await.unwrap().expect("mosquitto_sub exited");
                let Some(message) = line.strip_prefix("MSG|") else { continue };
                let fields: Vec<&str> = message.split('|').collect();
                received.push(Received {
                    topic: fields[0].into(),
                    payload: fields[1].into(),
                    retained: fields[2] == "1",
                    content_type: fields[3].into(),
                    user_properties: fields[4].into(),
                    expiry: fields[5].into(),
                });
            }
        })
        .await;
        received
    }
}

fn settings(url: &str, more: serde_json::Value) -> MqttEndpointConfig {
    let mut object = serde_json::json!({ "url": url, "keep_alive_secs": 5 });
    object.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
    serde_json::from_value(object).unwrap()
}

fn local_broker() -> Arc<Broker> {
    Broker::new(BrokerConfig::default())
}

fn routed(offset: u64, topic: &str, payload: String) -> RoutedMessage {
    routed_with(offset, topic, payload, Properties::default(), false)
}

fn routed_with(
    offset: u64,
    topic: &str,
    payload: String,
    properties: Properties,
    retain: bool,
) -> RoutedMessage {
    RoutedMessage {
        offset,
        priority: 0,
        expires_at_ms: 0,
        stored_bytes: 0,
        message: Message::new(
            ByteStr::from(topic),
            Bytes::from(payload),
            QoS::AtLeastOnce,
            retain,
            properties,
            0,
        ),
        publisher: None,
    }
}

fn batch(count: u64) -> Vec<RoutedMessage> {
    (0..count).map(|i| routed(i, "telemetry/dev/1", format!("m{i:05}"))).collect()
}

async fn connected(config: &MqttEndpointConfig) -> MqttSink {
    let mut sink = MqttSink::new("cloud", config, local_broker()).unwrap();
    within("connect", sink.connect()).await.unwrap();
    sink
}

async fn thousand_in_order(protocol_version: &str) {
    let mosquitto = Mosquitto::start("").await;
    let mut subscriber = Subscriber::start(mosquitto.plain_port, "up/#", 1000).await;
    let config = settings(
        &mosquitto.url(),
        serde_json::json!({
            "protocol_version": protocol_version,
            "strip_prefix": "telemetry/",
            "remote_prefix": "up/",
        }),
    );
    let mut sink = connected(&config).await;
    let sent = within("send", sink.send(&batch(1000))).await.unwrap();
    assert!(sent.rejected.is_empty(), "{:?}", sent.rejected);
    let received = subscriber.receive(1000).await;
    for (i, message) in received.iter().enumerate() {
        assert_eq!(message.topic, "up/dev/1");
        assert_eq!(message.payload, format!("m{i:05}"), "in order");
    }
}

#[tokio::test]
async fn a_thousand_messages_arrive_in_order_over_mqtt_5() {
    thousand_in_order("5").await;
}

#[tokio::test]
async fn a_thousand_messages_arrive_in_order_over_mqtt_3_1_1() {
    thousand_in_order("3.1.1").await;
}

#[tokio::test]
async fn properties_and_retain_travel_with_the_message() {
    let mosquitto = Mosquitto::start("").await;
    let mut subscriber = Subscriber::start(mosquitto.plain_port, "telemetry/#", 2).await;
    let mut sink = connected(&settings(&mosquitto.url(), serde_json::json!({}))).await;
    let mut properties = Properties::default();
    properties.content_type = Some(ByteStr::from("application/json"));
    properties.user_properties.push((ByteStr::from("site"), ByteStr::from("plant-1")));
    properties.message_expiry_interval = Some(3600);
    let messages = vec![
        routed_with(1, "telemetry/a", "{}".into(), properties, false),
        routed_with(2, "telemetry/b", "last".into(), Properties::default(), true),
    ];
    let sent = within("send", sink.send(&messages)).await.unwrap();
    assert!(sent.rejected.is_empty());
    let received = subscriber.receive(2).await;
    assert_eq!(received[0].content_type, "application/json");
    assert_eq!(received[0].user_properties, "site:plant-1");
    let expiry: u32 = received[0].expiry.parse().unwrap();
    assert!((3590..=3600).contains(&expiry), "the remaining expiry, {expiry}");
    // A live subscriber sees RETAIN cleared (MQTT-3.3.1-9); a new one sees
    // the retained message.
    let mut late = Subscriber::start(mosquitto.plain_port, "telemetry/b", 1).await;
    let retained = late.receive(1).await;
    assert_eq!(retained[0].payload, "last");
    assert!(retained[0].retained);
}

#[tokio::test]
async fn the_window_honours_the_remotes_receive_maximum() {
    // Mosquitto announces max_inflight_messages as its Receive Maximum and
    // answers a QoS 2 message beyond it with PUBREC 0x97.
    let mosquitto = Mosquitto::start("max_inflight_messages 5").await;
    let mut subscriber = Subscriber::start(mosquitto.plain_port, "telemetry/#", 300).await;
    let config = settings(&mosquitto.url(), serde_json::json!({ "qos": 2, "max_inflight": 100 }));
    let mut sink = connected(&config).await;
    assert_eq!(sink.window(), Some(5));
    let sent = within("send", sink.send(&batch(300))).await.unwrap();
    assert!(sent.rejected.is_empty(), "{:?}", &sent.rejected[..sent.rejected.len().min(5)]);
    let received = subscriber.receive(300).await;
    assert_eq!(received.last().unwrap().payload, "m00299");
}

#[tokio::test]
async fn a_message_the_remote_refuses_is_reported_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("acl"), "topic readwrite telemetry/ok/#\n").unwrap();
    let mosquitto = Mosquitto::start_in(dir, "acl_file {dir}/acl").await;
    let mut subscriber = Subscriber::start(mosquitto.plain_port, "telemetry/ok/#", 2).await;
    let mut sink = connected(&settings(&mosquitto.url(), serde_json::json!({}))).await;
    let messages = vec![
        routed(10, "telemetry/ok/1", "a".into()),
        routed(11, "telemetry/secret", "b".into()),
        routed(12, "telemetry/ok/2", "c".into()),
    ];
    let sent = within("send", sink.send(&messages)).await.unwrap();
    assert_eq!(sent.rejected, vec![(11, REJECTED_BY_ENDPOINT)]);
    let received = subscriber.receive(2).await;
    assert_eq!([&received[0].payload, &received[1].payload], ["a", "c"]);
}

#[tokio::test]
async fn send_fails_when_the_remote_goes_away_mid_batch() {
    let mut mosquitto = Mosquitto::start("").await;
    let mut subscriber = Subscriber::start(mosquitto.plain_port, "telemetry/#", 1).await;
    let mut sink = connected(&settings(&mosquitto.url(), serde_json::json!({}))).await;
    let big: Vec<RoutedMessage> =
        (0..20_000).map(|i| routed(i, "telemetry/x", format!("{i:01000}"))).collect();
    let sending = tokio::spawn(async move {
        let result = sink.send(&big).await;
        (sink, result)
    });
    // The batch is under way once a message of it has arrived.
    subscriber.receive(1).await;
    mosquitto.kill().await;
    let (mut sink, result) = within("send to fail", sending).await.unwrap();
    let error = result.expect_err("the remote went away");
    assert!(error.to_string().contains("connection lost"), "{error}");
    let again = within("reconnect", sink.connect()).await;
    assert!(again.is_err(), "nobody listens any more");
}

#[tokio::test]
async fn send_fails_when_the_remote_stops_answering() {
    let mosquitto = Mosquitto::start("").await;
    let config = settings(&mosquitto.url(), serde_json::json!({ "keep_alive_secs": 1 }));
    let mut sink = connected(&config).await;
    mosquitto.signal("-STOP");
    let result = within("send to fail", sink.send(&batch(10))).await;
    mosquitto.signal("-CONT");
    let error = result.expect_err("no acknowledgement comes");
    assert!(error.to_string().contains("2 s"), "{error}");
}

#[tokio::test]
async fn closed_resolves_when_an_idle_connection_drops() {
    let mut mosquitto = Mosquitto::start("").await;
    let sink = connected(&settings(&mosquitto.url(), serde_json::json!({}))).await;
    let closed = sink.closed();
    mosquitto.kill().await;
    let why = within("closed", closed).await;
    assert!(why.to_string().contains("closed the connection"), "{why}");
}

#[tokio::test]
async fn an_idle_connection_is_kept_alive() {
    // Mosquitto drops a client it has not heard from for 1.5 times its
    // keep-alive; the sink must ping while it has nothing to send. Here
    // the timeout is the assertion: the connection must outlive it.
    let mosquitto = Mosquitto::start("").await;
    let config = settings(&mosquitto.url(), serde_json::json!({ "keep_alive_secs": 1 }));
    let mut sink = connected(&config).await;
    let idle = tokio::time::timeout(Duration::from_millis(3500), sink.closed()).await;
    assert!(idle.is_err(), "the connection closed while idle: {:?}", idle.unwrap());
    let sent = within("send", sink.send(&batch(10))).await.unwrap();
    assert!(sent.rejected.is_empty());
}

#[tokio::test]
async fn a_refused_connect_names_the_reason() {
    let mosquitto = Mosquitto::start("listener {port} 127.0.0.1\nallow_anonymous false").await;
    let config = settings(&mosquitto.url(), serde_json::json!({}));
    let mut sink = MqttSink::new("cloud", &config, local_broker()).unwrap();
    let error = within("connect", sink.connect()).await.unwrap_err();
    assert!(error.to_string().contains("refused the connection: NotAuthorized"), "{error}");
}

fn openssl(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl {args:?}");
}

/// A self-signed CA, `ca.pem` and `ca.key`, made with the openssl command.
fn make_ca(dir: &Path, cn: &str) {
    let subject = format!("/CN={cn}");
    let mut args = vec!["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key"];
    args.extend(["-out", "ca.pem", "-days", "2", "-subj", &subject]);
    openssl(dir, &args);
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate,
/// made with the openssl command in `dir`.
fn make_certificates(dir: &Path) {
    make_ca(dir, "ferry-test-ca");
    // Extensions make them X.509 v3, which WebPKI requires.
    let server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n";
    std::fs::write(dir.join("server.ext"), server_ext).unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for (name, cn) in [("server", "localhost"), ("client", "edge-1")] {
        let [key, csr, pem, ext] =
            ["key", "csr", "pem", "ext"].map(|kind| format!("{name}.{kind}"));
        let subject = format!("/CN={cn}");
        let mut request = vec!["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key];
        request.extend(["-out", &csr, "-subj", &subject]);
        openssl(dir, &request);
        let mut sign = vec!["x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key"];
        sign.extend(["-CAcreateserial", "-out", &pem, "-days", "2", "-extfile", &ext]);
        openssl(dir, &sign);
    }
}

async fn tls_mosquitto() -> Mosquitto {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    make_certificates(dir.path());
    // Started as root, Mosquitto reads its files as the user `mosquitto`.
    let readable = |path: &Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    readable(dir.path(), 0o755);
    readable(&dir.path().join("server.key"), 0o644);
    let extra = "listener {port} 127.0.0.1\nallow_anonymous true\ncafile {dir}/ca.pem\n\
                 certfile {dir}/server.pem\nkeyfile {dir}/server.key\nrequire_certificate true";
    Mosquitto::start_in(dir, extra).await
}

fn tls_settings(mosquitto: &Mosquitto, ca: PathBuf) -> MqttEndpointConfig {
    let dir = mosquitto.dir.path();
    settings(
        &format!("mqtts://127.0.0.1:{}", mosquitto.port),
        serde_json::json!({
            "ca_file": ca,
            "cert_file": dir.join("client.pem"),
            "key_file": dir.join("client.key"),
        }),
    )
}

#[tokio::test]
async fn mutual_tls_with_a_ca_file_and_a_client_certificate() {
    let mosquitto = tls_mosquitto().await;
    let mut subscriber = Subscriber::start(mosquitto.plain_port, "telemetry/#", 100).await;
    let config = tls_settings(&mosquitto, mosquitto.dir.path().join("ca.pem"));
    let mut sink = connected(&config).await;
    let sent = within("send", sink.send(&batch(100))).await.unwrap();
    assert!(sent.rejected.is_empty());
    let received = subscriber.receive(100).await;
    assert_eq!(received[99].payload, "m00099");
}

#[tokio::test]
async fn tls_refuses_a_remote_the_ca_does_not_vouch_for() {
    let mosquitto = tls_mosquitto().await;
    let other = tempfile::tempdir().unwrap();
    make_ca(other.path(), "someone-else");
    let config = tls_settings(&mosquitto, other.path().join("ca.pem"));
    let mut sink = MqttSink::new("cloud", &config, local_broker()).unwrap();
    let error = within("connect", sink.connect()).await.unwrap_err();
    assert!(error.to_string().contains("TLS handshake"), "{error}");
}

/// Routes `commands/#` to the endpoint `probe`, so that what arrives
/// locally can be read back from the durable log.
struct ToProbe;

impl Router for ToProbe {
    fn route(
        &self,
        message: &Message,
        _source: RouteSource<'_>,
        _now_ms: u64,
        out: &mut Vec<EndpointTarget>,
    ) {
        if message.topic.starts_with("commands/") {
            out.push(EndpointTarget { endpoint: "probe".into(), priority: 0, expires_at_ms: 0 });
        }
    }
}

#[tokio::test]
async fn commands_from_the_remote_are_stored_locally_under_the_mapped_topic() {
    let mosquitto = Mosquitto::start("").await;
    let data = tempfile::tempdir().unwrap();
    let durability = DurabilityConfig { min_free_disk_bytes: 0, ..DurabilityConfig::default() };
    let local = Broker::open(BrokerConfig::default(), &durability, data.path()).unwrap();
    local.set_router(Some(Arc::new(ToProbe)));
    let mut probe = local.endpoint_queue("probe").unwrap();
    let config = settings(
        &mosquitto.url(),
        serde_json::json!({
            "subscribe": [{ "remote": "commands/edge-1/#", "local": "commands/#", "qos": 1 }],
        }),
    );
    let mut sink = MqttSink::new("cloud", &config, local.clone()).unwrap();
    // Returns once the remote has acknowledged the SUBSCRIBE.
    within("connect", sink.connect()).await.unwrap();
    let status = Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &mosquitto.port.to_string(), "-V", "5", "-q", "1"])
        .args(["-t", "commands/edge-1/valve/3", "-m", "close", "-D", "publish", "user-property"])
        .args(["by", "operator"])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    within("stored locally", probe.stored()).await;
    let offsets = probe.take(0, 10);
    assert_eq!(offsets.len(), 1);
    let command = probe.read(offsets[0]).unwrap().message;
    assert_eq!(command.topic, "commands/valve/3");
    assert_eq!(command.payload, "close");
    assert_eq!(command.qos, QoS::AtLeastOnce);
    assert_eq!(
        command.properties.user_properties,
        vec![(ByteStr::from("by"), ByteStr::from("operator"))]
    );
    // Sending upstream still works while the reverse direction is up.
    let sent = within("send", sink.send(&batch(10))).await.unwrap();
    assert!(sent.rejected.is_empty());
    local.close_store();
}
