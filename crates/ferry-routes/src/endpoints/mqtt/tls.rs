//! TLS to the remote broker: the rustls client configuration, built once
//! from the endpoint's files when the endpoint is set up (a missing or
//! broken file is a configuration error then, not a failure at every
//! reconnect), and the handshake of each connection.

use super::config::{MqttConfigError, MqttEndpointConfig};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::path::Path;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// What a connection needs for its handshake.
#[derive(Clone)]
pub(crate) struct TlsClient {
    connector: TlsConnector,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("TlsClient").field("server_name", &self.server_name).finish()
    }
}

impl TlsClient {
    /// From the endpoint's `ca_file` (else the system's CA certificates),
    /// `cert_file` and `key_file`; `host` is the name the remote's
    /// certificate must carry.
    pub(crate) fn new(
        config: &MqttEndpointConfig,
        host: &str,
    ) -> Result<TlsClient, MqttConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match &config.ca_file {
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for certificate in certificates("ca_file", path)? {
                    roots.add(certificate).map_err(|error| {
                        MqttConfigError::new(
                            "ca_file",
                            format!("{}: not a usable CA certificate: {error}", path.display()),
                        )
                    })?;
                }
                roots
            }
            None => system_roots()?,
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| MqttConfigError::new("url", format!("TLS: {error}")))?
            .with_root_certificates(roots);
        let client = match (&config.cert_file, &config.key_file) {
            (Some(cert_file), Some(key_file)) => {
                let key = PrivateKeyDer::from_pem_file(key_file).map_err(|error| {
                    // A PEM error never quotes the key's bytes.
                    MqttConfigError::new(
                        "key_file",
                        format!("{}: no usable private key: {error}", key_file.display()),
                    )
                })?;
                builder.with_client_auth_cert(certificates("cert_file", cert_file)?, key).map_err(
                    |error| {
                        MqttConfigError::new(
                            "cert_file",
                            format!("cannot be used with key_file: {error}"),
                        )
                    },
                )?
            }
            _ => builder.with_no_client_auth(),
        };
        let server_name = ServerName::try_from(host.to_owned()).map_err(|_| {
            MqttConfigError::new("url", format!("{host} is not a host name TLS can check"))
        })?;
        Ok(TlsClient { connector: TlsConnector::from(Arc::new(client)), server_name })
    }

    pub(crate) async fn handshake(&self, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.connector.connect(self.server_name.clone(), tcp).await
    }
}

fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, MqttConfigError> {
    let invalid =
        |reason: String| MqttConfigError::new(key, format!("{}: {reason}", path.display()));
    let pem = std::fs::read(path).map_err(|error| invalid(format!("cannot read: {error}")))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| invalid(format!("not PEM certificates: {error}")))?;
    if certificates.is_empty() {
        return Err(invalid("holds no certificate".into()));
    }
    Ok(certificates)
}

/// The operating system's CA certificates, for an `mqtts` url without a
/// `ca_file`. Certificates the system has but rustls cannot parse are
/// skipped, as browsers do; none at all is an error.
fn system_roots() -> Result<RootCertStore, MqttConfigError> {
    let none = |why: String| {
        MqttConfigError::new(
            "ca_file",
            format!("not set, and the system's CA certificates are not usable ({why}): set it"),
        )
    };
    let found = rustls_native_certs::load_native_certs()
        .map_err(|error| none(format!("cannot read them: {error}")))?;
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found);
    if roots.is_empty() {
        return Err(none("none found".into()));
    }
    Ok(roots)
}
