//! Where a connection came from: its peer, its listener, the identity in
//! its certificate, and its place in the connection limits.

use crate::admission::Admission;
use crate::listener::Listener;
use crate::tls::IdentityUse;
use ferry_auth::{Credentials, Identity, Principal};
use ferry_mqtt::Connect;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where a connection came from (what authentication looks at) and its
/// place in the limits. Boxed, so that it costs an idle connection's task
/// one pointer.
pub(crate) struct Origin {
    pub peer: SocketAddr,
    pub listener: Arc<Listener>,
    /// The identity in the client's verified certificate (mutual TLS).
    pub certificate: Option<Arc<str>>,
    /// Held, not read: its drop gives the place back.
    pub _admission: Admission,
}

impl Origin {
    /// What authentication looks at: the CONNECT's credentials, and where
    /// they came from.
    pub(crate) fn credentials<'a>(&'a self, connect: &'a Connect) -> Credentials<'a> {
        Credentials {
            peer: self.peer.ip(),
            username: connect.username.as_ref().map(|name| name.as_str()),
            password: connect.password.as_deref(),
            certificate: self.certificate.as_deref(),
        }
    }

    /// Who the client is for ACLs. The client id is left empty when the
    /// broker is to assign one.
    pub(crate) fn principal(
        &self,
        connect: &Connect,
        identity: Identity,
    ) -> Result<Principal, &'static str> {
        let mut client_id: Arc<str> = connect.client_id.as_str().into();
        let binds_client_id = self
            .listener
            .tls
            .as_ref()
            .is_some_and(|tls| tls.identity_use() == IdentityUse::UsernameAndClientId);
        if let (true, Some(certificate)) = (binds_client_id, &self.certificate) {
            if !connect.client_id.is_empty() && connect.client_id.as_str() != &**certificate {
                return Err("the client id is not the certificate's identity");
            }
            client_id = certificate.clone();
        }
        Ok(Principal {
            client_id,
            username: identity.username,
            certificate: self.certificate.clone(),
            groups: identity.groups,
        })
    }
}
