//! The broker's side of authentication: which `Authenticator` applies
//! (replaceable while running, for reloads), and running its checks so that
//! password hashing neither blocks a connection thread nor, under a flood
//! of CONNECTs, takes more than a few cores and their memory.

use crate::broker::Broker;
use ferry_auth::{Authenticator, Verdict};
use ferry_mqtt::{Connect, ReasonCode};
use parking_lot::RwLock;
use std::net::SocketAddr;
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

    /// The verdict on a CONNECT's credentials from `peer`.
    pub(crate) async fn authenticate(&self, peer: SocketAddr, connect: &Connect) -> Verdict {
        let authenticator = self.authentication.authenticator.read().clone();
        let username = connect.username.as_ref().map(|name| name.as_str());
        if !authenticator.hashes(username) {
            return authenticator.check(peer.ip(), username, None);
        }
        // Boxed: its state (a semaphore wait, the blocking task's handle,
        // the credentials) would otherwise widen the accept future of every
        // connection, password or not.
        Box::pin(self.check_password(authenticator, peer, connect)).await
    }

    async fn check_password(
        &self,
        authenticator: Arc<Authenticator>,
        peer: SocketAddr,
        connect: &Connect,
    ) -> Verdict {
        let Ok(_permit) = self.authentication.hashing.acquire().await else {
            return Verdict::NotAuthorized;
        };
        let (username, password) = (connect.username.clone(), connect.password.clone());
        let check = move || {
            let username = username.as_ref().map(|name| name.as_str());
            authenticator.check(peer.ip(), username, password.as_deref())
        };
        // A check that panicked let nobody in.
        tokio::task::spawn_blocking(check).await.unwrap_or(Verdict::NotAuthorized)
    }
}

/// The CONNACK reason refusing a verdict, with the log's explanation.
pub(crate) fn refusal(verdict: Verdict) -> Option<(ReasonCode, &'static str)> {
    match verdict {
        Verdict::Accepted => None,
        Verdict::BadCredentials => {
            Some((ReasonCode::BadUserNameOrPassword, "bad user name or password"))
        }
        Verdict::NotAuthorized => {
            Some((ReasonCode::NotAuthorized, "no user name, and anonymous clients are not allowed"))
        }
        Verdict::TooManyFailures => Some((
            ReasonCode::ConnectionRateExceeded,
            "too many failed logins from this address lately; credentials not checked",
        )),
    }
}
