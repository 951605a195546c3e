//! How a Kafka client protects and proves itself: TLS (the CA certificates
//! to trust, a client certificate for mutual TLS) and SASL (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512), as librdkafka settings. One type for
//! the edge endpoint's producer and the twins' Kafka connections, whose
//! settings come from a TOML file and from Ditto's connection JSON.
//!
//! A broker's certificate is always checked, host name included; without
//! a CA of its own the client trusts the system's certificates.

use crate::secret::Secret;
use rdkafka::ClientConfig;
use std::path::PathBuf;

/// `Debug` shows neither a password nor a key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaSecurity {
    /// `None`: plaintext.
    pub tls: Option<KafkaTls>,
    pub sasl: Option<Sasl>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaTls {
    /// The CA certificates the broker's must chain to; `None`: the
    /// system's.
    pub ca: Option<Pem>,
    /// A client certificate chain and its key, for brokers that want
    /// mutual TLS.
    pub client: Option<(Pem, Pem)>,
}

/// PEM in a file, or the PEM text itself (Ditto's connections carry it
/// inline). The text is kept as a secret: it may be a private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    File(PathBuf),
    Text(Secret),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sasl {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: Secret,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// The password crosses the network as it is: over TLS, or on a
    /// network Ferry and the cluster trust.
    Plain,
    ScramSha256,
    ScramSha512,
}

impl SaslMechanism {
    /// `plain`, `scram-sha-256` or `scram-sha-512`, in any case.
    pub fn parse(text: &str) -> Option<SaslMechanism> {
        match text.to_ascii_lowercase().as_str() {
            "plain" => Some(SaslMechanism::Plain),
            "scram-sha-256" => Some(SaslMechanism::ScramSha256),
            "scram-sha-512" => Some(SaslMechanism::ScramSha512),
            _ => None,
        }
    }

    /// The value of librdkafka's `sasl.mechanism`.
    fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

impl KafkaSecurity {
    /// The librdkafka settings of a client with this security.
    pub fn apply(&self, config: &mut ClientConfig) {
        let protocol = match (&self.tls, &self.sasl) {
            (None, None) => "PLAINTEXT",
            (Some(_), None) => "SSL",
            (None, Some(_)) => "SASL_PLAINTEXT",
            (Some(_), Some(_)) => "SASL_SSL",
        };
        config.set("security.protocol", protocol);
        if let Some(tls) = &self.tls {
            // librdkafka checks the broker's certificate and, since 2.0,
            // its host name by default; set anyway so that no default
            // can turn either off.
            config
                .set("enable.ssl.certificate.verification", "true")
                .set("ssl.endpoint.identification.algorithm", "https");
            match &tls.ca {
                // The OpenSSL built into this binary knows no system
                // directory of its own: librdkafka probes the usual ones.
                None => config.set("ssl.ca.location", "probe"),
                Some(ca) => set_pem(config, ca, "ssl.ca.location", "ssl.ca.pem"),
            };
            if let Some((certificate, key)) = &tls.client {
                set_pem(config, certificate, "ssl.certificate.location", "ssl.certificate.pem");
                set_pem(config, key, "ssl.key.location", "ssl.key.pem");
            }
        }
        if let Some(sasl) = &self.sasl {
            config
                .set("sasl.mechanism", sasl.mechanism.name())
                .set("sasl.username", &sasl.username)
                .set("sasl.password", sasl.password.expose());
        }
    }
}

fn set_pem<'c>(
    config: &'c mut ClientConfig,
    pem: &Pem,
    location: &str,
    text: &str,
) -> &'c mut ClientConfig {
    match pem {
        Pem::File(path) => config.set(location, path.to_string_lossy()),
        Pem::Text(pem) => config.set(text, pem.expose()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_combination_names_its_protocol() {
        let sasl = Sasl {
            mechanism: SaslMechanism::ScramSha512,
            username: "edge".into(),
            password: Secret::new("s3cret".into()),
        };
        let tls = KafkaTls {
            ca: Some(Pem::File("/etc/ca.pem".into())),
            client: Some((Pem::Text(Secret::new("CERT".into())), Pem::File("/k.pem".into()))),
        };
        for (security, protocol) in [
            (KafkaSecurity::default(), "PLAINTEXT"),
            (KafkaSecurity { tls: Some(KafkaTls::default()), sasl: None }, "SSL"),
            (KafkaSecurity { tls: None, sasl: Some(sasl.clone()) }, "SASL_PLAINTEXT"),
            (KafkaSecurity { tls: Some(tls.clone()), sasl: Some(sasl.clone()) }, "SASL_SSL"),
        ] {
            let mut config = ClientConfig::new();
            security.apply(&mut config);
            assert_eq!(config.get("security.protocol"), Some(protocol));
        }
        let mut config = ClientConfig::new();
        let both = KafkaSecurity { tls: Some(tls), sasl: Some(sasl) };
        both.apply(&mut config);
        assert_eq!(config.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(config.get("sasl.password"), Some("s3cret"));
        assert_eq!(config.get("ssl.ca.location"), Some("/etc/ca.pem"));
        assert_eq!(config.get("ssl.certificate.pem"), Some("CERT"));
        assert_eq!(config.get("ssl.key.location"), Some("/k.pem"));
        let shown = format!("{both:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("CERT"), "{shown}");
        let mut system = ClientConfig::new();
        KafkaSecurity { tls: Some(KafkaTls::default()), sasl: None }.apply(&mut system);
        assert_eq!(system.get("ssl.ca.location"), Some("probe"));
    }

    #[test]
    fn mechanisms_are_read_in_any_case() {
        assert_eq!(SaslMechanism::parse("SCRAM-SHA-256"), Some(SaslMechanism::ScramSha256));
        assert_eq!(SaslMechanism::parse("plain"), Some(SaslMechanism::Plain));
        assert_eq!(SaslMechanism::parse("gssapi"), None);
    }
}
