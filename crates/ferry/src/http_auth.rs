//! Who an HTTP request comes from, for every API on the HTTP listener
//! (Ditto's `/api/2` in `twins.rs`, the admin API in `admin.rs`): the
//! same users and the same checks as MQTT clients.
//!
//! - `Authorization: Basic` is checked against Ferry's password file;
//! - `Authorization: Bearer <JWT>` is verified with `[auth.jwt]`;
//! - no credentials, on a loopback listener with no password file and no
//!   JWT keys (Ferry with no configuration), is the loopback default,
//!   which each API names as it likes. Never beyond loopback.

use crate::config::Config;
use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use base64::Engine;
use ferry_auth::{Credentials, ListenerAuth, Verdict};
use ferry_broker::Broker;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a request proved who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpUser {
    /// A password-file user, by Basic credentials.
    Basic(String),
    /// The user a verified JWT names, and the groups it claims.
    Bearer { user: String, groups: Vec<Arc<str>> },
    /// No credentials, let in by the loopback rule.
    LoopbackDefault,
}

/// How one HTTP listener checks credentials.
pub struct HttpAuth {
    broker: Arc<Broker>,
    listener: ListenerAuth,
    /// Whether a request without credentials is let in (the loopback rule).
    loopback_default: bool,
    /// Passwords verified lately, by a keyed hash of user and password:
    /// hashing one takes ~20 ms of a core, and an HTTP client sends the
    /// same credentials with every request.
    verified: quick_cache::sync::Cache<u128, Instant>,
    keys: (RandomState, RandomState),
}

/// How long a verified password is trusted without hashing it again: a
/// password changed by a reload is refused at most this long after.
const VERIFIED_FOR: Duration = Duration::from_secs(60);

/// Credentials remembered at most: one per client, in practice.
const VERIFIED_ENTRIES: usize = 10_000;

impl HttpAuth {
    pub fn new(
        config: &Config,
        listener: ListenerAuth,
        bind: SocketAddr,
        broker: Arc<Broker>,
    ) -> HttpAuth {
        let no_credentials_configured =
            config.auth.password_file.is_none() && config.auth.jwt.is_none();
        HttpAuth {
            broker,
            listener,
            loopback_default: bind.ip().is_loopback()
                && listener.allow_anonymous
                && no_credentials_configured,
            verified: quick_cache::sync::Cache::new(VERIFIED_ENTRIES),
            keys: (RandomState::new(), RandomState::new()),
        }
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Who the request's `Authorization` says it is from, the loopback
    /// default without one, or why neither.
    pub async fn user(
        &self,
        headers: &HeaderMap,
        peer: SocketAddr,
    ) -> Result<HttpUser, &'static str> {
        let Some(authorization) = headers.get(AUTHORIZATION) else {
            return if self.loopback_default {
                Ok(HttpUser::LoopbackDefault)
            } else {
                Err("no credentials")
            };
        };
        let authorization = authorization.to_str().map_err(|_| "unreadable Authorization")?;
        let (scheme, value) = authorization.split_once(' ').ok_or("unreadable Authorization")?;
        if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(value.trim())
                .map_err(|_| "Basic credentials are not base64")?;
            let decoded =
                String::from_utf8(decoded).map_err(|_| "Basic credentials are not UTF-8")?;
            let (user, password) =
                decoded.split_once(':').ok_or("Basic credentials without ':'")?;
            self.password(user, password, peer).await?;
            Ok(HttpUser::Basic(user.to_owned()))
        } else if scheme.eq_ignore_ascii_case("bearer") {
            let policy = ListenerAuth { allow_anonymous: false, password: false, ..self.listener };
            let credentials = Credentials {
                peer: peer.ip(),
                username: None,
                password: Some(value.trim().as_bytes()),
                certificate: None,
            };
            match self.broker.authenticate(policy, credentials).await {
                Verdict::Accepted(identity) => match identity.username {
                    Some(user) => {
                        Ok(HttpUser::Bearer { user: user.to_string(), groups: identity.groups })
                    }
                    None => Err("the token names no user"),
                },
                _ => Err("the token does not verify"),
            }
        } else {
            Err("an Authorization scheme other than Basic or Bearer")
        }
    }

    /// Checks `user`'s password against the password file (through the
    /// cache of lately verified ones).
    pub async fn password(
        &self,
        user: &str,
        password: &str,
        peer: SocketAddr,
    ) -> Result<(), &'static str> {
        let key = {
            let text = (user, password);
            u128::from(self.keys.0.hash_one(text)) << 64 | u128::from(self.keys.1.hash_one(text))
        };
        if self.verified.get(&key).is_some_and(|at| at.elapsed() < VERIFIED_FOR) {
            return Ok(());
        }
        let policy = ListenerAuth {
            allow_anonymous: false,
            jwt: false,
            certificate: false,
            ..self.listener
        };
        let credentials = Credentials {
            peer: peer.ip(),
            username: Some(user),
            password: Some(password.as_bytes()),
            certificate: None,
        };
        match self.broker.authenticate(policy, credentials).await {
            Verdict::Accepted(_) => {
                self.verified.insert(key, Instant::now());
                Ok(())
            }
            Verdict::TooManyFailures => Err("too many failed attempts from this address"),
            _ => Err("wrong user name or password"),
        }
    }
}
