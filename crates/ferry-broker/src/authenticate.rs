//! The broker's side of authentication: which `Authenticator` applies
//! (replaceable while running, for reloads), and running its checks so that
//! password hashing neither blocks a connection thread nor, under a flood
//! of CONNECTs, takes more than a few cores and their memory.

use crate::broker::Broker;
use crate::listener::Origin;
use crate::tls::IdentityUse;
use ferry_auth::{Authenticator, Credentials, Identity, Principal, Verdict};
use ferry_mqtt::{Connect, ReasonCode};
use parking_lot::RwLock;
use std::sync::Arc;
use tokio::sync::Semaphore;

pub(crate) struct Authentication {
    authenticator: RwLock<Arc<Authenticator>>,
    /// Password checks running at once: one per core. Each takes ~20 ms and
    /// 19 MiB; unbounded, a CONNECT flood would spawn hundreds of them.
    hashing: Semaphore,
}

impl Default for Authentication {
    fn default() -> Authentication {
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        Authentication {
            authenticator: RwLock::new(Arc::new(Authenticator::default())),
            hashing: Semaphore::new(cores),
        }
    }
}

impl Broker {
    /// Who may connect from now on; connections already in are not
    /// re-examined.
    pub fn set_authenticator(&self, authenticator: Authenticator) {
        *self.authentication.authenticator.write() = Arc::new(authenticator);
    }

    /// The verdict on a CONNECT's credentials, coming from `origin`.
    pub(crate) async fn authenticate(&self, origin: &Origin, connect: &Connect) -> Verdict {
        let authenticator = self.authentication.authenticator.read().clone();
        let credentials = Credentials {
            peer: origin.peer.ip(),
            username: connect.username.as_ref().map(|name| name.as_str()),
            password: connect.password.as_deref(),
            certificate: origin.certificate.as_deref(),
        };
        if !authenticator.hashes(&origin.listener.auth, &credentials) {
            return authenticator.check(&origin.listener.auth, &credentials);
        }
        // Boxed: its state (a semaphore wait, the blocking task's handle,
        // the credentials) would otherwise widen the accept future of every
        // connection, password or not.
        Box::pin(self.check_password(authenticator, origin, connect)).await
    }

    async fn check_password(
        &self,
        authenticator: Arc<Authenticator>,
        origin: &Origin,
        connect: &Connect,
    ) -> Verdict {
        let Ok(_permit) = self.authentication.hashing.acquire().await else {
            return Verdict::NotAuthorized;
        };
        let (username, password) = (connect.username.clone(), connect.password.clone());
        let (peer, listener) = (origin.peer.ip(), origin.listener.auth);
        let check = move || {
            let credentials = Credentials {
                peer,
                username: username.as_ref().map(|name| name.as_str()),
                password: password.as_deref(),
                certificate: None,
            };
            authenticator.check(&listener, &credentials)
        };
        // A check that panicked let nobody in.
        tokio::task::spawn_blocking(check).await.unwrap_or(Verdict::NotAuthorized)
    }
}

/// The identity a verdict accepted, or the CONNACK reason refusing it
/// with the log's explanation.
pub(crate) fn admitted(verdict: Verdict) -> Result<Identity, (ReasonCode, &'static str)> {
    match verdict {
        Verdict::Accepted(identity) => Ok(identity),
        Verdict::BadCredentials => {
            Err((ReasonCode::BadUserNameOrPassword, "bad user name, password or token"))
        }
        Verdict::NotAuthorized => Err((
            ReasonCode::NotAuthorized,
            "no credentials this listener accepts, and anonymous clients are not allowed",
        )),
        Verdict::TooManyFailures => Err((
            ReasonCode::ConnectionRateExceeded,
            "too many failed logins from this address lately; credentials not checked",
        )),
    }
}

/// Who the client is for ACLs. The client id is left empty when the
/// broker is to assign one.
pub(crate) fn principal(
    connect: &Connect,
    origin: &Origin,
    identity: Identity,
) -> Result<Principal, &'static str> {
    let mut client_id: Arc<str> = connect.client_id.as_str().into();
    let binds_client_id = origin
        .listener
        .tls
        .as_ref()
        .is_some_and(|tls| tls.identity_use() == IdentityUse::UsernameAndClientId);
    if let (true, Some(certificate)) = (binds_client_id, &origin.certificate) {
        if !connect.client_id.is_empty() && connect.client_id.as_str() != &**certificate {
            return Err("the client id is not the certificate's identity");
        }
        client_id = certificate.clone();
    }
    Ok(Principal {
        client_id,
        username: identity.username,
        certificate: origin.certificate.clone(),
        groups: identity.groups,
    })
}
