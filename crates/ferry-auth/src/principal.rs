//! Who a connected client is, once authentication has decided: the facts
//! ACL rules are written against.

use std::sync::Arc;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principal {
    pub client_id: Arc<str>,
    /// The CONNECT's user name, or the user a JWT or a certificate named.
    pub username: Option<Arc<str>>,
    /// The identity read from the client's certificate (its CN or a SAN),
    /// when it presented one on a mutual-TLS listener.
    pub certificate: Option<Arc<str>>,
    /// Groups the client belongs to: from the ACL file's `[groups]` and
    /// from a JWT's groups claim.
    pub groups: Vec<Arc<str>>,
}
