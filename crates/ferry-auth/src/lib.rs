//! Who a client is and what it may do: the password file that
//! `ferry passwd` writes (`passwords`) and the check of a CONNECT's
//! credentials against it (`authenticator`). JWT, certificate identities
//! and ACLs (issue 5) join them here, so that the broker asks one crate
//! both questions and knows nothing of how they are answered.

pub mod acl;
pub mod authenticator;
pub mod jwt;
pub mod passwords;
pub mod principal;

pub use acl::{Acl, AclError, SubscribeVerdict};
pub use authenticator::{Authenticator, Credentials, Identity, ListenerAuth, Method, Verdict};
pub use jwt::{JwtConfig, JwtError, JwtRejection, JwtVerifier, VerifiedToken};
pub use passwords::{PasswordError, PasswordFile};
pub use principal::Principal;
