//! The files behind authentication and authorization — password file, JWT
//! keys, ACL, TLS certificates — loaded at start and again on SIGHUP or
//! `POST /api/v1/reload`, without dropping a connection.
//!
//! The authentication and ACL files are loaded all together before any is
//! applied, so a reload with one bad file changes nothing; each listener's
//! certificates are swapped on their own, and a listener whose files fail
//! keeps the ones it has.

use crate::config::AuthConfig;
use anyhow::Context;
use ferry_auth::{Acl, Authenticator, JwtVerifier, PasswordFile};
use ferry_broker::{Broker, Tls};
use serde::Serialize;
use std::sync::Arc;

pub struct Security {
    auth: AuthConfig,
    /// Every TLS listener, by name.
    tls: Vec<(String, Arc<Tls>)>,
    broker: Arc<Broker>,
}

/// What a reload loaded, for its log line and the admin API's answer.
#[derive(Debug, Serialize)]
pub struct Loaded {
    pub users: usize,
    pub jwt: bool,
    pub acl_rules: Option<usize>,
    pub tls_listeners: usize,
}

impl Security {
    /// Loads every file and applies it to `broker`.
    pub fn start(
        auth: AuthConfig,
        tls: Vec<(String, Arc<Tls>)>,
        broker: Arc<Broker>,
    ) -> anyhow::Result<Security> {
        let security = Security { auth, tls, broker };
        let loaded = security.apply_auth()?;
        tracing::info!(?loaded, "authentication and authorization loaded");
        Ok(security)
    }

    /// Loads every file again. Returns the first problem, after trying
    /// every TLS listener.
    pub fn reload(&self) -> anyhow::Result<Loaded> {
        let mut loaded = self.apply_auth()?;
        let mut failed = None;
        for (name, tls) in &self.tls {
            match tls.reload() {
                Ok(()) => loaded.tls_listeners += 1,
                Err(error) => {
                    tracing::error!(listener = %name, %error, "TLS files not reloaded; the previous ones stay");
                    failed.get_or_insert(anyhow::anyhow!("listener {name}: {error}"));
                }
            }
        }
        match failed {
            Some(error) => Err(error),
            None => {
                tracing::info!(?loaded, "reloaded");
                Ok(loaded)
            }
        }
    }

    fn apply_auth(&self) -> anyhow::Result<Loaded> {
        let passwords = match &self.auth.password_file {
            Some(path) => Some(PasswordFile::load(path)?),
            None => None,
        };
        let jwt = match &self.auth.jwt {
            Some(config) => Some(JwtVerifier::load(config).context("auth.jwt")?),
            None => None,
        };
        let acl = match &self.auth.acl_file {
            Some(path) => Some(Acl::load(path)?),
            None => None,
        };
        let loaded = Loaded {
            users: passwords.as_ref().map_or(0, |passwords| passwords.users().count()),
            jwt: jwt.is_some(),
            acl_rules: acl.as_ref().map(Acl::rules),
            tls_listeners: 0,
        };
        self.broker.set_authenticator(Authenticator::new(passwords, jwt));
        self.broker.set_acl(acl);
        Ok(loaded)
    }
}
