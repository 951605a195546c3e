//! Who a client is and what it may do: the password file that
//! `ferry passwd` writes (`passwords`) and the check of a CONNECT's
//! credentials against it (`authenticator`). JWT, certificate identities
//! and ACLs (issue 5) join them here, so that the broker asks one crate
//! both questions and knows nothing of how they are answered.

pub mod authenticator;
pub mod passwords;

pub use authenticator::{Authenticator, Verdict};
pub use passwords::{PasswordError, PasswordFile};
