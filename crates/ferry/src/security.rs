//! The files behind authentication and authorization — password file, JWT
//! keys, ACL, TLS certificates — loaded at start and again on SIGHUP or
//! `POST /api/v1/reload`, without dropping a connection.
//!
//! Every file — the authentication and ACL files and every TLS listener's
//! certificates — is read before any is applied, so a reload with one bad
//! file changes nothing and says which file it was.

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
        let (auth, loaded) = security.read_auth()?;
        security.apply_auth(auth);
        tracing::info!(?loaded, "authentication and authorization loaded");
        Ok(security)
    }

    /// Reads every file again and, if all of them are good, applies them;
    /// otherwise changes nothing and returns the first problem.
    pub fn reload(&self) -> anyhow::Result<Loaded> {
        let (auth, mut loaded) = self.read_auth()?;
        let mut certificates = Vec::with_capacity(self.tls.len());
        for (name, tls) in &self.tls {
            let read = tls.reread().with_context(|| format!("listener {name}"))?;
            certificates.push((tls, read));
        }
        self.apply_auth(auth);
        loaded.tls_listeners = certificates.len();
        for (tls, read) in certificates {
            tls.install(read);
        }
        Ok(loaded)
    }

    fn read_auth(&self) -> anyhow::Result<(AuthFiles, Loaded)> {
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
        Ok((AuthFiles { passwords, jwt, acl }, loaded))
    }

    fn apply_auth(&self, AuthFiles { passwords, jwt, acl }: AuthFiles) {
        self.broker.set_authenticator(Authenticator::new(passwords, jwt));
        self.broker.set_acl(acl);
    }
}

/// The authentication and authorization files, read and not yet applied.
struct AuthFiles {
    passwords: Option<PasswordFile>,
    jwt: Option<JwtVerifier>,
    acl: Option<Acl>,
}
