//! TLS to the remote broker: the rustls client configuration, built once
//! from the endpoint's files when the endpoint is set up (a missing or
//! broken file is a configuration error then, not a failure at every
//! reconnect), and the handshake of each connection.

use super::config::{MqttConfigError, MqttEndpointConfig};
use crate::endpoints::trust;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use rustls::ClientConfig;
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
    /// `cert_file` and `key_file`, or the PEM given in their place
    /// (`inline_pem`); `host` is the name the remote's certificate must
    /// carry.
    pub(crate) fn new(
        config: &MqttEndpointConfig,
        host: &str,
    ) -> Result<TlsClient, MqttConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match &config.inline_pem.ca {
            Some(pem) => trust::roots_in(pem.as_bytes(), "ca")
                .map_err(|reason| MqttConfigError::new("ca", reason))?,
            None => trust::roots(config.ca_file.as_deref())
                .map_err(|reason| MqttConfigError::new("ca_file", reason))?,
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| MqttConfigError::new("url", format!("TLS: {error}")))?
            .with_root_certificates(roots);
        // A PEM error never quotes the key's bytes.
        let identity = match (&config.inline_pem.client, &config.cert_file, &config.key_file) {
            (Some((chain, key)), _, _) => Some((
                trust::certificates_in(chain.as_bytes(), "cert")
                    .map_err(|reason| MqttConfigError::new("credentials", reason))?,
                PrivateKeyDer::from_pem_slice(key.expose().as_bytes()).map_err(|error| {
                    MqttConfigError::new("credentials", format!("no usable private key: {error}"))
                })?,
                "credentials",
            )),
            (None, Some(cert_file), Some(key_file)) => Some((
                trust::certificates(cert_file)
                    .map_err(|reason| MqttConfigError::new("cert_file", reason))?,
                PrivateKeyDer::from_pem_file(key_file).map_err(|error| {
                    MqttConfigError::new(
                        "key_file",
                        format!("{}: no usable private key: {error}", key_file.display()),
                    )
                })?,
                "cert_file",
            )),
            _ => None,
        };
        let client = match identity {
            Some((chain, key, key_name)) => {
                builder.with_client_auth_cert(chain, key).map_err(|error| {
                    MqttConfigError::new(
                        key_name,
                        format!("the certificate cannot be used with its key: {error}"),
                    )
                })?
            }
            None => builder.with_no_client_auth(),
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
