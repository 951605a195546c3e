//! The http endpoint against real HTTP servers started here on ephemeral
//! ports: axum over TCP and over TLS (with a CA made by `openssl` for the
//! test), and a bare socket that never answers.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use axum::Router;
use bytes::Bytes;
use ferry_broker::endpoint::RoutedMessage;
use ferry_broker::Message;
use ferry_mqtt::{ByteStr, PropertyValues, QoS};
use ferry_routes::config::{EndpointConfig, EndpointKind};
use ferry_routes::endpoints::http::{HttpEndpointConfig, HttpSink};
use ferry_routes::sink::Sink;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// What the test server received: one entry per POST.
struct Received {
    headers: HeaderMap,
    body: Bytes,
}

/// The test server's state: the answers to give, in order (then 200), and
/// what it received.
struct Server {
    answers: Mutex<VecDeque<Answer>>,
    received: mpsc::UnboundedSender<Received>,
    connections: AtomicUsize,
}

#[derive(Clone)]
struct Answer {
    status: StatusCode,
    body: String,
    close: bool,
}

impl Answer {
    fn status(status: u16) -> Answer {
        Answer { status: StatusCode::from_u16(status).unwrap(), body: String::new(), close: false }
    }
}

async fn ingest(State(server): State<Arc<Server>>, headers: HeaderMap, body: Bytes) -> Response {
    let _ = server.received.send(Received { headers, body });
    let answer = server.answers.lock().pop_front().unwrap_or(Answer::status(200));
    let mut response = (answer.status, answer.body).into_response();
    if answer.close {
        response.headers_mut().insert("connection", "close".parse().unwrap());
    }
    response
}

struct Running {
    server: Arc<Server>,
    received: mpsc::UnboundedReceiver<Received>,
    address: SocketAddr,
}

impl Running {
    fn answer(&self, answer: Answer) {
        self.server.answers.lock().push_back(answer);
    }

    async fn next(&mut self) -> Received {
        self.received.recv().await.expect("the server is running")
    }

    fn nothing_more(&mut self) {
        assert!(self.received.try_recv().is_err(), "an unexpected request");
    }

    fn connections(&self) -> usize {
        self.server.connections.load(Ordering::Relaxed)
    }
}

fn router() -> (Router, Arc<Server>, mpsc::UnboundedReceiver<Received>) {
    let (sender, received) = mpsc::unbounded_channel();
    let server = Arc::new(Server {
        answers: Mutex::new(VecDeque::new()),
        received: sender,
        connections: AtomicUsize::new(0),
    });
    let router = Router::new().route("/ingest", post(ingest)).with_state(server.clone());
    (router, server, received)
}

async fn http_server() -> Running {
    let (router, server, received) = router();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let counted = server.clone();
    let listener = listener.tap_io(move |_| {
        counted.connections.fetch_add(1, Ordering::Relaxed);
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    Running { server, received, address }
}

fn sink(settings: Value) -> HttpSink {
    let config: HttpEndpointConfig = serde_json::from_value(settings).unwrap();
    HttpSink::new("cloud", &config).unwrap()
}

fn message(offset: u64, topic: &'static str, payload: &[u8]) -> RoutedMessage {
    let properties = PropertyValues {
        user_properties: vec![(ByteStr::from_static("site"), ByteStr::from_static("plant-3"))],
        ..PropertyValues::default()
    };
    RoutedMessage {
        offset,
        stored_bytes: 0,
        priority: 9,
        expires_at_ms: 0,
        message: Message::new(
            ByteStr::from_static(topic),
            Bytes::copy_from_slice(payload),
            QoS::AtLeastOnce,
            false,
            properties.into(),
            1,
        ),
        publisher: None,
    }
}

fn batch() -> Vec<RoutedMessage> {
    vec![
        message(10, "plant/3/temp", br#"{"t": 21.5}"#),
        message(11, "plant/3/state", b"running"),
        message(12, "plant/3/raw", &[0xff, 0xfe]),
    ]
}

#[tokio::test]
async fn a_batch_is_one_post_of_a_json_array_with_its_headers_and_token() {
    let mut server = http_server().await;
    let mut sink = sink(json!({
        "url": format!("http://{}/ingest", server.address),
        "headers": {"X-Site": "plant-3"},
        "bearer_token": "t0ken",
    }));
    sink.connect().await.unwrap();
    let sent = sink.send(&batch()).await.unwrap();
    assert!(sent.rejected.is_empty());

    let request = server.next().await;
    server.nothing_more();
    assert_eq!(request.headers["content-type"], "application/json");
    assert_eq!(request.headers["authorization"], "Bearer t0ken");
    assert_eq!(request.headers["x-site"], "plant-3");
    assert!(request.headers["user-agent"].to_str().unwrap().starts_with("ferry/"));
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    let messages = body.as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0]["topic"], json!("plant/3/temp"));
    assert_eq!(messages[0]["payload"], json!({"t": 21.5}));
    assert_eq!(messages[0]["qos"], json!(1));
    assert_eq!(messages[0]["retain"], json!(false));
    assert_eq!(messages[0]["properties"], json!({"user_properties": [["site", "plant-3"]]}));
    assert!(messages[0]["received_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(messages[1]["payload"], json!("running"));
    assert_eq!(messages[2]["payload_base64"], json!("//4="));
    assert!(messages[2].get("payload").is_none());
}

#[tokio::test]
async fn ndjson_is_one_object_per_line() {
    let mut server = http_server().await;
    let mut sink = sink(json!({
        "url": format!("http://{}/ingest", server.address),
        "format": "ndjson",
    }));
    sink.connect().await.unwrap();
    sink.send(&batch()).await.unwrap();

    let request = server.next().await;
    assert_eq!(request.headers["content-type"], "application/x-ndjson");
    assert!(request.headers.get("authorization").is_none());
    let text = std::str::from_utf8(&request.body).unwrap();
    let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert!(text.ends_with('\n'));
    assert_eq!(lines[0]["payload"], json!({"t": 21.5}));
    assert_eq!(lines[2]["topic"], json!("plant/3/raw"));
}

#[tokio::test]
async fn batches_share_one_kept_alive_connection_and_a_closed_one_is_reopened() {
    let mut server = http_server().await;
    let mut sink = sink(json!({"url": format!("http://{}/ingest", server.address)}));
    sink.connect().await.unwrap();
    for _ in 0..3 {
        sink.send(&batch()).await.unwrap();
        server.next().await;
    }
    assert_eq!(server.connections(), 1);

    // The server closes after its answer; the next batch goes on a new
    // connection, with no error for the flow to back off on.
    server.answer(Answer { close: true, ..Answer::status(200) });
    sink.send(&batch()).await.unwrap();
    server.next().await;
    sink.send(&batch()).await.unwrap();
    server.next().await;
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn a_5xx_is_an_error_and_the_same_batch_goes_through_when_sent_again() {
    let mut server = http_server().await;
    let mut sink = sink(json!({"url": format!("http://{}/ingest", server.address)}));
    sink.connect().await.unwrap();
    server.answer(Answer::status(500));
    let error = sink.send(&batch()).await.unwrap_err().to_string();
    assert!(error.contains("500"), "{error}");
    let first = server.next().await.body;

    // As the flow does after a failure: connect, then send the batch again.
    sink.connect().await.unwrap();
    assert!(sink.send(&batch()).await.unwrap().rejected.is_empty());
    let again = server.next().await.body;
    let topics = |body: &Bytes| -> Vec<Value> {
        let body: Value = serde_json::from_slice(body).unwrap();
        body.as_array().unwrap().iter().map(|message| message["topic"].clone()).collect()
    };
    assert_eq!(topics(&first), topics(&again));
}

#[tokio::test]
async fn throttling_and_request_timeout_answers_are_retried_not_dropped() {
    let mut server = http_server().await;
    let mut sink = sink(json!({"url": format!("http://{}/ingest", server.address)}));
    for status in [429, 408, 503] {
        server.answer(Answer::status(status));
        let error = sink.send(&batch()).await.unwrap_err().to_string();
        assert!(error.contains(&status.to_string()), "{error}");
        server.next().await;
    }
}

#[tokio::test]
async fn a_4xx_drops_every_message_of_the_batch_with_its_reason() {
    let mut server = http_server().await;
    let mut sink = sink(json!({"url": format!("http://{}/ingest", server.address)}));
    server.answer(Answer {
        body: "{\"error\": \"field t is not a number\"}".into(),
        ..Answer::status(400)
    });
    let sent = sink.send(&batch()).await.unwrap();
    assert_eq!(sent.rejected, vec![(10, "http_400"), (11, "http_400"), (12, "http_400")]);
    server.next().await;
    // The connection outlives a refusal.
    sink.send(&batch()).await.unwrap();
    server.next().await;
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn an_answer_longer_than_the_read_bound_costs_its_connection_not_the_batch() {
    let mut server = http_server().await;
    let mut sink = sink(json!({"url": format!("http://{}/ingest", server.address)}));
    // 64 KiB are read so the connection can be reused; past that, it is
    // dropped rather than drained.
    server.answer(Answer { body: "x".repeat(200 << 10), ..Answer::status(404) });
    let sent = sink.send(&batch()).await.unwrap();
    assert_eq!(sent.rejected.len(), 3);
    server.next().await;
    sink.send(&batch()).await.unwrap();
    server.next().await;
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn a_server_that_never_answers_is_an_error_within_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    // Accepts and holds every connection, reading nothing, answering
    // nothing.
    tokio::spawn(async move {
        let mut held: Vec<TcpStream> = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let mut sink = sink(json!({
        "url": format!("http://{address}/ingest"),
        "timeout": "300ms",
    }));
    sink.connect().await.unwrap();
    let started = Instant::now();
    let error = sink.send(&batch()).await.unwrap_err().to_string();
    let took = started.elapsed();
    assert!(error.contains("no answer within 300ms"), "{error}");
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_refused_connection_is_an_error() {
    let address = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    // The listener is dropped: nothing listens there any more.
    let mut sink = sink(json!({"url": format!("http://{address}/ingest")}));
    let error = sink.connect().await.unwrap_err().to_string();
    assert!(error.starts_with(&format!("POST http://{address}/ingest: cannot connect")), "{error}");
    assert!(sink.send(&batch()).await.is_err());
}

#[tokio::test]
async fn the_token_appears_in_no_error() {
    let address = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let mut sink = sink(json!({
        "url": format!("http://{address}/ingest?code=query-s3cret"),
        "bearer_token": "token-s3cret",
        "headers": {"x-api-key": "header-s3cret"},
    }));
    let error = sink.send(&batch()).await.unwrap_err().to_string();
    assert!(!error.contains("s3cret"), "{error}");
}

#[test]
fn an_endpoint_table_with_type_http_reads_its_settings_and_refuses_unknown_ones() {
    let config: EndpointConfig = serde_json::from_value(json!({
        "type": "http",
        "url": "https://cloud.example.com/ingest",
        "timeout": "2s",
        "batch": {"max_messages": 100},
    }))
    .unwrap();
    let EndpointKind::Http(http) = &config.kind else { panic!("{:?}", config.kind) };
    assert_eq!(http.url, "https://cloud.example.com/ingest");
    assert_eq!(http.timeout.0, Duration::from_secs(2));
    assert_eq!(config.flow.batch.max_messages, 100);

    let error = serde_json::from_value::<EndpointConfig>(json!({
        "type": "http",
        "url": "http://x/",
        "bearer": "oops",
    }))
    .unwrap_err()
    .to_string();
    assert!(error.starts_with("http endpoint: unknown field `bearer`"), "{error}");
}

/// A CA and a server certificate it signed for `localhost` and
/// 127.0.0.1, made with the `openssl` command in `dir`.
fn make_certificates(dir: &Path, ca: &str) {
    let openssl = |args: &[&str]| {
        let output = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl command, to make the test's certificates");
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let ca_key = format!("{ca}.key");
    let ca_pem = format!("{ca}.pem");
    // Distinct names: a CA of the same name would be taken for the issuer
    // and fail on the signature instead.
    let subject = format!("/CN=Ferry test {ca}");
    let mut args = vec!["req", "-x509"];
    args.extend(ec);
    args.extend(["-keyout", &ca_key, "-out", &ca_pem, "-days", "2", "-subj", &subject]);
    args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    args.extend(["-addext", "keyUsage=critical,keyCertSign"]);
    openssl(&args);
    if ca != "ca" {
        return;
    }
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend(["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]);
    openssl(&args);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    ]);
}

/// axum over TLS: the handshake is done in `accept`, which is enough for
/// a test server that serves one client.
struct TlsListener {
    tcp: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, address)) = self.tcp.accept().await else { continue };
            // A client that refuses the certificate fails here; the
            // server goes on to the next.
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, address);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

async fn https_server(dir: &Path) -> Running {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certificates = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .unwrap();
    let (router, server, received) = router();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = tcp.local_addr().unwrap();
    let listener = TlsListener { tcp, acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)) };
    tokio::spawn(async move { axum::serve(listener, router).await });
    Running { server, received, address }
}

#[tokio::test]
async fn https_with_a_private_ca_from_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    make_certificates(dir.path(), "ca");
    make_certificates(dir.path(), "other-ca");
    let mut server = https_server(dir.path()).await;
    let url = format!("https://localhost:{}/ingest", server.address.port());

    let mut trusting = sink(json!({"url": url, "ca_file": dir.path().join("ca.pem")}));
    trusting.connect().await.unwrap();
    assert!(trusting.send(&batch()).await.unwrap().rejected.is_empty());
    let body: Value = serde_json::from_slice(&server.next().await.body).unwrap();
    assert_eq!(body.as_array().unwrap().len(), 3);

    // By IP address too: the certificate names 127.0.0.1.
    let by_ip = format!("https://127.0.0.1:{}/ingest", server.address.port());
    let mut by_ip = sink(json!({"url": by_ip, "ca_file": dir.path().join("ca.pem")}));
    by_ip.send(&batch()).await.unwrap();
    server.next().await;

    // A server whose certificate the CA did not sign is refused.
    let mut distrusting = sink(json!({"url": url, "ca_file": dir.path().join("other-ca.pem")}));
    let error = distrusting.connect().await.unwrap_err().to_string();
    assert!(error.contains("TLS handshake failed") && error.contains("UnknownIssuer"), "{error}");
    server.nothing_more();
}

/// The whole path: a message published on the broker is stored, routed,
/// taken by the endpoint's flow and POSTed; a refused batch is counted
/// under its reason and taken off the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_messages_reach_the_server_through_the_flow() {
    use ferry_broker::{BrokerConfig, DurabilityConfig};
    use ferry_routes::config::RoutesConfig;
    use ferry_routes::RoutesService;
    use std::collections::BTreeMap;

    let mut server = http_server().await;
    let dir = tempfile::tempdir().unwrap();
    let durability = DurabilityConfig { enabled: true, ..DurabilityConfig::default() };
    let broker =
        ferry_broker::Broker::open(BrokerConfig::default(), &durability, dir.path()).unwrap();
    let routes: RoutesConfig =
        serde_json::from_value(json!({"up": {"route": "FROM telemetry/# INTO cloud"}})).unwrap();
    let endpoint: EndpointConfig = serde_json::from_value(json!({
        "type": "http",
        "url": format!("http://{}/ingest", server.address),
        "format": "ndjson",
    }))
    .unwrap();
    let endpoints = BTreeMap::from([("cloud".to_owned(), endpoint)]);
    let service = RoutesService::start(broker.clone(), &routes, &endpoints).await.unwrap();

    let publish = |topic: &'static str, payload: &'static [u8]| {
        broker.publish(Message::new(
            ByteStr::from_static(topic),
            Bytes::from_static(payload),
            QoS::AtLeastOnce,
            false,
            Default::default(),
            0,
        ));
    };
    publish("telemetry/a", br#"{"t": 1}"#);
    publish("elsewhere/b", br#"{"t": 2}"#);
    let line: Value = serde_json::from_slice(&server.next().await.body).unwrap();
    assert_eq!(line["topic"], json!("telemetry/a"));
    assert_eq!(line["payload"], json!({"t": 1}));

    server.answer(Answer::status(422));
    publish("telemetry/c", b"refused");
    server.next().await;
    publish("telemetry/d", b"accepted");
    let line: Value = serde_json::from_slice(&server.next().await.body).unwrap();
    assert_eq!(line["payload"], json!("accepted"));
    server.nothing_more();

    // The server has the last batch a moment before the flow records its
    // answer, and the figures have nothing to await: poll, with a bound.
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        let status = service.status().into_iter().find(|status| status.name == "cloud").unwrap();
        let settled = status.figures.sent == 2 && status.queued.iter().sum::<usize>() == 0;
        if settled || Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(status.figures.sent, 2);
    assert_eq!(status.figures.dropped.get("http_422"), Some(&1));
    assert_eq!(status.queued.iter().sum::<usize>(), 0);
    service.stop().await;
}
