//! `Secret`: a password or token from the configuration, which `Debug`
//! (and so every log line and error that prints a configuration) shows as
//! `"***"`.

use serde::Deserialize;
use std::fmt;

#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret given other than in the configuration file (a password in
    /// a twin connection's uri).
    pub fn new(secret: String) -> Secret {
        Secret(secret)
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("\"***\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let secret: Secret = serde_json::from_str("\"hunter2\"").unwrap();
        assert_eq!(format!("{secret:?}"), "\"***\"");
        assert_eq!(secret.expose(), "hunter2");
    }
}
