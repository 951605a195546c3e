//! Who a client is and what it may do. Today: the password file that
//! `ferry passwd` writes (`passwords`). JWT, certificate identities and ACLs
//! (issue 5) join it here, so that the broker asks one crate both
//! questions and knows nothing of how they are answered.

pub mod passwords;

pub use passwords::{PasswordError, PasswordFile};
