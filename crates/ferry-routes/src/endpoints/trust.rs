//! What the TLS of an endpoint (`mqtt` over `mqtts`, `http` over `https`)
//! trusts: the CA certificates of a PEM file, or the system's; and the
//! certificate chains such files hold.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;
use std::io::Read;
use std::path::Path;

/// A CA bundle is a few hundred KiB (the whole Mozilla set is ~220 KiB); a
/// bigger file is not one, and is not read into memory whole.
const PEM_FILE_BYTES_MAX: u64 = 4 << 20;

/// The CA certificates in `ca_file`, else the system's. The error says why,
/// for the caller to put under its key.
pub(crate) fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, String> {
    let Some(path) = ca_file else { return system_roots() };
    roots_of(certificates(path)?, &path.display().to_string())
}

/// The CA certificates of PEM text; `name` says where it came from.
pub(crate) fn roots_in(pem: &[u8], name: &str) -> Result<RootCertStore, String> {
    roots_of(certificates_in(pem, name)?, name)
}

fn roots_of(
    certificates: Vec<CertificateDer<'static>>,
    name: &str,
) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots
            .add(certificate)
            .map_err(|error| format!("{name}: not a usable CA certificate: {error}"))?;
    }
    Ok(roots)
}

/// The certificates (`CERTIFICATE` blocks) of a PEM file, at least one.
pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let invalid = |reason: String| format!("{}: {reason}", path.display());
    let file =
        std::fs::File::open(path).map_err(|error| invalid(format!("cannot read: {error}")))?;
    let mut pem = Vec::new();
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut pem)
        .map_err(|error| invalid(format!("cannot read: {error}")))?;
    if pem.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(invalid(format!("larger than {PEM_FILE_BYTES_MAX} bytes: not a PEM bundle")));
    }
    certificates_in(&pem, &path.display().to_string())
}

/// The certificates of PEM text, at least one; `name` says where it came
/// from.
pub(crate) fn certificates_in(
    pem: &[u8],
    name: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{name}: not PEM certificates: {error}"))?;
    if certificates.is_empty() {
        return Err(format!("{name}: no CERTIFICATE block"));
    }
    Ok(certificates)
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs()
        .map_err(|error| format!("the system's CA certificates cannot be read: {error}"))?;
    let mut roots = RootCertStore::empty();
    // Some system bundles hold a certificate rustls cannot use (an old
    // signature algorithm); the rest still serve.
    roots.add_parsable_certificates(found);
    if roots.is_empty() {
        return Err("the system has no usable CA certificates".into());
    }
    Ok(roots)
}
