//! The settings of an `mqtt` endpoint, as written in the configuration
//! file, and their validation. What a setting does on the wire is said at
//! the field; `validate` names the key of the first setting that is wrong.

use super::topic_map::{InboundMap, TopicMapError};
use crate::Secret;
use ferry_mqtt::topic::{is_valid_topic_filter, is_valid_topic_name};
use ferry_mqtt::{ProtocolVersion, QoS};
use serde::Deserialize;
use std::path::PathBuf;

/// `[endpoints.NAME]` with `type = "mqtt"`: an uplink to an MQTT 3.1.1 or
/// 5.0 broker.
///
/// ```toml
/// [endpoints.cloud]
/// type = "mqtt"
/// url = "mqtts://cloud.example.com:8883"
/// ca_file = "/etc/ferry/cloud-ca.pem"
/// cert_file = "/etc/ferry/edge-1.pem"
/// key_file = "/etc/ferry/edge-1.key"
/// remote_prefix = "edge-1/"
/// subscribe = [{ remote = "commands/edge-1/#", local = "commands/#", qos = 1 }]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttEndpointConfig {
    /// `mqtt://host[:port]` (port 1883 by default) or `mqtts://host[:port]`
    /// (TLS, 8883). An IPv6 host is written in brackets.
    pub url: String,
    /// `"3.1.1"` or `"5"`. Only MQTT 5 carries the messages' properties
    /// and tells which message the remote refused.
    #[serde(default)]
    pub protocol_version: MqttProtocol,
    /// The client id at the remote; `ferry-<endpoint name>` by default.
    /// A persistent session is kept under it, so two edges must not share it.
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<Secret>,
    /// CA certificates (PEM) the remote's certificate must chain to. With
    /// `mqtts` and no CA file, the system's CA certificates.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// A client certificate chain (PEM, leaf first) for mutual TLS; needs
    /// `key_file`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// The private key of `cert_file` (PEM: PKCS#8, PKCS#1 or SEC1).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Seconds: a PINGREQ goes out when the connection has been quiet this
    /// long, and a connection that hears nothing for twice this long is
    /// given up. 0 turns keep-alive off. Default 30.
    #[serde(default = "default_keep_alive_secs")]
    pub keep_alive_secs: u16,
    /// Whether each connection starts a new session at the remote. Default
    /// false: the session persists across reconnects, so the remote keeps
    /// the commands queued for this edge while it is away.
    #[serde(default)]
    pub clean_start: bool,
    /// MQTT 5: how long the remote keeps the session after a disconnect.
    /// Default 86,400 (a day). MQTT 3.1.1 has no such setting: the remote
    /// decides.
    #[serde(default = "default_session_expiry_secs")]
    pub session_expiry_secs: u32,
    /// 0, 1 (the default) or 2. QoS 2 is exactly once within a connection
    /// only: after a reconnect the flow sends what was not acknowledged
    /// again under new packet ids, so a message may arrive twice.
    #[serde(default = "default_qos")]
    pub qos: u8,
    /// Messages sent and not yet acknowledged, at most; the remote's
    /// Receive Maximum lowers it. Default 100.
    #[serde(default = "default_max_inflight")]
    pub max_inflight: u16,
    /// Prepended to each topic (after `strip_prefix`), e.g. `"edge-1/"`.
    #[serde(default)]
    pub remote_prefix: String,
    /// Removed from the front of each topic that starts with it, before
    /// `remote_prefix` is prepended.
    #[serde(default)]
    pub strip_prefix: String,
    /// Batches go up as batch envelopes on this topic (many messages in
    /// one PUBLISH; docs/routes.md has the format, and a receiving Ferry
    /// unpacks them). MQTT 5 and QoS 0 or 1 only. Unset, one PUBLISH per
    /// message.
    #[serde(default)]
    pub envelope_topic: Option<String>,
    /// The reverse direction: remote filters to subscribe to, and the local
    /// topics their messages are published on.
    #[serde(default)]
    pub subscribe: Vec<MqttSubscription>,
    /// PEM given with the settings instead of in the files above, which it
    /// then stands for: a twin connection's `ca` and `credentials`. Never
    /// in the configuration file.
    #[serde(skip)]
    pub inline_pem: InlinePem,
}

/// CA certificates and a client certificate given as PEM text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InlinePem {
    /// For `ca_file`.
    pub ca: Option<String>,
    /// A certificate chain (leaf first) and its private key, for
    /// `cert_file` and `key_file`.
    pub client: Option<(String, Secret)>,
}

/// One subscription of the reverse direction (cloud to device).
///
/// A message on a topic matching `remote` is published locally under
/// `local`: with `remote = "commands/edge-1/#"` and `local = "commands/#"`,
/// `commands/edge-1/reboot` arrives on `commands/reboot` (what `#` matched
/// is kept). A `local` without wildcards takes every message as it is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttSubscription {
    pub remote: String,
    pub local: String,
    /// 0 or 1 (the default). Each message is stored locally before the
    /// remote has its PUBACK; QoS 2 is refused, since its exactly-once
    /// state would have to survive reconnects and restarts here.
    #[serde(default = "default_qos")]
    pub qos: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum MqttProtocol {
    #[serde(rename = "3.1.1")]
    V311,
    #[default]
    #[serde(rename = "5")]
    V5,
}

impl MqttProtocol {
    pub fn version(self) -> ProtocolVersion {
        match self {
            MqttProtocol::V311 => ProtocolVersion::V311,
            MqttProtocol::V5 => ProtocolVersion::V5,
        }
    }
}

fn default_keep_alive_secs() -> u16 {
    30
}

fn default_session_expiry_secs() -> u32 {
    86_400
}

fn default_qos() -> u8 {
    1
}

fn default_max_inflight() -> u16 {
    100
}

/// A setting that is wrong, named by its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {reason}")]
pub struct MqttConfigError {
    pub key: String,
    pub reason: String,
}

impl MqttConfigError {
    pub(crate) fn new(key: impl Into<String>, reason: impl Into<String>) -> MqttConfigError {
        MqttConfigError { key: key.into(), reason: reason.into() }
    }
}

/// Where `url` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteAddress {
    /// Without brackets for IPv6: what TLS checks the certificate against.
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

impl MqttEndpointConfig {
    /// Checks every setting, and that they fit together; the error names
    /// the first key that is wrong.
    pub fn validate(&self) -> Result<(), MqttConfigError> {
        let address = self.address()?;
        if let Some(client_id) = &self.client_id {
            if client_id.is_empty() || client_id.len() > usize::from(u16::MAX) {
                return Err(MqttConfigError::new(
                    "client_id",
                    "must be 1 to 65,535 bytes (leave it out for ferry-<endpoint name>)",
                ));
            }
        }
        if self.password.is_some()
            && self.username.is_none()
            && self.protocol_version == MqttProtocol::V311
        {
            return Err(MqttConfigError::new(
                "password",
                "MQTT 3.1.1 sends a password only with a user name (§3.1.2.9): set `username`",
            ));
        }
        for (key, file) in [("ca_file", &self.ca_file), ("cert_file", &self.cert_file)] {
            if file.is_some() && !address.tls {
                return Err(MqttConfigError::new(
                    key,
                    "TLS files need an mqtts:// url (this one is plain mqtt://)",
                ));
            }
        }
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => {
                return Err(MqttConfigError::new("key_file", "a client certificate needs its key"))
            }
            (None, Some(_)) => {
                return Err(MqttConfigError::new("cert_file", "a client key needs its certificate"))
            }
            _ => {}
        }
        qos(self.qos).ok_or_else(|| MqttConfigError::new("qos", "must be 0, 1 or 2"))?;
        if let Some(topic) = &self.envelope_topic {
            let reason = if !is_valid_topic_name(topic) {
                Some("not a topic name one can publish on")
            } else if self.protocol_version != MqttProtocol::V5 {
                Some("an envelope is marked by its content type, which MQTT 3.1.1 has not")
            } else if self.qos > 1 {
                Some("envelopes go at QoS 0 or 1")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(MqttConfigError::new("envelope_topic", reason));
            }
        }
        if self.max_inflight == 0 {
            return Err(MqttConfigError::new("max_inflight", "must be at least 1"));
        }
        for (key, prefix) in
            [("remote_prefix", &self.remote_prefix), ("strip_prefix", &self.strip_prefix)]
        {
            if prefix.contains(['+', '#']) {
                return Err(MqttConfigError::new(key, "a topic prefix has no wildcards"));
            }
        }
        for (index, subscription) in self.subscribe.iter().enumerate() {
            let key = |field: &str| format!("subscribe[{index}].{field}");
            if !is_valid_topic_filter(&subscription.remote) {
                return Err(MqttConfigError::new(key("remote"), "not a valid MQTT topic filter"));
            }
            if !is_valid_topic_filter(&subscription.local)
                && !is_valid_topic_name(&subscription.local)
            {
                return Err(MqttConfigError::new(key("local"), "not a valid MQTT topic"));
            }
            match subscription.qos {
                0 | 1 => {}
                2 => {
                    return Err(MqttConfigError::new(
                        key("qos"),
                        "must be 0 or 1: each message is stored here before the remote's \
                         PUBACK, which gives what QoS 2 would without its state",
                    ))
                }
                _ => return Err(MqttConfigError::new(key("qos"), "must be 0 or 1")),
            }
            InboundMap::new(&subscription.remote, &subscription.local).map_err(
                |error| match error {
                    TopicMapError::Remote(reason) => MqttConfigError::new(key("remote"), reason),
                    TopicMapError::Local(reason) => MqttConfigError::new(key("local"), reason),
                },
            )?;
        }
        Ok(())
    }

    /// The remote's host, port and whether it is TLS, from `url`.
    pub fn address(&self) -> Result<RemoteAddress, MqttConfigError> {
        let invalid = |reason: &str| MqttConfigError::new("url", format!("{reason}: {}", self.url));
        let (tls, rest) = if let Some(rest) = self.url.strip_prefix("mqtts://") {
            (true, rest)
        } else if let Some(rest) = self.url.strip_prefix("mqtt://") {
            (false, rest)
        } else {
            return Err(invalid("must start with mqtt:// or mqtts://"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('@') {
            return Err(invalid(
                "only host and port (user name and password are settings of their own)",
            ));
        }
        let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
            let (host, after) =
                bracketed.split_once(']').ok_or_else(|| invalid("an IPv6 host needs its ']'"))?;
            match after {
                "" => (host, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(invalid("expected :port after the IPv6 host")),
                },
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty() {
            return Err(invalid("no host"));
        }
        let port = match port {
            None => {
                if tls {
                    8883
                } else {
                    1883
                }
            }
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|&port| port != 0)
                .ok_or_else(|| invalid("the port must be 1 to 65535"))?,
        };
        Ok(RemoteAddress { host: host.to_owned(), port, tls })
    }

    /// The QoS messages are sent with.
    pub fn send_qos(&self) -> QoS {
        qos(self.qos).unwrap_or(QoS::AtLeastOnce)
    }
}

fn qos(value: u8) -> Option<QoS> {
    QoS::from_u8(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_like: &[(&str, &str)]) -> MqttEndpointConfig {
        let object: serde_json::Map<String, serde_json::Value> = toml_like
            .iter()
            .map(|(key, value)| {
                let value = serde_json::from_str(value)
                    .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
                (key.to_string(), value)
            })
            .collect();
        serde_json::from_value(serde_json::Value::Object(object)).unwrap()
    }

    #[test]
    fn defaults() {
        let config = config(&[("url", "mqtt://cloud")]);
        assert_eq!(config.protocol_version, MqttProtocol::V5);
        assert_eq!(config.keep_alive_secs, 30);
        assert!(!config.clean_start);
        assert_eq!(config.session_expiry_secs, 86_400);
        assert_eq!(config.send_qos(), QoS::AtLeastOnce);
        assert_eq!(config.max_inflight, 100);
        config.validate().unwrap();
    }

    #[test]
    fn urls() {
        let address = |url: &str| config(&[("url", url)]).address();
        let at = |host: &str, port, tls| Ok(RemoteAddress { host: host.into(), port, tls });
        assert_eq!(address("mqtt://cloud"), at("cloud", 1883, false));
        assert_eq!(address("mqtts://cloud"), at("cloud", 8883, true));
        assert_eq!(address("mqtts://cloud:9000/"), at("cloud", 9000, true));
        assert_eq!(address("mqtt://[::1]:1884"), at("::1", 1884, false));
        assert_eq!(address("mqtt://[::1]"), at("::1", 1883, false));
        for bad in ["http://cloud", "mqtt://", "mqtt://cloud:0", "mqtt://cloud:x", "mqtt://a/b"] {
            let error = address(bad).unwrap_err();
            assert_eq!(error.key, "url", "{bad}");
        }
        assert_eq!(
            address("tcp://cloud").unwrap_err().to_string(),
            "`url`: must start with mqtt:// or mqtts://: tcp://cloud"
        );
    }

    #[test]
    fn unknown_keys_and_versions_are_refused() {
        let unknown = serde_json::from_value::<MqttEndpointConfig>(serde_json::json!({
            "url": "mqtt://cloud", "keepalive": 10
        }));
        assert!(unknown.unwrap_err().to_string().contains("unknown field `keepalive`"));
        let version = serde_json::from_value::<MqttEndpointConfig>(serde_json::json!({
            "url": "mqtt://cloud", "protocol_version": "4"
        }));
        assert!(version.unwrap_err().to_string().contains("unknown variant `4`"));
        let v311: MqttEndpointConfig = serde_json::from_value(serde_json::json!({
            "url": "mqtt://cloud", "protocol_version": "3.1.1"
        }))
        .unwrap();
        assert_eq!(v311.protocol_version.version(), ProtocolVersion::V311);
    }

    #[test]
    fn errors_name_the_key() {
        let key = |settings: &[(&str, &str)]| {
            let mut all = vec![("url", "mqtts://cloud")];
            all.extend_from_slice(settings);
            config(&all).validate().unwrap_err().key
        };
        assert_eq!(key(&[("qos", "3")]), "qos");
        assert_eq!(key(&[("max_inflight", "0")]), "max_inflight");
        assert_eq!(key(&[("cert_file", "c.pem")]), "key_file");
        assert_eq!(key(&[("key_file", "k.pem")]), "cert_file");
        assert_eq!(key(&[("remote_prefix", "a/#")]), "remote_prefix");
        assert_eq!(key(&[("client_id", "")]), "client_id");
        assert_eq!(key(&[("protocol_version", "3.1.1"), ("password", "p")]), "password");
        let subscribe = |entry: &str| key(&[("subscribe", entry)]);
        assert_eq!(
            subscribe(r#"[{"remote": "a/#", "local": "b/#", "qos": 2}]"#),
            "subscribe[0].qos"
        );
        assert_eq!(subscribe(r#"[{"remote": "a/#+", "local": "b/#"}]"#), "subscribe[0].remote");
        assert_eq!(
            subscribe(r#"[{"remote": "a/#", "local": "b/#"}, {"remote": "c/+", "local": "d/#"}]"#),
            "subscribe[1].remote"
        );
        assert_eq!(subscribe(r#"[{"remote": "a/#", "local": "b/+/#"}]"#), "subscribe[0].local");
        let plain = config(&[("url", "mqtt://cloud"), ("ca_file", "ca.pem")]);
        assert_eq!(plain.validate().unwrap_err().key, "ca_file");
    }
}
