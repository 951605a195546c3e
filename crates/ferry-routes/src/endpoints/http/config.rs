//! `[endpoints.NAME]` with `type = "http"`: the settings as written, and
//! their checked form. Checking happens when the endpoint is built (at
//! start and on reload), so a mistake names the key and changes nothing.
//!
//! The bearer token and header values are secrets as far as logs go: the
//! `Debug` form leaves them out, and no error quotes them.

use super::encode::Format;
use crate::units::Span;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::Uri;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpEndpointConfig {
    /// Where each batch is POSTed: an `http://` or `https://` URL. No user
    /// name or password in it (they would end up in logs): use
    /// `bearer_token` or `headers`.
    pub url: String,
    /// `"json"` (the default): a batch is one JSON array of messages.
    /// `"ndjson"`: one JSON object per line.
    #[serde(default)]
    pub format: Format,
    /// Headers added to every request, name → value. They may replace
    /// `content-type` and `user-agent`; not the ones that frame the
    /// request (`host`, `content-length`, `transfer-encoding`,
    /// `connection`), nor `authorization` when `bearer_token` is set.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Sent as `Authorization: Bearer <token>`. Never logged.
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// How long one batch may take from connecting to the end of the
    /// answer; past it the batch counts as failed and is sent again.
    #[serde(default = "default_timeout")]
    pub timeout: Span,
    /// PEM file of the CA certificates an https server must chain to, for
    /// a private CA. Without it, the system's CA certificates are used.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn default_timeout() -> Span {
    Span(Duration::from_secs(10))
}

const REDACTED: &str = "<redacted>";

/// By hand, so that printing a configuration (a reload's diff, a debug
/// log) cannot leak the token or a header's value (`x-api-key` and the
/// like are secrets too).
impl fmt::Debug for HttpEndpointConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpEndpointConfig")
            .field("url", &redacted_url(&self.url))
            .field("format", &self.format)
            .field("headers", &Names(&self.headers))
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| REDACTED))
            .field("timeout", &self.timeout)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

struct Names<'a>(&'a BTreeMap<String, String>);

impl fmt::Debug for Names<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.keys().map(|name| (name, REDACTED))).finish()
    }
}

/// A URL fit for logs: its query is left out, since some services take
/// their key there (`?code=…`).
fn redacted_url(url: &str) -> String {
    match url.split_once('?') {
        Some((before, _)) => format!("{before}?…"),
        None => url.to_owned(),
    }
}

/// A setting that cannot work, with the key to fix. None of them quotes a
/// header value or the token.
#[derive(Debug, thiserror::Error)]
pub enum HttpConfigError {
    #[error("`url`: {0}")]
    Url(&'static str),
    #[error("`headers.{name}`: {reason}")]
    Header { name: String, reason: &'static str },
    #[error("`bearer_token`: {0}")]
    BearerToken(&'static str),
    #[error("`timeout` must be above 0")]
    Timeout,
    #[error("`ca_file` is for https:// URLs")]
    CaFileWithoutTls,
    /// The CA file (or, without one, the system's CAs) cannot be used.
    #[error("`ca_file`: {0}")]
    CaFile(String),
    #[error("https: {0}")]
    Tls(#[from] rustls::Error),
}

/// Headers the client itself sets from the request: another value would
/// break the framing or the virtual host.
const FRAMING_HEADERS: [HeaderName; 4] =
    [header::HOST, header::CONTENT_LENGTH, header::TRANSFER_ENCODING, header::CONNECTION];

/// The checked settings: what a request needs, made once. Not `Debug`:
/// its path may hold a key in its query.
pub struct Checked {
    /// `https://host:port/path` with the query left out, for logs.
    pub target: String,
    /// The host to resolve and connect to (an IPv6 address without its
    /// brackets) and the port.
    pub host: String,
    pub port: u16,
    /// The origin-form target of the request line (`/path?query`).
    pub path: Uri,
    /// Every request's headers, `Host` and `Content-Type` included.
    pub headers: HeaderMap,
    pub tls: Option<Tls>,
    pub format: Format,
    pub timeout: Duration,
}

pub struct Tls {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl Tls {
    /// HTTPS to `host`, trusting `ca_file`'s CAs or else the system's.
    pub fn to_host(host: &str, ca_file: Option<&Path>) -> Result<Tls, HttpConfigError> {
        Ok(Tls {
            config: Arc::new(client_config(ca_file)?),
            server_name: ServerName::try_from(host.to_owned())
                .map_err(|_| HttpConfigError::Url("the host is not a valid TLS server name"))?,
        })
    }
}

impl HttpEndpointConfig {
    pub fn check(&self) -> Result<Checked, HttpConfigError> {
        let uri: Uri = self.url.parse().map_err(|_| HttpConfigError::Url("not a valid URL"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(HttpConfigError::Url("must start with http:// or https://")),
        };
        let authority =
            uri.authority().ok_or(HttpConfigError::Url("needs a host: http://host[:port]/path"))?;
        if authority.as_str().contains('@') {
            return Err(HttpConfigError::Url(
                "must not hold a user name or password (they would be logged): use `bearer_token` or `headers`",
            ));
        }
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_owned();
        if host.is_empty() {
            return Err(HttpConfigError::Url("needs a host: http://host[:port]/path"));
        }
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path: Uri = match uri.path_and_query() {
            Some(path) if !path.as_str().is_empty() => path.as_str(),
            _ => "/",
        }
        .parse()
        .map_err(|_| HttpConfigError::Url("not a valid URL"))?;
        if self.timeout.0.is_zero() {
            return Err(HttpConfigError::Timeout);
        }
        let tls = match (https, &self.ca_file) {
            (false, Some(_)) => return Err(HttpConfigError::CaFileWithoutTls),
            (false, None) => None,
            (true, ca_file) => Some(Tls::to_host(&host, ca_file.as_deref())?),
        };
        let target = format!(
            "{}://{}{}{}",
            if https { "https" } else { "http" },
            authority,
            uri.path(),
            if uri.query().is_some() { "?…" } else { "" }
        );
        Ok(Checked {
            target,
            host,
            port,
            path,
            headers: self.headers(authority.as_str())?,
            tls,
            format: self.format,
            timeout: self.timeout.0,
        })
    }

    fn headers(&self, authority: &str) -> Result<HeaderMap, HttpConfigError> {
        let mut headers = HeaderMap::new();
        let host = HeaderValue::from_str(authority)
            .map_err(|_| HttpConfigError::Url("the host is not a valid header value"))?;
        headers.insert(header::HOST, host);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(self.format.content_type()));
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static(concat!("ferry/", env!("CARGO_PKG_VERSION"))),
        );
        if let Some(token) = &self.bearer_token {
            if token.is_empty() {
                return Err(HttpConfigError::BearerToken("is empty"));
            }
            let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                HttpConfigError::BearerToken("has characters a header cannot carry")
            })?;
            // Keeps it out of the header map's own Debug output.
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        let mut given = Vec::with_capacity(self.headers.len());
        for (name, value) in &self.headers {
            let invalid = |reason| HttpConfigError::Header { name: name.clone(), reason };
            let parsed = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid("not a valid header name"))?;
            if FRAMING_HEADERS.contains(&parsed) {
                return Err(invalid("set by the client itself; it cannot be configured"));
            }
            if parsed == header::AUTHORIZATION && self.bearer_token.is_some() {
                return Err(invalid("`bearer_token` already sets it; set one or the other"));
            }
            if given.contains(&parsed) {
                return Err(invalid("given twice (header names are case-insensitive)"));
            }
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| invalid("the value has characters a header cannot carry"))?;
            value.set_sensitive(true);
            given.push(parsed.clone());
            headers.insert(parsed, value);
        }
        Ok(headers)
    }
}

/// rustls with the ring provider, as the broker's listeners; HTTP/1.1 is
/// all the client speaks, so that is all it offers in ALPN.
fn client_config(ca_file: Option<&Path>) -> Result<ClientConfig, HttpConfigError> {
    let roots = crate::endpoints::trust::roots(ca_file).map_err(HttpConfigError::CaFile)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(settings: serde_json::Value) -> HttpEndpointConfig {
        serde_json::from_value(settings).unwrap()
    }

    fn error(settings: serde_json::Value) -> String {
        config(settings).check().err().expect("a mistake").to_string()
    }

    #[test]
    fn defaults_and_the_request_headers() {
        let checked = config(json!({
            "url": "http://[::1]:8080/ingest?code=s3cret",
            "headers": {"X-Site": "plant-3", "content-type": "application/vnd.ferry+json"},
            "bearer_token": "t0ken",
        }))
        .check()
        .unwrap();
        assert_eq!((checked.host.as_str(), checked.port), ("::1", 8080));
        assert_eq!(checked.path, "/ingest?code=s3cret");
        assert_eq!(checked.target, "http://[::1]:8080/ingest?…");
        assert_eq!(checked.timeout, Duration::from_secs(10));
        assert_eq!(checked.format, Format::Json);
        assert_eq!(checked.headers["host"], "[::1]:8080");
        assert_eq!(checked.headers["x-site"], "plant-3");
        assert_eq!(checked.headers["content-type"], "application/vnd.ferry+json");
        assert_eq!(checked.headers["authorization"], "Bearer t0ken");
        let plain =
            config(json!({"url": "http://example.com", "format": "ndjson"})).check().unwrap();
        assert_eq!((plain.port, plain.path.to_string().as_str()), (80, "/"));
        assert_eq!(plain.headers["content-type"], "application/x-ndjson");
    }

    #[test]
    fn mistakes_name_their_key() {
        for (settings, expected) in [
            (json!({"url": "ftp://x/"}), "`url`: must start with http:// or https://"),
            (json!({"url": "x y"}), "`url`: not a valid URL"),
            (json!({"url": "http://u:p@x/"}), "`url`: must not hold a user name or password"),
            (json!({"url": "http://x/", "timeout": "0s"}), "`timeout` must be above 0"),
            (json!({"url": "http://x/", "ca_file": "/ca.pem"}), "`ca_file` is for https:// URLs"),
            (
                json!({"url": "https://x/", "ca_file": "/nonexistent/ca.pem"}),
                "`ca_file`: /nonexistent/ca.pem: cannot read",
            ),
            (
                json!({"url": "http://x/", "headers": {"Host": "y"}}),
                "`headers.Host`: set by the client itself",
            ),
            (
                json!({"url": "http://x/", "headers": {"bad name": "y"}}),
                "`headers.bad name`: not a valid header name",
            ),
            (
                json!({"url": "http://x/", "headers": {"x-key": "a\nb"}}),
                "`headers.x-key`: the value has characters",
            ),
            (
                json!({"url": "http://x/", "headers": {"a": "1", "A": "2"}}),
                "`headers.a`: given twice",
            ),
            (
                json!({"url": "http://x/", "bearer_token": "t", "headers": {"Authorization": "Basic x"}}),
                "`headers.Authorization`: `bearer_token` already sets it",
            ),
            (json!({"url": "http://x/", "bearer_token": ""}), "`bearer_token`: is empty"),
        ] {
            let message = error(settings.clone());
            assert!(message.starts_with(expected), "{settings}: {message}");
        }
        assert!(serde_json::from_value::<HttpEndpointConfig>(
            json!({"url": "http://x/", "tls": {}})
        )
        .is_err());
        assert!(serde_json::from_value::<HttpEndpointConfig>(
            json!({"url": "http://x/", "format": "xml"})
        )
        .is_err());
    }

    #[test]
    fn secrets_stay_out_of_debug_and_errors() {
        let secret = "s3cret-value";
        let with_secrets = config(json!({
            "url": format!("http://x/?code={secret}"),
            "headers": {"x-api-key": secret},
            "bearer_token": secret,
        }));
        let debug = format!("{with_secrets:?} {:?}", with_secrets.check().unwrap().headers);
        assert!(!debug.contains(secret), "{debug}");
        assert!(debug.contains("x-api-key") && debug.contains(REDACTED), "{debug}");
        let bad_token = error(json!({"url": "http://x/", "bearer_token": format!("{secret}\n")}));
        assert!(!bad_token.contains(secret), "{bad_token}");
        let bad_value = error(json!({"url": "http://x/", "headers": {"k": format!("{secret}\n")}}));
        assert!(!bad_value.contains(secret), "{bad_value}");
    }
}
