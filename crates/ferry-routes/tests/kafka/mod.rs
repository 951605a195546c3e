//! A real Apache Kafka 4.x for tests: one node in KRaft mode (broker and
//! controller in one JVM) on loopback ports, from Maven Central's jars
//! (`scripts/kafka-jars.sh`), on the machine's Java 17. Starting one costs
//! ~3 s and ~330 MiB, so a test binary starts one and its steps share it.
//!
//! Java and Maven are required, not optional: without them the tests fail
//! saying what to install (scripts/test.sh installs both), rather than
//! skipping and passing.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kafka's line once it accepts clients (the port opens with it).
const STARTED: &str = "Kafka Server started";
/// How long a start may take on a loaded 2-core machine (measured: 2-4 s).
const START_TIMEOUT: Duration = Duration::from_secs(90);

pub struct Kafka {
    /// The run's directory: configuration, data, log. Removed on drop.
    dir: tempfile::TempDir,
    jars: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Kafka {
    /// Fetches the jars if need be, formats a fresh data directory and
    /// starts Kafka; returns once it accepts clients.
    pub fn start() -> Kafka {
        require("java", "apt-get install openjdk-17-jre-headless (or default-jre-headless)");
        require("mvn", "apt-get install maven");
        let jars = jars();
        let dir = tempfile::Builder::new().prefix("ferry-kafka-").tempdir().expect("a temp dir");
        let (port, controller) = free_ports();
        let data = dir.path().join("data");
        fs::write(
            dir.path().join("server.properties"),
            format!(
                "process.roles=broker,controller\n\
                 node.id=1\n\
                 controller.quorum.bootstrap.servers=127.0.0.1:{controller}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
                 log.dirs={data}\n\
                 offsets.topic.replication.factor=1\n\
                 offsets.topic.num.partitions=1\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\n\
                 transaction.state.log.num.partitions=1\n\
                 share.coordinator.state.topic.replication.factor=1\n\
                 share.coordinator.state.topic.min.isr=1\n\
                 group.initial.rebalance.delay.ms=0\n",
                data = data.display()
            ),
        )
        .expect("server.properties");
        // Without a configuration log4j2 logs errors only, and then there
        // is no line to wait for.
        fs::write(
            dir.path().join("log4j2.properties"),
            format!(
                "appender.file.type=File\n\
                 appender.file.name=file\n\
                 appender.file.fileName={}\n\
                 appender.file.layout.type=PatternLayout\n\
                 appender.file.layout.pattern=[%d] %p %m (%c)%n\n\
                 rootLogger.level=INFO\n\
                 rootLogger.appenderRef.file.ref=file\n",
                dir.path().join("server.log").display()
            ),
        )
        .expect("log4j2.properties");
        // A cluster id is 16 random bytes in URL-safe base64; any fixed
        // value will do for a directory formatted once.
        let format = Command::new("java")
            .args(["-cp", &classpath(&jars), "kafka.tools.StorageTool", "format"])
            .args(["-t", "ZmVycnktdGVzdC1rYWZrYQ", "--standalone", "-c"])
            .arg(dir.path().join("server.properties"))
            .stdout(Stdio::null())
            .output()
            .expect("java runs");
        assert!(
            format.status.success(),
            "formatting Kafka's data dir failed: {}",
            String::from_utf8_lossy(&format.stderr)
        );
        let mut kafka = Kafka { dir, jars, port, child: None };
        kafka.restart();
        kafka
    }

    /// `"127.0.0.1:PORT"`, for `bootstrap.servers`.
    pub fn brokers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts the JVM on the same data and ports (after `stop`).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "Kafka is running already");
        let log = self.dir.path().join("server.log");
        let logged_before =
            fs::read_to_string(&log).map_or(0, |text| text.matches(STARTED).count());
        let child = Command::new("java")
            .args(["-Xmx512m", "-Xms512m", "-XX:+UseG1GC"])
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                self.dir.path().join("log4j2.properties").display()
            ))
            .args(["-cp", &classpath(&self.jars), "kafka.Kafka"])
            .arg(self.dir.path().join("server.properties"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(self.dir.path().join("stderr.log")).expect("stderr.log"))
            .spawn()
            .expect("java starts");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = fs::read_to_string(&log).unwrap_or_default();
            if text.matches(STARTED).count() > logged_before {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|child| child.try_wait().ok()?) {
                self.child = None;
                panic!("Kafka exited ({status}) before it started:\n{}", self.tail());
            }
            if Instant::now() > deadline {
                self.stop();
                panic!("Kafka did not start within {START_TIMEOUT:?}:\n{}", self.tail());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM (a controlled shutdown, ~2 s) and waits for the JVM to go;
    /// SIGKILL if it has not within 30 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // `kill` of the shell: std can only SIGKILL, and a test needs no
        // unsafe for a signal.
        let _ = Command::new("sh").arg("-c").arg(format!("kill -TERM {}", child.id())).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The end of Kafka's log, for a failure message.
    fn tail(&self) -> String {
        let mut text = String::new();
        for name in ["server.log", "stderr.log"] {
            let whole = fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            let lines: Vec<&str> = whole.lines().collect();
            text.push_str(&format!("--- {name} (last lines)\n"));
            text.push_str(&lines[lines.len().saturating_sub(30)..].join("\n"));
            text.push('\n');
        }
        text
    }
}

/// The JVM goes with the test, passed or failed (a panic unwinds through
/// here): it would outlive the test run otherwise.
impl Drop for Kafka {
    fn drop(&mut self) {
        self.stop();
    }
}

fn require(program: &str, install: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        found,
        "the Kafka endpoint tests start a real Kafka and need `{program}` on PATH: {install} \
         (scripts/test.sh installs it)"
    );
}

/// Kafka's jars, fetched once into the target directory.
fn jars() -> PathBuf {
    let jars = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kafka-lib");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kafka-jars.sh");
    let fetched = Command::new("bash").arg(&script).arg(&jars).status().expect("bash runs");
    assert!(fetched.success(), "{} {} failed", script.display(), jars.display());
    jars
}

fn classpath(jars: &Path) -> String {
    format!("{}/*", jars.display())
}

/// Two distinct ports nobody listens on now (both bound at once, so the
/// system cannot hand out one twice). Another process could take one
/// before Kafka does; on a test machine that is rare enough.
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("a free port");
    let (first, second) = (bind(), bind());
    let port = |socket: &TcpListener| socket.local_addr().expect("its address").port();
    (port(&first), port(&second))
}
