//! A connection's `uri`, `scheme://[user[:password]@]host[:port][/path]`,
//! split one way for every connection type; each then says which schemes,
//! default ports and paths it takes. Messages about a uri never repeat its
//! password ([`redact`]).

use crate::error::DittoError;

/// A uri's parts.
#[derive(Debug, PartialEq, Eq)]
pub struct UriParts<'a> {
    pub scheme: &'a str,
    /// Percent-decoded (`%40` for `@`), as Ditto reads them.
    pub username: Option<String>,
    pub password: Option<String>,
    /// Without an IPv6 address's brackets.
    pub host: &'a str,
    pub port: Option<u16>,
    /// From the first `/` after the host, or empty.
    pub path: &'a str,
}

impl<'a> UriParts<'a> {
    /// The parts of `uri`, or what is wrong with it, to follow "The uri
    /// '…'" in a message ([`invalid`]).
    pub fn split(uri: &'a str) -> Result<UriParts<'a>, &'static str> {
        let (scheme, rest) = uri.split_once("://").ok_or("has no scheme")?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (user_info, host_port) = match authority.rsplit_once('@') {
            Some((user_info, host_port)) => (Some(user_info), host_port),
            None => (None, authority),
        };
        let (host, port) = match host_port.strip_prefix('[') {
            Some(bracketed) => {
                let (host, after) = bracketed.split_once(']').ok_or("has an unclosed '['")?;
                match after {
                    "" => (host, None),
                    _ => {
                        let port = after.strip_prefix(':').ok_or("has text after its host")?;
                        (host, Some(port_number(port)?))
                    }
                }
            }
            None => match host_port.split_once(':') {
                Some((host, port)) => (host, Some(port_number(port)?)),
                None => (host_port, None),
            },
        };
        if host.is_empty() {
            return Err("names no host");
        }
        let (username, password) = user_and_password(user_info);
        Ok(UriParts { scheme, username, password, host, port, path })
    }

    /// The host as a URL writes it: an IPv6 address in brackets.
    pub fn url_host(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.to_owned()
        }
    }

    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// The percent-decoded user name and password of `uri`, whose authority
/// may be a list of servers (Kafka's `tcp://user:pw@k1:9092,k2:9092`),
/// which `UriParts::split` does not take.
#[cfg(feature = "kafka")]
pub fn credentials(uri: &str) -> (Option<String>, Option<String>) {
    let rest = uri.split_once("://").map_or(uri, |(_, rest)| rest);
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    user_and_password(authority.rsplit_once('@').map(|(user_info, _)| user_info))
}

fn user_and_password(user_info: Option<&str>) -> (Option<String>, Option<String>) {
    match user_info {
        None => (None, None),
        Some(user_info) => match user_info.split_once(':') {
            Some((user, password)) => (Some(decode(user)), Some(decode(password))),
            None => (Some(decode(user_info)), None),
        },
    }
}

fn port_number(text: &str) -> Result<u16, &'static str> {
    text.parse().map_err(|_| "has a port that is not a number")
}

/// Percent-decoding of a uri's user name or password.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = bytes
            .get(index + 1..index + 3)
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (bytes[index], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                index += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// Ditto's error for a connection whose `uri` is wrong as `why` says.
pub fn invalid(uri: &str, why: &str) -> DittoError {
    DittoError::connection_invalid(format!("The uri '{}' {why}.", redact(uri)))
}

/// The uri without the password of its user info, for messages.
pub fn redact(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else { return uri.to_owned() };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{}", &rest[end..])
        }
        None => uri.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_splits_into_scheme_credentials_host_port_and_path() {
        let parts = UriParts::split("tcp://ditto:p%40ss@127.0.0.1:1884/base/").unwrap();
        assert_eq!(
            parts,
            UriParts {
                scheme: "tcp",
                username: Some("ditto".into()),
                password: Some("p@ss".into()),
                host: "127.0.0.1",
                port: Some(1884),
                path: "/base/",
            }
        );
        assert!(parts.is_loopback());
        let parts = UriParts::split("http://[::1]:8080").unwrap();
        assert_eq!(
            (parts.host, parts.port, parts.url_host().as_str()),
            ("::1", Some(8080), "[::1]")
        );
        assert!(parts.is_loopback());
        let parts = UriParts::split("ssl://user@broker.example.com").unwrap();
        assert_eq!((parts.username.as_deref(), parts.password.as_deref()), (Some("user"), None));
        assert_eq!((parts.port, parts.is_loopback()), (None, false));
        assert!(UriParts::split("tcp://LocalHost").unwrap().is_loopback());
    }

    #[test]
    fn a_malformed_uri_says_what_is_wrong_without_its_password() {
        for (bad, why) in [
            ("127.0.0.1:1883", "has no scheme"),
            ("tcp://", "names no host"),
            ("tcp://:1883", "names no host"),
            ("tcp://host:port", "has a port that is not a number"),
            ("tcp://host:70000", "has a port that is not a number"),
            ("tcp://[::1", "has an unclosed '['"),
            ("tcp://[::1]x", "has text after its host"),
        ] {
            assert_eq!(UriParts::split(bad), Err(why), "{bad}");
        }
        assert_eq!(redact("http://user:secret@h:1/p"), "http://user:***@h:1/p");
        let error = invalid("http://user:secret@h:port", "has a port that is not a number");
        assert!(!error.message.contains("secret"), "{}", error.message);
    }
}
