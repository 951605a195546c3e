//! Whether a CONNECT may in: anonymous access, or a user name and password
//! checked against the password file, with failed attempts limited per
//! source address so that a password cannot be guessed at the speed of the
//! network, and a flood of wrong ones cannot keep the broker hashing.

use crate::PasswordFile;
use std::collections::HashMap;
use std::net::IpAddr;
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

/// What a CONNECT's credentials come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// A user name with a wrong or missing password, or one not in the file.
    BadCredentials,
    /// No user name where anonymous clients are not allowed.
    NotAuthorized,
    /// This address failed too often lately; the credentials were not
    /// looked at.
    TooManyFailures,
}

#[derive(Debug)]
pub struct Authenticator {
    passwords: Option<PasswordFile>,
    allow_anonymous: bool,
    failures: Mutex<Failures>,
}

impl Default for Authenticator {
    /// Anonymous clients allowed and no password file: Mosquitto 2's
    /// behaviour on its localhost-only default listener, and Ferry's with
    /// no configuration.
    fn default() -> Authenticator {
        Authenticator::new(None, true)
    }
}

impl Authenticator {
    pub fn new(passwords: Option<PasswordFile>, allow_anonymous: bool) -> Authenticator {
        Authenticator { passwords, allow_anonymous, failures: Mutex::new(Failures::default()) }
    }

    /// Whether `check` will hash a password (tens of milliseconds of one
    /// core and 19 MiB): callers run such checks off their async threads,
    /// a bounded number at a time.
    pub fn hashes(&self, username: Option<&str>) -> bool {
        self.passwords.is_some() && username.is_some()
    }

    pub fn check(&self, peer: IpAddr, username: Option<&str>, password: Option<&[u8]>) -> Verdict {
        if self.passwords.is_none() && self.allow_anonymous {
            // Nothing can fail, so nothing to count: no lock on the path
            // of every CONNECT of an open broker.
            return Verdict::Accepted;
        }
        let now = Instant::now();
        if self.failures().is_limited(peer, now) {
            return Verdict::TooManyFailures;
        }
        let verdict = match (username, &self.passwords) {
            (Some(user), Some(passwords)) => {
                if passwords.verify(user, password.unwrap_or_default()) {
                    Verdict::Accepted
                } else {
                    Verdict::BadCredentials
                }
            }
            // No password file: a user name is only a name, as with
            // Mosquitto, and anonymous access decides.
            _ if self.allow_anonymous => Verdict::Accepted,
            _ => Verdict::NotAuthorized,
        };
        if verdict != Verdict::Accepted {
            self.failures().record(peer, now);
        }
        verdict
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, Failures> {
        // A panic while holding it leaves only counters behind: still usable.
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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

    fn with_user(allow_anonymous: bool) -> Authenticator {
        let mut passwords = PasswordFile::default();
        passwords.set("u", b"right").unwrap();
        Authenticator::new(Some(passwords), allow_anonymous)
    }

    #[test]
    fn credentials_and_anonymous_access_decide() {
        let strict = with_user(false);
        assert_eq!(strict.check(PEER, Some("u"), Some(b"right")), Verdict::Accepted);
        assert_eq!(strict.check(PEER, Some("u"), Some(b"wrong")), Verdict::BadCredentials);
        assert_eq!(strict.check(PEER, Some("u"), None), Verdict::BadCredentials);
        assert_eq!(strict.check(PEER, Some("x"), Some(b"right")), Verdict::BadCredentials);
        assert_eq!(strict.check(PEER, None, None), Verdict::NotAuthorized);
        let open = with_user(true);
        assert_eq!(open.check(PEER, None, None), Verdict::Accepted);
        assert_eq!(open.check(PEER, Some("u"), Some(b"wrong")), Verdict::BadCredentials);
        let default = Authenticator::default();
        assert!(!default.hashes(Some("anyone")));
        assert_eq!(default.check(PEER, Some("anyone"), None), Verdict::Accepted);
        assert_eq!(
            Authenticator::new(None, false).check(PEER, Some("a"), None),
            Verdict::NotAuthorized
        );
    }

    #[test]
    fn an_address_that_keeps_failing_is_held_back_and_others_are_not() {
        let auth = Authenticator::new(None, false);
        for _ in 0..FAILURE_BURST as usize {
            assert_eq!(auth.check(PEER, None, None), Verdict::NotAuthorized);
        }
        assert_eq!(auth.check(PEER, None, None), Verdict::TooManyFailures);
        assert_eq!(auth.check(OTHER, None, None), Verdict::NotAuthorized);
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
