//! The broker's side of authentication: which `Authenticator` applies
//! (replaceable while running, for reloads), and running its checks so that
//! password hashing neither blocks a connection thread nor, under a flood
//! of CONNECTs, takes more than a few cores and their memory.

use ferry_auth::{Authenticator, Credentials, Identity, ListenerAuth, Method, Verdict};
use ferry_mqtt::ReasonCode;
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

impl Authentication {
    /// Who may connect from now on; connections already in are not
    /// re-examined.
    pub(crate) fn set(&self, authenticator: Authenticator) {
        *self.authenticator.write() = Arc::new(authenticator);
    }

    pub(crate) fn has_password_user(&self, user: &str) -> bool {
        self.authenticator.read().has_password_user(user)
    }

    /// The method that judges these credentials, for the count of a refusal.
    pub(crate) fn method(&self, policy: ListenerAuth, credentials: &Credentials<'_>) -> Method {
        self.authenticator.read().method(&policy, credentials)
    }

    /// The verdict on a CONNECT's credentials, on a listener with `policy`.
    pub(crate) async fn verdict(
        &self,
        policy: ListenerAuth,
        credentials: Credentials<'_>,
    ) -> Verdict {
        let authenticator = self.authenticator.read().clone();
        if !authenticator.hashes(&policy, &credentials) {
            return authenticator.check(&policy, &credentials);
        }
        // Boxed: its state (a semaphore wait, the blocking task's handle,
        // the credentials) would otherwise widen the accept future of every
        // connection, password or not.
        Box::pin(self.check_password(authenticator, policy, credentials)).await
    }

    async fn check_password(
        &self,
        authenticator: Arc<Authenticator>,
        policy: ListenerAuth,
        credentials: Credentials<'_>,
    ) -> Verdict {
        let Ok(_permit) = self.hashing.acquire().await else {
            return Verdict::NotAuthorized;
        };
        let peer = credentials.peer;
        let username = credentials.username.map(str::to_owned);
        let password = credentials.password.map(<[u8]>::to_vec);
        let check = move || {
            let credentials = Credentials {
                peer,
                username: username.as_deref(),
                password: password.as_deref(),
                certificate: None,
            };
            authenticator.check(&policy, &credentials)
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
