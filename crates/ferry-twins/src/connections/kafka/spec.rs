//! A `kafka` connection as Ditto's connectivity API writes it: where the
//! cluster is (`uri` `tcp://host:port` or `ssl://host:port`, or
//! `specificConfig.bootstrapServers`), its sources (topics of Ditto
//! protocol commands) and its targets' topics, and how it authenticates:
//! SASL (`ssl://user:password@host:port` with `specificConfig.
//! saslMechanism` `plain`, `scram-sha-256` or `scram-sha-512`), over TLS
//! with the connection's `ca` and client-cert `credentials` (`tls.rs`).
//! What Ferry cannot honour is refused with Ditto's configuration error
//! naming it.

use super::super::model::text;
use super::super::source::{SourceKind, SourceSpec, MAX_SOURCES};
use super::super::template::{AddressTemplate, HeaderMapping};
use super::super::uri::credentials;
use crate::error::DittoError;
use ferry_routes::endpoints::kafka::{
    KafkaEndpointConfig, KafkaSecurity, KafkaTls, Pem, Sasl, SaslMechanism,
};
use ferry_routes::Secret;
use serde_json::{Map, Value};

#[derive(Debug)]
pub struct KafkaSpec {
    /// `host:port,host:port`.
    pub bootstrap_servers: String,
    /// The consumers' group: `specificConfig.groupId`, else
    /// `ferry-connection-<id>`.
    pub group_id: String,
    /// The producer's and consumers' `client.id` prefix.
    pub client_id: String,
    pub sources: Vec<SourceSpec>,
    /// Where each target publishes, in the order of the connection's
    /// targets.
    pub destinations: Vec<Destination>,
    /// TLS and the SASL credentials the producer and the consumers
    /// connect with.
    pub security: KafkaSecurity,
}

/// A Kafka target's `address`: `topic` or `topic/key` (Ditto's form).
#[derive(Debug)]
pub struct Destination {
    pub topic: String,
    pub key: Option<AddressTemplate>,
    /// `headerMapping`: record headers besides Ditto's own.
    pub headers: HeaderMapping,
}

impl KafkaSpec {
    pub fn parse(
        id: &str,
        object: &Map<String, Value>,
        targets: &[Value],
    ) -> Result<KafkaSpec, DittoError> {
        let specific = match object.get("specificConfig") {
            None => Map::new(),
            Some(Value::Object(specific)) => specific.clone(),
            Some(_) => {
                return Err(DittoError::connection_invalid("'specificConfig' must be an object."))
            }
        };
        let setting = |key: &str| specific.get(key).and_then(Value::as_str).map(str::trim);
        let bootstrap_servers = match setting("bootstrapServers").filter(|s| !s.is_empty()) {
            Some(servers) => servers.to_owned(),
            None => uri_servers(text(object, "uri")?)?,
        };
        let uri = object.get("uri").and_then(Value::as_str).unwrap_or_default();
        let tls = uri.starts_with("ssl://");
        let settings = super::super::tls::TlsSettings::parse(object, tls)?;
        let tls = tls.then(|| KafkaTls {
            ca: settings.ca.map(|pem| Pem::Text(Secret::new(pem))),
            client: settings
                .client
                .map(|(cert, key)| (Pem::Text(Secret::new(cert)), Pem::Text(key))),
        });
        let security = KafkaSecurity { tls, sasl: sasl(uri, setting("saslMechanism"))? };
        let group_id = setting("groupId")
            .filter(|group| !group.is_empty())
            .map_or_else(|| format!("ferry-connection-{id}"), str::to_owned);
        // The producer's settings are the edge Kafka endpoint's: checking
        // them with its rules names a bad server list the same way.
        let mut endpoint = producer_config(&bootstrap_servers, &format!("ferry-connection-{id}"));
        endpoint.validate().map_err(|error| {
            DittoError::connection_invalid(format!("The Kafka bootstrap servers: {error}"))
        })?;
        let sources = match object.get("sources") {
            None => Vec::new(),
            Some(Value::Array(sources)) if sources.len() <= MAX_SOURCES => sources
                .iter()
                .map(|source| SourceSpec::parse(id, source, SourceKind::Kafka))
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(DittoError::connection_invalid(format!(
                    "'sources' must be an array of at most {MAX_SOURCES}."
                )))
            }
        };
        let destinations = targets
            .iter()
            .map(|target| {
                let address = target.get("address").and_then(Value::as_str).unwrap_or_default();
                let destination = Destination::parse(address, target)?;
                endpoint.topic = destination.topic.clone();
                endpoint.validate().map_err(|error| {
                    DittoError::connection_invalid(format!("The target '{address}': {error}"))
                })?;
                Ok(destination)
            })
            .collect::<Result<_, DittoError>>()?;
        Ok(KafkaSpec {
            bootstrap_servers,
            group_id,
            client_id: format!("ferry-connection-{id}"),
            sources,
            destinations,
            security,
        })
    }
}

/// The uri's credentials with `saslMechanism`. A mechanism without
/// credentials (the Ditto benchmark's connection) authenticates nothing,
/// as in Ditto.
fn sasl(uri: &str, mechanism: Option<&str>) -> Result<Option<Sasl>, DittoError> {
    let (Some(username), password) = credentials(uri) else { return Ok(None) };
    let Some(password) = password else {
        return Err(DittoError::connection_invalid(
            "The Kafka uri names a user but no password (tcp://user:password@host:port).",
        ));
    };
    let Some(mechanism) = mechanism else {
        return Err(DittoError::connection_invalid(
            "A Kafka uri with credentials needs specificConfig.saslMechanism (plain, scram-sha-256 or scram-sha-512).",
        ));
    };
    let mechanism = SaslMechanism::parse(mechanism).ok_or_else(|| {
        DittoError::connection_invalid(format!(
            "The saslMechanism '{mechanism}' is not one of plain, scram-sha-256, scram-sha-512."
        ))
    })?;
    Ok(Some(Sasl { mechanism, username, password: Secret::new(password) }))
}

/// The edge Kafka endpoint's producer settings for `servers` (acks=all,
/// idempotent, lz4, bounded queue): one producer setup in Ferry.
pub fn producer_config(servers: &str, client_id: &str) -> KafkaEndpointConfig {
    // The topic is replaced per target when checked; records name theirs.
    let mut config = KafkaEndpointConfig::with_defaults(servers.to_owned(), "ferry".to_owned());
    config.client_id = Some(client_id.to_owned());
    config
}

/// `tcp://host:port[,host:port]` as bootstrap servers.
fn uri_servers(uri: &str) -> Result<String, DittoError> {
    let rest = uri
        .strip_prefix("tcp://")
        .or_else(|| uri.strip_prefix("ssl://"))
        .ok_or_else(|| super::super::uri::invalid(uri, "is not tcp://host:port"))?;
    let servers = rest.rsplit_once('@').map_or(rest, |(_, servers)| servers);
    Ok(servers.trim_end_matches('/').to_owned())
}

impl Destination {
    fn parse(address: &str, target: &Value) -> Result<Destination, DittoError> {
        let (topic, key) = match address.split_once('/') {
            Some((topic, key)) => (topic, Some(AddressTemplate::parse(key, "address")?)),
            None => (address, None),
        };
        let headers = HeaderMapping::parse(target)?;
        Ok(Destination { topic: topic.to_owned(), key, headers })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::model::{ConnectionSpec, Transport};
    use serde_json::{json, Value};

    /// The Ditto benchmark's Kafka connection (../seeds/ditto-benchmark.txt).
    pub fn seed_connection() -> Value {
        json!({
            "name": "kafka-source",
            "connectionType": "kafka",
            "connectionStatus": "open",
            "uri": "tcp://bitnami-kafka:9092",
            "sources": [{
                "addresses": ["create-update"],
                "consumerCount": 1,
                "qos": 0,
                "authorizationContext": ["nginx:ditto"],
                "enforcement": {"input": "{{ header:device_id }}", "filters": ["{{ entity:id }}"]},
                "headerMapping": {},
                "payloadMapping": ["ditto"],
                "replyTarget": {"enabled": false}
            }],
            "targets": [],
            "clientCount": 1,
            "failoverEnabled": true,
            "validateCertificates": true,
            "processorPoolSize": 1,
            "specificConfig": {"saslMechanism": "plain", "bootstrapServers": "bitnami-kafka:9092"},
            "mappingDefinitions": {"ditto": {"mappingEngine": "Ditto", "options": {"thingId": "{{ header:device_id }}"}}},
            "tags": ["benchmark"]
        })
    }

    fn kafka(json: Value) -> std::sync::Arc<super::KafkaSpec> {
        match ConnectionSpec::parse("4cd191cc", json).unwrap().transport {
            Transport::Kafka(kafka) => kafka,
            Transport::HttpPush(_) | Transport::Mqtt(_) => panic!("a kafka connection"),
        }
    }

    #[test]
    fn the_seeds_connection_is_read_as_ditto_writes_it() {
        let spec = kafka(seed_connection());
        assert_eq!(spec.bootstrap_servers, "bitnami-kafka:9092");
        assert_eq!(spec.group_id, "ferry-connection-4cd191cc");
        let source = &spec.sources[0];
        assert_eq!(source.addresses, ["create-update"]);
        assert!(!source.at_least_once);
        assert_eq!(source.caller.subjects, ["nginx:ditto"]);
        assert!(source.enforcement.is_some());
        assert!(source.reply_target.is_none(), "enabled: false");
    }

    #[test]
    fn the_uri_group_and_target_addresses_are_read() {
        let mut connection = seed_connection();
        connection["specificConfig"] = json!({"groupId": "mine"});
        connection["uri"] = json!("tcp://k1:9092,k2:9092");
        connection["targets"] = json!([{
            "address": "events/{{ thing:id }}",
            "topics": ["_/_/things/twin/events"],
            "authorizationContext": ["nginx:ditto"]
        }]);
        let spec = kafka(connection);
        assert_eq!(spec.bootstrap_servers, "k1:9092,k2:9092");
        assert_eq!(spec.group_id, "mine");
        assert_eq!(spec.destinations[0].topic, "events");
        assert!(spec.destinations[0].key.is_some());
    }

    /// The librdkafka settings of a connection.
    fn client_settings(connection: Value) -> rdkafka::ClientConfig {
        let mut config = rdkafka::ClientConfig::new();
        kafka(connection).security.apply(&mut config);
        config
    }

    #[test]
    fn credentials_in_the_uri_authenticate_with_sasl() {
        let mut connection = seed_connection();
        connection["uri"] = json!("tcp://ditto:p%40ss@k1:9092,k2:9092");
        connection["specificConfig"] = json!({"saslMechanism": "PLAIN"});
        let spec = kafka(connection.clone());
        assert_eq!(spec.bootstrap_servers, "k1:9092,k2:9092");
        assert!(
            !format!("{:?}", spec.security).contains("p@ss"),
            "the password stays out of Debug"
        );
        let config = client_settings(connection);
        assert_eq!(config.get("sasl.username"), Some("ditto"));
        assert_eq!(config.get("sasl.password"), Some("p@ss"));
        assert_eq!(config.get("security.protocol"), Some("SASL_PLAINTEXT"));
        // The benchmark's mechanism without credentials authenticates nothing.
        assert_eq!(client_settings(seed_connection()).get("security.protocol"), Some("PLAINTEXT"));

        for (specific, says) in [
            (json!({}), "needs specificConfig.saslMechanism"),
            (json!({"saslMechanism": "gssapi"}), "not one of"),
        ] {
            let mut connection = seed_connection();
            connection["uri"] = json!("tcp://ditto:secret@k1:9092");
            connection["specificConfig"] = specific;
            let error = ConnectionSpec::parse("c", connection).unwrap_err();
            assert!(error.message.contains(says), "{}", error.message);
            assert!(!error.message.contains("secret"), "{}", error.message);
        }
    }

    #[test]
    fn ssl_uris_connect_over_tls_with_the_connections_ca_and_scram() {
        let mut connection = seed_connection();
        connection["uri"] = json!("ssl://ditto:secret@k1:9093");
        connection["specificConfig"] = json!({"saslMechanism": "scram-sha-512"});
        connection["ca"] = json!("-----BEGIN CERTIFICATE-----\n…");
        let config = client_settings(connection.clone());
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(config.get("ssl.ca.pem"), Some("-----BEGIN CERTIFICATE-----\n…"));
        connection["validateCertificates"] = json!(false);
        let refused = ConnectionSpec::parse("c", connection).unwrap_err();
        assert!(refused.message.contains("validateCertificates"), "{}", refused.message);
        let mut plain = seed_connection();
        plain["ca"] = json!("-----BEGIN CERTIFICATE-----");
        let refused = ConnectionSpec::parse("c", plain).unwrap_err();
        assert!(refused.message.contains("ssl://"), "{}", refused.message);
    }

    #[test]
    fn what_ferry_cannot_run_is_refused_with_dittos_error() {
        for (pointer, value, says) in [
            ("/sources/0/payloadMapping", json!(["javascript"]), "'javascript'"),
            ("/sources/0/qos", json!(2), "qos"),
            ("/sources/0/consumerCount", json!(0), "consumerCount"),
            ("/sources/0/addresses", json!(["bad topic"]), "topic names"),
            ("/sources/0/authorizationContext", json!([]), "authorizationContext"),
            (
                "/sources/0/enforcement",
                json!({"input": "{{ thing:id }}", "filters": ["x"]}),
                "thing:id",
            ),
            (
                "/sources/0/replyTarget",
                json!({"enabled": true, "expectedResponseTypes": ["response"]}),
                "needs an address",
            ),
            ("/specificConfig/bootstrapServers", json!("no-port"), "bootstrap"),
        ] {
            let mut connection = seed_connection();
            *connection.pointer_mut(pointer).unwrap() = value;
            let error = ConnectionSpec::parse("c", connection).unwrap_err();
            assert_eq!(error.error, "connectivity:connection.configuration.invalid", "{pointer}");
            assert!(error.message.contains(says), "{pointer}: {}", error.message);
        }
    }
}
