//! A connection's TLS settings as Ditto writes them, the same for MQTT
//! and Kafka connections: `ca` (PEM certificates the broker's must chain
//! to, instead of the system's) and `credentials` of type `client-cert`
//! (a PEM certificate chain and its key, for mutual TLS). A broker's
//! certificate is always checked: `validateCertificates: false` is
//! refused rather than honoured.

use crate::error::DittoError;
use ferry_routes::Secret;
use serde_json::{Map, Value};

#[derive(Debug, Default)]
pub(super) struct TlsSettings {
    pub ca: Option<String>,
    pub client: Option<(String, Secret)>,
}

impl TlsSettings {
    /// The settings of a connection whose uri is TLS (`ssl://`) or not;
    /// without TLS there must be none.
    pub fn parse(object: &Map<String, Value>, tls: bool) -> Result<TlsSettings, DittoError> {
        if object.get("validateCertificates").and_then(Value::as_bool) == Some(false) && tls {
            return Err(DittoError::connection_invalid(
                "validateCertificates false is not supported by Ferry: a broker's certificate is always checked (against 'ca', or the system's CA certificates).",
            ));
        }
        let settings = TlsSettings { ca: ca(object)?, client: client_certificate(object)? };
        if !tls && (settings.ca.is_some() || settings.client.is_some()) {
            return Err(DittoError::connection_invalid(
                "'ca' and 'credentials' are for TLS: the uri must be ssl://host:port.",
            ));
        }
        Ok(settings)
    }
}

fn ca(object: &Map<String, Value>) -> Result<Option<String>, DittoError> {
    match object.get("ca") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(pem)) => Ok(Some(pem.clone())),
        Some(_) => Err(DittoError::connection_invalid("'ca' is not a string of PEM certificates.")),
    }
}

fn client_certificate(object: &Map<String, Value>) -> Result<Option<(String, Secret)>, DittoError> {
    let credentials = match object.get("credentials") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(credentials)) => credentials,
        Some(_) => return Err(DittoError::connection_invalid("'credentials' is not an object.")),
    };
    match credentials.get("type").and_then(Value::as_str) {
        Some("client-cert") => {}
        other => {
            return Err(DittoError::connection_invalid(format!(
                "The credentials type {} is not supported by Ferry: only 'client-cert'.",
                other.map_or("(none)".to_owned(), |kind| format!("'{kind}'"))
            )))
        }
    }
    let pem = |field: &str| match credentials.get(field) {
        Some(Value::String(pem)) => Ok(pem.clone()),
        _ => Err(DittoError::connection_invalid(format!(
            "The client-cert credentials have no '{field}' (PEM)."
        ))),
    };
    Ok(Some((pem("cert")?, Secret::new(pem("key")?))))
}
