//! TLS for the listeners (MQTT, WebSocket, HTTP): certificates from PEM
//! files, an optional client CA for mutual TLS, and the device identity
//! read from a client certificate.
//!
//! A `Tls` holds the rustls configuration behind a lock so that `reload`
//! can swap in new files while running: handshakes started afterwards use
//! them, connections already up keep the keys they were made with. A reload
//! that fails (a half-written file, a key that does not match) keeps the
//! old configuration, so a mistake cannot take a listener down.

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// A listener's `[listener.tls]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// The server's certificate chain, PEM, leaf first.
    pub cert_file: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// CA certificates, PEM, that client certificates must chain to. Set,
    /// it makes the listener mutual TLS.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// With a client CA: whether a client without a certificate is refused
    /// in the handshake (the default) or may go on to other methods.
    #[serde(default = "yes")]
    pub require_client_cert: bool,
    /// Which part of a client certificate names the device.
    #[serde(default)]
    pub identity_from: IdentityField,
    /// What the certificate's identity stands for.
    #[serde(default)]
    pub identity_as: IdentityUse,
    #[serde(default)]
    pub min_version: TlsVersion,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IdentityUse {
    /// The user name ACL rules and `%u` see; the CONNECT's user name is
    /// ignored (Mosquitto's `use_identity_as_username`).
    #[default]
    Username,
    /// The client id too: a CONNECT must give that id or none (then it is
    /// assigned), so a device cannot take another's session.
    UsernameAndClientId,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IdentityField {
    /// The subject's common name, as Mosquitto's `use_identity_as_username`.
    #[default]
    Cn,
    /// The first DNS name among the subject alternative names.
    SanDns,
    /// The first URI SAN (SPIFFE ids, Azure's device URIs).
    SanUri,
    /// The first e-mail SAN.
    SanEmail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3: what constrained devices still need.
    #[default]
    #[serde(rename = "1.2")]
    Tls12,
    #[serde(rename = "1.3")]
    Tls13,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client CA: {0}")]
    ClientCa(#[from] rustls::server::VerifierBuilderError),
}

/// A listener's TLS files read again, not yet in use.
pub struct ReadAgain(TlsAcceptor);

/// A listener's TLS: the current configuration and how to remake it.
pub struct Tls {
    settings: TlsSettings,
    acceptor: RwLock<TlsAcceptor>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Tls").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Tls {
    pub fn load(settings: TlsSettings) -> Result<Tls, TlsError> {
        let config = server_config(&settings)?;
        Ok(Tls { settings, acceptor: RwLock::new(TlsAcceptor::from(Arc::new(config))) })
    }

    /// Reads the files again, for [`Tls::install`]: a reload of several
    /// listeners reads them all before it changes any.
    pub fn reread(&self) -> Result<ReadAgain, TlsError> {
        Ok(ReadAgain(TlsAcceptor::from(Arc::new(server_config(&self.settings)?))))
    }

    /// Uses what [`Tls::reread`] read for new handshakes; connections
    /// already made keep theirs.
    pub fn install(&self, read: ReadAgain) {
        *self.acceptor.write() = read.0;
    }

    pub fn is_mutual(&self) -> bool {
        self.settings.client_ca_file.is_some()
    }

    pub fn identity_use(&self) -> IdentityUse {
        self.settings.identity_as
    }

    /// Runs the server side of a handshake.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        let acceptor = self.acceptor.read().clone();
        acceptor.accept(stream).await
    }

    /// The device identity in a verified client certificate, if the client
    /// sent one and it has the configured field.
    pub fn identity(&self, stream: &TlsStream<TcpStream>) -> Option<Arc<str>> {
        let leaf = stream.get_ref().1.peer_certificates()?.first()?;
        identity_in(leaf, self.settings.identity_from).map(Arc::from)
    }
}

fn server_config(settings: &TlsSettings) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match settings.min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder =
        ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions)?;
    let builder = match &settings.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for certificate in certificates(path)? {
                roots.add(certificate).map_err(|error| TlsError::Invalid {
                    path: path.clone(),
                    message: format!("not a usable CA certificate: {error}"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if settings.require_client_cert {
                verifier.build()?
            } else {
                verifier.allow_unauthenticated().build()?
            };
            builder.with_client_cert_verifier(verifier)
        }
    };
    let key = PrivateKeyDer::from_pem_file(&settings.key_file).map_err(|error| {
        // The message of a PEM error never quotes the key's bytes.
        TlsError::Invalid {
            path: settings.key_file.clone(),
            message: format!("no usable private key: {error}"),
        }
    })?;
    let config = builder.with_single_cert(certificates(&settings.cert_file)?, key)?;
    Ok(config)
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let invalid = |message: String| TlsError::Invalid { path: path.to_owned(), message };
    let pem =
        std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source })?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| invalid(format!("not PEM certificates: {error}")))?;
    if certificates.is_empty() {
        return Err(invalid("no CERTIFICATE block".into()));
    }
    Ok(certificates)
}

/// The identity field of a DER certificate (already verified by rustls).
fn identity_in(der: &CertificateDer<'_>, field: IdentityField) -> Option<String> {
    let (_, certificate) = X509Certificate::from_der(der.as_ref()).ok()?;
    if field == IdentityField::Cn {
        let name = certificate.subject().iter_common_name().next()?;
        return name.as_str().ok().map(str::to_owned);
    }
    let names = certificate.subject_alternative_name().ok()??;
    names.value.general_names.iter().find_map(|name| match (field, name) {
        (IdentityField::SanDns, GeneralName::DNSName(value))
        | (IdentityField::SanUri, GeneralName::URI(value))
        | (IdentityField::SanEmail, GeneralName::RFC822Name(value)) => Some(value.to_string()),
        _ => None,
    })
}
