"""A real Apache Kafka 4.x for the tests: one node in KRaft mode (broker
and controller in one JVM) on loopback ports, from Maven Central's jars
(scripts/kafka-jars.sh, into the same cache directory the Rust tests of
crates/ferry-routes/tests/kafka use), on the machine's Java 17. A start
costs a few seconds and ~330 MiB, so a test module starts one and its
tests share it.

Java and Maven are required, not optional: without them the tests fail
saying what to install (scripts/test.sh installs both)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from conftest import free_port

REPO = Path(__file__).resolve().parent.parent
# Kafka's line once it accepts clients (the port opens with it).
STARTED = "Kafka Server started"
# How long a start may take on a loaded 2-core machine (measured: 2-4 s).
START_TIMEOUT = 90.0


def jars_dir() -> Path:
    """The Rust tests' cache: $CARGO_TARGET_DIR/tmp/kafka-lib."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "tmp" / "kafka-lib"


def _free_ports(count: int) -> list[int]:
    """`count` distinct free ports below the ephemeral range (`free_port`):
    the JVM takes seconds to bind them, time enough for a client
    connection's local end to take a port from that range."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


# The user of the SASL listeners (`Kafka.sasl_brokers`, PLAIN; and
# `Kafka.tls_brokers`, SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN over TLS).
SASL_USER, SASL_PASSWORD = "ferry", "ferry-secret"


class Kafka:
    def __init__(self):
        for program, install in [("java", "apt-get install default-jre-headless"),
                                 ("mvn", "apt-get install maven")]:
            assert shutil.which(program), (
                f"the Kafka tests start a real Kafka and need `{program}`: {install} "
                "(scripts/test.sh installs it)")
        self.jars = jars_dir()
        subprocess.run(["bash", str(REPO / "scripts/kafka-jars.sh"), str(self.jars)], check=True,
                       timeout=600)
        self.dir = Path(tempfile.mkdtemp(prefix="ferry-kafka-"))
        self.port, controller, self.sasl_port, self.tls_port = _free_ports(4)
        # The TLS listener's certificate (127.0.0.1 and localhost), from a
        # CA of the test's (`ca`), as a PEM keystore: key and chain in one file.
        from pki import make_pki
        pki = make_pki(self.dir)
        self.ca = pki.ca
        keystore = self.dir / "keystore.pem"
        keystore.write_text(pki.server.key.read_text() + pki.server.cert.read_text())
        (self.dir / "server.properties").write_text(
            "process.roles=broker,controller\n"
            "node.id=1\n"
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},SASL_SSL://127.0.0.1:{self.tls_port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},SASL_SSL://127.0.0.1:{self.tls_port}\n"
            "controller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\n"
            # A second listener that wants SASL PLAIN, with one user.
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN\n"
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{SASL_USER}="{SASL_PASSWORD}";\n'
            # A third over TLS that takes SCRAM (the user's credentials are
            # put in the metadata when the directory is formatted) or PLAIN.
            "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN\n"
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
            "listener.name.sasl_ssl.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{SASL_USER}="{SASL_PASSWORD}";\n'
            "listener.name.sasl_ssl.ssl.keystore.type=PEM\n"
            f"listener.name.sasl_ssl.ssl.keystore.location={keystore}\n"
            f"log.dirs={self.dir / 'data'}\n"
            # One node: internal topics with one replica, or a consumer
            # group gets nothing (and says nothing).
            "offsets.topic.replication.factor=1\n"
            "offsets.topic.num.partitions=1\n"
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\n"
            "transaction.state.log.num.partitions=1\n"
            "share.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n")
        # Without a configuration log4j2 logs errors only: no line to wait for.
        (self.dir / "log4j2.properties").write_text(
            "appender.file.type=File\n"
            "appender.file.name=file\n"
            f"appender.file.fileName={self.dir / 'server.log'}\n"
            "appender.file.layout.type=PatternLayout\n"
            "appender.file.layout.pattern=[%d] %p %m (%c)%n\n"
            "rootLogger.level=INFO\n"
            "rootLogger.appenderRef.file.ref=file\n")
        # A cluster id is 16 bytes in URL-safe base64; a fixed one will do
        # for a directory formatted once.
        scram = [arg for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"]
                 for arg in ["--add-scram",
                             f"{mechanism}=[name={SASL_USER},password={SASL_PASSWORD}]"]]
        subprocess.run(["java", "-cp", f"{self.jars}/*", "kafka.tools.StorageTool", "format",
                        "-t", "ZmVycnktdGVzdC1rYWZrYQ", "--standalone", "-c",
                        str(self.dir / "server.properties"), *scram],
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def brokers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_brokers(self) -> str:
        """The listener that wants SASL PLAIN (`SASL_USER`)."""
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def tls_brokers(self) -> str:
        """The listener that wants TLS (its certificate from `self.ca`)
        and SASL: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (`SASL_USER`)."""
        return f"127.0.0.1:{self.tls_port}"

    def start(self) -> None:
        log = self.dir / "server.log"
        before = log.read_text().count(STARTED) if log.exists() else 0
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", "-Xms512m", "-XX:+UseG1GC",
             f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
             "-cp", f"{self.jars}/*", "kafka.Kafka", str(self.dir / "server.properties")],
            stdout=subprocess.DEVNULL, stderr=open(self.dir / "stderr.log", "wb"))
        deadline = time.monotonic() + START_TIMEOUT
        # Kafka writes the line when it accepts clients: polled, as a log
        # file offers no way to wait for a line.
        while not (log.exists() and log.read_text().count(STARTED) > before):
            if self.proc.poll() is not None:
                raise AssertionError(f"Kafka exited ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"Kafka did not start in {START_TIMEOUT}s:\n{self.tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown, ~2 s), SIGKILL after 30 s."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def failure_context(self) -> str:
        """What a failed test's report shows of Kafka: the group
        coordinator's lines (joins, rebalances, fencing), then the log's tail."""
        path = self.dir / "server.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        groups = [line for line in lines if "GroupCoordinator" in line or "GroupMetadata" in line]
        return "--- group coordinator\n" + "\n".join(groups[-40:]) + "\n" + self.tail()

    def tail(self) -> str:
        text = ""
        for name in ["server.log", "stderr.log"]:
            path = self.dir / name
            lines = path.read_text(errors="replace").splitlines() if path.exists() else []
            text += f"--- {name}\n" + "\n".join(lines[-30:]) + "\n"
        return text
