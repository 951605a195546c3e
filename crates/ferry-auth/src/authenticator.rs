//! Whether a CONNECT may in: anonymous access, or a user name and password
//! checked against the password file, with failed attempts limited per
//! source address so that a password cannot be guessed at the speed of the
//! network, and a flood of wrong ones cannot keep the broker hashing.

use crate::jwt::JwtVerifier;
use crate::PasswordFile;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed attempts an address may make at once before it is slowed down.
pub const FAILURE_BURST: f64 = 10.0;

/// How fast an address's failures are forgiven: after the burst, one more
/// attempt per this much time.
pub const FAILURE_FORGIVEN_EVERY: Duration = Duration::from_secs(1);

/// Addresses tracked at most: a spoofed flood from many addresses must not
/// grow the table without bound. When it is full, addresses whose failures
/// are all forgiven make room; if none are, a new address is not tracked
/// (and so not limited) until some are.
pub const MAX_TRACKED_ADDRESSES: usize = 65_536;

/// How one listener lets clients in: which methods it accepts and
/// whether a client that proves nothing may connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerAuth {
    pub allow_anonymous: bool,
    /// A user name and a password from the password file.
    pub password: bool,
    /// A JWT in the password field.
    pub jwt: bool,
    /// The identity of a verified client certificate (mutual TLS).
    pub certificate: bool,
}

impl Default for ListenerAuth {
    /// Every method, and anonymous clients allowed: Ferry with no
    /// configuration, like Mosquitto 2 on its localhost-only listener.
    fn default() -> ListenerAuth {
        ListenerAuth { allow_anonymous: true, password: true, jwt: true, certificate: true }
    }
}

impl ListenerAuth {
    /// Whether any client at all could connect.
    pub fn accepts_anyone(&self) -> bool {
        self.allow_anonymous || self.password || self.jwt || self.certificate
    }
}

/// What a CONNECT brings to prove who it is.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    pub peer: IpAddr,
    pub username: Option<&'a str>,
    pub password: Option<&'a [u8]>,
    /// The identity in a client certificate the TLS handshake verified.
    pub certificate: Option<&'a str>,
}

/// What a CONNECT's credentials come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accepted(Identity),
    /// A user name with a wrong or missing password, one not in the file,
    /// or a JWT that does not verify.
    BadCredentials,
    /// Nothing proven where anonymous clients are not allowed.
    NotAuthorized,
    /// This address failed too often lately; the credentials were not
    /// looked at.
    TooManyFailures,
}

/// Who an accepted client proved to be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// Set only when proven (a password, a JWT or a certificate): a user
    /// name nobody checked is not one ACL rules may trust.
    pub username: Option<Arc<str>>,
    /// Groups a JWT claimed.
    pub groups: Vec<Arc<str>>,
    /// Unix seconds from which the credentials no longer hold (a JWT's
    /// `exp` and the leeway): the broker disconnects the client then.
    pub valid_until: Option<u64>,
}

#[derive(Debug, Default)]
pub struct Authenticator {
    passwords: Option<PasswordFile>,
    jwt: Option<JwtVerifier>,
    failures: Mutex<Failures>,
}

impl Authenticator {
    pub fn new(passwords: Option<PasswordFile>, jwt: Option<JwtVerifier>) -> Authenticator {
        Authenticator { passwords, jwt, failures: Mutex::new(Failures::default()) }
    }

    /// Whether the password file has `user`: a login made with a password
    /// lasts only as long as its user does.
    pub fn has_password_user(&self, user: &str) -> bool {
        self.passwords.as_ref().is_some_and(|passwords| passwords.users().any(|u| u == user))
    }

    /// Whether `check` will hash a password (tens of milliseconds of one
    /// core and 19 MiB): callers run such checks off their async threads,
    /// a bounded number at a time.
    pub fn hashes(&self, listener: &ListenerAuth, credentials: &Credentials<'_>) -> bool {
        matches!(self.method(listener, credentials), Method::Password)
    }

    pub fn check(&self, listener: &ListenerAuth, credentials: &Credentials<'_>) -> Verdict {
        let method = self.method(listener, credentials);
        if method == Method::Anonymous && listener.allow_anonymous {
            // Nothing can fail, so nothing to count: no lock on the path
            // of every CONNECT of an open broker.
            return Verdict::Accepted(Identity::default());
        }
        let now = Instant::now();
        if self.failures().is_limited(credentials.peer, now) {
            return Verdict::TooManyFailures;
        }
        let verdict = self.verify(method, credentials);
        if !matches!(verdict, Verdict::Accepted(_)) {
            self.failures().record(credentials.peer, now);
        }
        verdict
    }

    /// Which method judges these credentials on this listener: a verified
    /// certificate first, then a JWT, then the password file.
    pub fn method(&self, listener: &ListenerAuth, credentials: &Credentials<'_>) -> Method {
        if listener.certificate && credentials.certificate.is_some() {
            return Method::Certificate;
        }
        if let Some(password) = credentials.password {
            if listener.jwt && self.jwt.is_some() && JwtVerifier::looks_like_token(password) {
                return Method::Jwt;
            }
        }
        if listener.password && self.passwords.is_some() && credentials.username.is_some() {
            return Method::Password;
        }
        // No method can check what was sent: a user name is only a name,
        // as with Mosquitto, and anonymous access decides.
        Method::Anonymous
    }

    fn verify(&self, method: Method, credentials: &Credentials<'_>) -> Verdict {
        let accepted = |username: Option<&str>| {
            Verdict::Accepted(Identity {
                username: username.map(Arc::from),
                groups: Vec::new(),
                valid_until: None,
            })
        };
        match (method, &self.passwords, &self.jwt) {
            (Method::Certificate, ..) => accepted(credentials.certificate),
            (Method::Password, Some(passwords), _) => {
                let user = credentials.username.unwrap_or_default();
                if passwords.verify(user, credentials.password.unwrap_or_default()) {
                    accepted(Some(user))
                } else {
                    Verdict::BadCredentials
                }
            }
            (Method::Jwt, _, Some(jwt)) => {
                let token = credentials.password.unwrap_or_default();
                match jwt.verify(token, unix_now()) {
                    // A user name beside the token must be the one it
                    // names; one beside a token that names nobody proves
                    // nothing, and is no identity.
                    Ok(token)
                        if credentials.username.is_none_or(|given| {
                            token.username.as_deref().is_none_or(|named| named == given)
                        }) =>
                    {
                        Verdict::Accepted(Identity {
                            username: token.username,
                            groups: token.groups,
                            valid_until: Some(jwt.valid_until(token.expires_at)),
                        })
                    }
                    _ => Verdict::BadCredentials,
                }
            }
            _ => Verdict::NotAuthorized,
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, Failures> {
        // A panic while holding it leaves only counters behind: still usable.
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The method that judges a CONNECT's credentials (also what metrics
/// count a refusal under).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Anonymous,
    Certificate,
    Jwt,
    Password,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Recent failures per address, as a leaky bucket: each failure adds one,
/// and one leaks away every `FAILURE_FORGIVEN_EVERY`.
#[derive(Debug, Default)]
struct Failures {
    by_address: HashMap<IpAddr, (f64, Instant)>,
}

impl Failures {
    fn level(&self, peer: IpAddr, now: Instant) -> f64 {
        self.by_address.get(&peer).map_or(0.0, |&(level, at)| leaked(level, at, now))
    }

    /// Whether another failure would take the address past the burst.
    /// (Not `level >= burst`: the burst made in a moment has already
    /// leaked a little by the next attempt.)
    fn is_limited(&self, peer: IpAddr, now: Instant) -> bool {
        self.level(peer, now) > FAILURE_BURST - 1.0
    }

    fn record(&mut self, peer: IpAddr, now: Instant) {
        if !self.by_address.contains_key(&peer) && self.by_address.len() >= MAX_TRACKED_ADDRESSES {
            self.by_address.retain(|_, &mut (level, at)| leaked(level, at, now) > 0.0);
            if self.by_address.len() >= MAX_TRACKED_ADDRESSES {
                return;
            }
        }
        let level = self.level(peer, now);
        self.by_address.insert(peer, (level + 1.0, now));
    }
}

fn leaked(level: f64, at: Instant, now: Instant) -> f64 {
    let forgiven =
        now.saturating_duration_since(at).as_secs_f64() / FAILURE_FORGIVEN_EVERY.as_secs_f64();
    (level - forgiven).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    fn with_user() -> Authenticator {
        let mut passwords = PasswordFile::default();
        passwords.set("u", b"right").unwrap();
        Authenticator::new(Some(passwords), None)
    }

    fn listener(allow_anonymous: bool) -> ListenerAuth {
        ListenerAuth { allow_anonymous, ..ListenerAuth::default() }
    }

    fn check(
        auth: &Authenticator,
        listener: ListenerAuth,
        username: Option<&str>,
        password: Option<&[u8]>,
    ) -> Verdict {
        auth.check(&listener, &Credentials { peer: PEER, username, password, certificate: None })
    }

    fn user(name: &str) -> Verdict {
        Verdict::Accepted(Identity { username: Some(name.into()), ..Identity::default() })
    }

    const ANONYMOUS: Verdict =
        Verdict::Accepted(Identity { username: None, groups: Vec::new(), valid_until: None });

    #[test]
    fn credentials_and_anonymous_access_decide() {
        let auth = with_user();
        let strict = listener(false);
        assert_eq!(check(&auth, strict, Some("u"), Some(b"right")), user("u"));
        assert_eq!(check(&auth, strict, Some("u"), Some(b"wrong")), Verdict::BadCredentials);
        assert_eq!(check(&auth, strict, Some("u"), None), Verdict::BadCredentials);
        assert_eq!(check(&auth, strict, Some("x"), Some(b"right")), Verdict::BadCredentials);
        assert_eq!(check(&auth, strict, None, None), Verdict::NotAuthorized);
        let open = listener(true);
        assert_eq!(check(&auth, open, None, None), ANONYMOUS);
        assert_eq!(check(&auth, open, Some("u"), Some(b"wrong")), Verdict::BadCredentials);
        // A listener without the password method does not look at passwords.
        let no_passwords = ListenerAuth { password: false, ..strict };
        assert_eq!(check(&auth, no_passwords, Some("u"), Some(b"right")), Verdict::NotAuthorized);
        let default = Authenticator::default();
        let credentials =
            Credentials { peer: PEER, username: Some("anyone"), password: None, certificate: None };
        assert!(!default.hashes(&open, &credentials));
        // Without a password file a user name is not proven: it is no identity.
        assert_eq!(check(&default, open, Some("anyone"), None), ANONYMOUS);
        assert_eq!(check(&default, strict, Some("a"), None), Verdict::NotAuthorized);
    }

    #[test]
    fn a_verified_certificate_names_the_user_where_the_listener_accepts_it() {
        let auth = Authenticator::default();
        let credentials = Credentials {
            peer: PEER,
            username: Some("x"),
            password: None,
            certificate: Some("dev-1"),
        };
        assert_eq!(auth.check(&listener(false), &credentials), user("dev-1"));
        let without = ListenerAuth { certificate: false, ..listener(false) };
        assert_eq!(auth.check(&without, &credentials), Verdict::NotAuthorized);
    }

    #[test]
    fn an_address_that_keeps_failing_is_held_back_and_others_are_not() {
        let auth = Authenticator::default();
        let strict = listener(false);
        for _ in 0..FAILURE_BURST as usize {
            assert_eq!(check(&auth, strict, None, None), Verdict::NotAuthorized);
        }
        assert_eq!(check(&auth, strict, None, None), Verdict::TooManyFailures);
        let other = Credentials { peer: OTHER, username: None, password: None, certificate: None };
        assert_eq!(auth.check(&strict, &other), Verdict::NotAuthorized);
    }

    #[test]
    fn failures_are_forgiven_with_time() {
        let mut failures = Failures::default();
        let start = Instant::now();
        for _ in 0..FAILURE_BURST as usize {
            failures.record(PEER, start);
        }
        assert!(failures.is_limited(PEER, start));
        assert!(!failures.is_limited(PEER, start + FAILURE_FORGIVEN_EVERY));
        failures.record(PEER, start + FAILURE_FORGIVEN_EVERY);
        assert!(failures.is_limited(PEER, start + FAILURE_FORGIVEN_EVERY));
    }

    #[test]
    fn the_table_of_addresses_stays_bounded() {
        let mut failures = Failures::default();
        let now = Instant::now();
        for n in 0..MAX_TRACKED_ADDRESSES as u32 + 10 {
            failures.record(IpAddr::V4(n.into()), now);
        }
        assert_eq!(failures.by_address.len(), MAX_TRACKED_ADDRESSES);
        // Once their failures are forgiven, old addresses make room.
        let later = now + FAILURE_FORGIVEN_EVERY * 2;
        failures.record(PEER, later);
        assert_eq!(failures.by_address.len(), 1);
    }
}
