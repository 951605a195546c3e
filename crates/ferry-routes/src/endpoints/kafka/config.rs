//! `[endpoints.NAME]` with `type = "kafka"`: the settings as written, their
//! checked form, and the librdkafka producer configuration made from them.
//! `validate` runs when the configuration is read, so a mistake names its
//! key and changes nothing.

use super::security::{KafkaSecurity, KafkaTls, Pem, Sasl, SaslMechanism};
use crate::endpoints::topic::TopicTemplate;
use crate::secret::Secret;
use crate::units::{Size, Span};
use rdkafka::ClientConfig;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// `[endpoints.NAME]` with `type = "kafka"`: produce each routed message
/// as one Kafka record.
///
/// ```toml
/// [endpoints.lake]
/// type = "kafka"
/// brokers = "kafka-1:9092,kafka-2:9092"
/// topic = "telemetry"
/// key = "{topic[1]}"
/// compression = "zstd"
/// tls = true
/// sasl_mechanism = "scram-sha-512"
/// sasl_username = "edge-1"
/// sasl_password = "…"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaEndpointConfig {
    /// Bootstrap servers, `"host:port,host:port"`: where the producer
    /// learns the cluster from; it then talks to each partition's leader.
    pub brokers: String,
    /// The Kafka topic. `{topic}` and `{topic[N]}` stand for the MQTT topic
    /// and its level N (from 0, as in route conditions); a message whose
    /// expansion is not a legal Kafka topic name is dropped, counted
    /// under `invalid_topic`.
    pub topic: String,
    /// The record key, a template like `topic`; Kafka partitions by it, so
    /// records of one key stay in order. Without it records have no key
    /// and are spread over the partitions.
    #[serde(default)]
    pub key: Option<String>,
    /// `none`, `gzip`, `snappy`, `lz4` (the default) or `zstd`.
    #[serde(default)]
    pub compression: Compression,
    /// The producer's `client.id`, which the brokers log and quota by;
    /// `ferry-<endpoint name>` by default.
    #[serde(default)]
    pub client_id: Option<String>,
    /// How long the producer keeps trying to deliver a record (retries
    /// included) before the batch counts as failed and the flow backs off.
    /// Default 30s.
    #[serde(default = "default_message_timeout")]
    pub message_timeout: Span,
    /// The largest record the producer sends (its `message.max.bytes`);
    /// a larger one is dropped, counted under `too_large`. Default
    /// 1,000,000, Kafka's own default for topics.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: Size,
    /// Talk to the brokers over TLS, checking their certificates
    /// (against `tls_ca_file`, or the system's CA certificates).
    #[serde(default)]
    pub tls: bool,
    /// PEM CA certificates the brokers' must chain to (with `tls`).
    #[serde(default)]
    pub tls_ca_file: Option<PathBuf>,
    /// A PEM client certificate and its key, for brokers that want mutual
    /// TLS (with `tls`).
    #[serde(default)]
    pub tls_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub tls_key_file: Option<PathBuf>,
    /// `plain`, `scram-sha-256` or `scram-sha-512`: authenticate as
    /// `sasl_username` with `sasl_password`. PLAIN sends the password as
    /// it is: use it with `tls`, or on a network Ferry and the cluster
    /// trust.
    #[serde(default)]
    pub sasl_mechanism: Option<String>,
    #[serde(default)]
    pub sasl_username: Option<String>,
    #[serde(default)]
    pub sasl_password: Option<Secret>,
}

/// The compression codec of the record batches the producer sends.
///
/// lz4 is the default: on an edge box's few cores it costs the least CPU
/// of the codecs for a useful ratio on JSON telemetry, it is built into
/// librdkafka, and every Kafka since 0.10 reads it. zstd packs tighter for
/// more CPU (Kafka 2.1 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    #[default]
    Lz4,
    Zstd,
}

impl Compression {
    /// The value of librdkafka's `compression.codec`.
    pub fn codec(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

fn default_message_timeout() -> Span {
    Span(Duration::from_secs(30))
}

fn default_max_message_bytes() -> Size {
    Size(1_000_000)
}

/// Bounds of `message_timeout`: below a second a broker's leader election
/// fails every batch; above an hour an outage goes unnoticed by the flow
/// (and its metrics) for too long.
const MESSAGE_TIMEOUT_MIN: Duration = Duration::from_secs(1);
const MESSAGE_TIMEOUT_MAX: Duration = Duration::from_secs(3600);

/// Bounds of `max_message_bytes`: librdkafka's own minimum, and the
/// flow's largest batch (a record cannot be bigger than the batch that
/// carries it).
const MAX_MESSAGE_BYTES_MIN: u64 = 1000;
const MAX_MESSAGE_BYTES_MAX: u64 = 16 << 20;

/// Kafka's limit on a topic name's length.
const TOPIC_NAME_MAX: usize = 249;

/// A setting that is wrong, with its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {reason}")]
pub struct KafkaConfigError {
    pub key: &'static str,
    pub reason: String,
}

fn wrong(key: &'static str, reason: impl Into<String>) -> KafkaConfigError {
    KafkaConfigError { key, reason: reason.into() }
}

/// The settings once checked, in the form the sink uses.
#[derive(Debug, Clone)]
pub struct Checked {
    pub topic: TopicTemplate,
    /// The topic when it has no placeholders: checked once, here.
    pub fixed_topic: Option<String>,
    pub key: Option<TopicTemplate>,
    pub message_timeout: Duration,
}

impl KafkaEndpointConfig {
    /// Settings with every default, for producers made elsewhere than
    /// from `[endpoints.NAME]` (the twins' Kafka connections), so that
    /// Ferry has one producer setup.
    pub fn with_defaults(brokers: String, topic: String) -> KafkaEndpointConfig {
        KafkaEndpointConfig {
            brokers,
            topic,
            key: None,
            compression: Compression::default(),
            client_id: None,
            message_timeout: default_message_timeout(),
            max_message_bytes: default_max_message_bytes(),
            tls: false,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
        }
    }

    /// TLS and SASL as set: a mechanism with both a user and a password,
    /// or none of the three; files only with `tls`, a key with its
    /// certificate, each one that exists.
    pub fn security(&self) -> Result<KafkaSecurity, KafkaConfigError> {
        let file = |key: &'static str, path: &Option<PathBuf>| match path {
            None => Ok(None),
            Some(_) if !self.tls => Err(wrong(key, "is for TLS: set tls = true")),
            Some(path) if !path.is_file() => {
                Err(wrong(key, format!("{} is not a readable file", path.display())))
            }
            Some(path) => Ok(Some(Pem::File(path.clone()))),
        };
        let ca = file("tls_ca_file", &self.tls_ca_file)?;
        let client = match (
            file("tls_cert_file", &self.tls_cert_file)?,
            file("tls_key_file", &self.tls_key_file)?,
        ) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err(wrong("tls_key_file", "is needed with tls_cert_file")),
            (None, Some(_)) => return Err(wrong("tls_cert_file", "is needed with tls_key_file")),
        };
        let tls = self.tls.then_some(KafkaTls { ca, client });
        let sasl = match (self.sasl_mechanism.as_deref(), &self.sasl_username, &self.sasl_password) {
            (None, None, None) => None,
            (None, _, _) => {
                return Err(wrong(
                    "sasl_mechanism",
                    "must be set where sasl_username or sasl_password is: plain, scram-sha-256 or scram-sha-512",
                ))
            }
            (Some(name), username, password) => {
                let mechanism = SaslMechanism::parse(name).ok_or_else(|| {
                    wrong("sasl_mechanism", format!("{name:?} is not plain, scram-sha-256 or scram-sha-512"))
                })?;
                let username = username
                    .clone()
                    .filter(|username| !username.is_empty())
                    .ok_or_else(|| wrong("sasl_username", "is needed with sasl_mechanism"))?;
                let password = password
                    .clone()
                    .ok_or_else(|| wrong("sasl_password", "is needed with sasl_mechanism"))?;
                Some(Sasl { mechanism, username, password })
            }
        };
        Ok(KafkaSecurity { tls, sasl })
    }

    /// Checks every setting; the error names the first key at fault.
    pub fn validate(&self) -> Result<Checked, KafkaConfigError> {
        check_brokers(&self.brokers)?;
        let topic = template("topic", &self.topic)?;
        let fixed_topic = if topic.has_placeholders() {
            None
        } else {
            if !is_valid_kafka_topic(&self.topic) {
                return Err(wrong(
                    "topic",
                    format!("{:?} is not a Kafka topic name: 1 to {TOPIC_NAME_MAX} of a-z A-Z 0-9 . _ -, not \".\" or \"..\"", self.topic),
                ));
            }
            Some(self.topic.clone())
        };
        let key = self.key.as_deref().map(|key| template("key", key)).transpose()?;
        if let Some(client_id) = &self.client_id {
            if client_id.is_empty() || client_id.len() > 255 {
                return Err(wrong("client_id", "must be 1 to 255 bytes"));
            }
        }
        let message_timeout = self.message_timeout.0;
        if !(MESSAGE_TIMEOUT_MIN..=MESSAGE_TIMEOUT_MAX).contains(&message_timeout) {
            return Err(wrong("message_timeout", "must be 1s to 1h"));
        }
        if !(MAX_MESSAGE_BYTES_MIN..=MAX_MESSAGE_BYTES_MAX).contains(&self.max_message_bytes.0) {
            return Err(wrong(
                "max_message_bytes",
                format!("must be {MAX_MESSAGE_BYTES_MIN} to {MAX_MESSAGE_BYTES_MAX} bytes"),
            ));
        }
        self.security()?;
        Ok(Checked { topic, fixed_topic, key, message_timeout })
    }

    /// The producer's configuration. acks=all and idempotence are not
    /// settings: they are what makes a record acknowledged by Kafka as
    /// durable as one acknowledged by Ferry's log, and its retries free of
    /// duplicates and reordering within one producer session.
    pub fn client_config(&self, endpoint: &str) -> ClientConfig {
        let mut config = ClientConfig::new();
        let client_id = self.client_id.clone().unwrap_or_else(|| format!("ferry-{endpoint}"));
        let timeout_ms = self.message_timeout.0.as_millis().to_string();
        config
            .set("bootstrap.servers", &self.brokers)
            .set("client.id", client_id)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("compression.codec", self.compression.codec())
            .set("message.timeout.ms", timeout_ms)
            .set("message.max.bytes", self.max_message_bytes.0.to_string())
            // The Java client's partitioner, so a key lands on the same
            // partition whichever client produced it (Kafka Streams joins
            // and co-partitioned topics rely on that).
            .set("partitioner", "murmur2_random")
            // The flow hands over a whole batch at once and waits for it:
            // a short linger lets librdkafka pack it into one request per
            // partition without adding to the flow's own `linger`.
            .set("linger.ms", "1")
            // librdkafka times records out between its reconnect attempts
            // to a broker that is down: with its default backoff (up to
            // 10 s) a send failed after ~10 s for a 3 s timeout, measured;
            // with 1 s, after 3.1 s. A returning broker is found within a
            // second too, for one connection attempt a second meanwhile.
            .set("reconnect.backoff.max.ms", "1000")
            // The producer's queue holds at most the batch in flight (the
            // flow's batch is at most 10,000 messages and 16 MiB), twice
            // over for what a cancelled send left behind; beyond that an
            // enqueue fails and the batch is retried, never buffered.
            .set("queue.buffering.max.messages", "20000")
            .set("queue.buffering.max.kbytes", "32768");
        // Checked by `validate` before any producer is made.
        if let Ok(security) = self.security() {
            security.apply(&mut config);
        }
        config
    }
}

fn check_brokers(brokers: &str) -> Result<(), KafkaConfigError> {
    if brokers.trim().is_empty() {
        return Err(wrong("brokers", "needs at least one \"host:port\""));
    }
    for broker in brokers.split(',').map(str::trim) {
        let port = broker
            .rsplit_once(':')
            .filter(|(host, _)| !host.is_empty())
            .map(|(_, port)| port.parse::<u16>());
        if !matches!(port, Some(Ok(port)) if port != 0) {
            return Err(wrong(
                "brokers",
                format!("{broker:?} is not \"host:port\" (a list is \"host:port,host:port\")"),
            ));
        }
    }
    Ok(())
}

/// A `topic` or `key` template.
fn template(key: &'static str, text: &str) -> Result<TopicTemplate, KafkaConfigError> {
    if text.is_empty() {
        return Err(wrong(key, "must not be empty"));
    }
    TopicTemplate::parse_any(text).map_err(|reason| wrong(key, reason))
}

/// Kafka's rule for topic names (`org.apache.kafka.common.internals.Topic`).
pub fn is_valid_kafka_topic(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= TOPIC_NAME_MAX
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &[(&str, &str)]) -> Result<KafkaEndpointConfig, serde_json::Error> {
        let mut table = serde_json::json!({ "brokers": "127.0.0.1:9092", "topic": "telemetry" });
        for (key, value) in extra {
            table[*key] = serde_json::from_str(value).unwrap_or_else(|_| (*value).into());
        }
        serde_json::from_value(table)
    }

    /// The key named by the error for one bad setting.
    fn blamed(extra: &[(&str, &str)]) -> &'static str {
        config(extra).unwrap().validate().unwrap_err().key
    }

    #[test]
    fn defaults_are_lz4_30s_and_no_key() {
        let config = config(&[]).unwrap();
        assert_eq!(config.compression, Compression::Lz4);
        assert_eq!(config.message_timeout.0, Duration::from_secs(30));
        let checked = config.validate().unwrap();
        assert_eq!(checked.fixed_topic.as_deref(), Some("telemetry"));
        assert!(checked.key.is_none());
    }

    #[test]
    fn templates_expand_for_key_and_topic() {
        let config =
            config(&[("topic", "t-{topic[0]}"), ("key", "{clientid}:{topic[1]}/{topic}")]).unwrap();
        let checked = config.validate().unwrap();
        assert!(checked.fixed_topic.is_none());
        assert_eq!(checked.topic.expand("plant/s7/temp", Some("d")), "t-plant");
        let key = checked.key.unwrap();
        assert_eq!(key.expand("plant/s7/temp", Some("d")), "d:s7/plant/s7/temp");
    }

    #[test]
    fn every_bad_setting_names_its_key() {
        assert_eq!(blamed(&[("brokers", "")]), "brokers");
        assert_eq!(blamed(&[("brokers", "kafka")]), "brokers");
        assert_eq!(blamed(&[("brokers", "a:9092,:9092")]), "brokers");
        assert_eq!(blamed(&[("brokers", "a:99999")]), "brokers");
        assert_eq!(blamed(&[("topic", "a/b")]), "topic");
        assert_eq!(blamed(&[("topic", "..")]), "topic");
        assert_eq!(blamed(&[("topic", "{nope}")]), "topic");
        assert_eq!(blamed(&[("key", "{client}")]), "key");
        assert_eq!(blamed(&[("key", "")]), "key");
        assert_eq!(blamed(&[("client_id", "")]), "client_id");
        assert_eq!(blamed(&[("message_timeout", "\"0s\"")]), "message_timeout");
        assert_eq!(blamed(&[("message_timeout", "\"2h\"")]), "message_timeout");
        assert_eq!(blamed(&[("max_message_bytes", "\"32MiB\"")]), "max_message_bytes");
        assert!(config(&[("key", "{clientid}")]).unwrap().validate().is_ok());
        assert_eq!(blamed(&[("sasl_username", "edge")]), "sasl_mechanism");
        assert_eq!(blamed(&[("sasl_mechanism", "plain"), ("sasl_password", "p")]), "sasl_username");
        assert_eq!(blamed(&[("sasl_mechanism", "plain"), ("sasl_username", "e")]), "sasl_password");
        assert_eq!(blamed(&[("sasl_mechanism", "scram-sha-256")]), "sasl_username");
        assert_eq!(blamed(&[("sasl_mechanism", "gssapi")]), "sasl_mechanism");
        assert_eq!(blamed(&[("tls_ca_file", "/etc/hostname")]), "tls_ca_file");
        assert_eq!(blamed(&[("tls", "true"), ("tls_ca_file", "/no/such.pem")]), "tls_ca_file");
        let client = [("tls", "true"), ("tls_cert_file", "/etc/hostname")];
        assert_eq!(blamed(&client), "tls_key_file");
    }

    #[test]
    fn sasl_plain_authenticates_the_producer_and_hides_its_password() {
        let settings = [
            ("sasl_mechanism", "PLAIN"),
            ("sasl_username", "edge-1"),
            ("sasl_password", "hunter2"),
        ];
        let config = config(&settings).unwrap();
        config.validate().unwrap();
        let producer = config.client_config("lake");
        assert_eq!(producer.get("security.protocol"), Some("SASL_PLAINTEXT"));
        assert_eq!(producer.get("sasl.username"), Some("edge-1"));
        assert_eq!(producer.get("sasl.password"), Some("hunter2"));
        assert!(!format!("{config:?}").contains("hunter2"));
        assert!(!format!("{:?}", config.security().unwrap()).contains("hunter2"));
        let plaintext = self::config(&[]).unwrap().client_config("lake");
        assert_eq!(plaintext.get("security.protocol"), Some("PLAINTEXT"));
    }

    #[test]
    fn tls_with_scram_and_a_ca_file() {
        let settings = [
            ("tls", "true"),
            ("tls_ca_file", "/etc/hostname"),
            ("sasl_mechanism", "scram-sha-512"),
            ("sasl_username", "edge-1"),
            ("sasl_password", "hunter2"),
        ];
        let config = config(&settings).unwrap();
        config.validate().unwrap();
        let producer = config.client_config("lake");
        assert_eq!(producer.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(producer.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(producer.get("ssl.ca.location"), Some("/etc/hostname"));
    }

    #[test]
    fn unknown_keys_and_codecs_are_refused() {
        assert!(config(&[("acks", "1")]).is_err());
        assert!(config(&[("compression", "brotli")]).is_err());
        assert_eq!(config(&[("compression", "zstd")]).unwrap().compression, Compression::Zstd);
    }

    #[test]
    fn kafka_topic_names() {
        assert!(is_valid_kafka_topic("plant.s7_temp-1"));
        for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(250)] {
            assert!(!is_valid_kafka_topic(bad), "{bad}");
        }
    }
}
