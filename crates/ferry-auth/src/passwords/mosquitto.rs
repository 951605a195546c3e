//! Hashes made by Mosquitto's `mosquitto_passwd`, so that a Mosquitto
//! password file works in Ferry as it is:
//!
//! - `$7$ITERATIONS$SALT$HASH`: PBKDF2 with HMAC-SHA-512, Mosquitto 2's
//!   default;
//! - `$6$SALT$HASH`: one SHA-512 of the password then the salt, older
//!   files' (and `mosquitto_passwd -H sha512`'s).
//!
//! Salt and hash are in standard base64, the hash 64 bytes. Ferry checks
//! them and never makes them: `ferry passwd` writes argon2id, so a user
//! whose password it sets moves to the stronger hash. (Mosquitto 2.1's own
//! argon2id hashes are PHC strings, which Ferry reads anyway.)

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::{digest, pbkdf2};
use std::num::NonZeroU32;
use subtle::ConstantTimeEq;

/// Most PBKDF2 iterations accepted. Mosquitto writes 101 (2.0) or 1,000
/// (2.1); a check costs about a microsecond per iteration, so a file
/// asking for more would let every CONNECT with a password take over a
/// second of a core.
const MAX_ITERATIONS: u32 = 1_000_000;

/// SHA-512's output, which both formats store.
const HASH_BYTES: usize = 64;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum MosquittoHash {
    Sha512 { salt: Vec<u8>, hash: Vec<u8> },
    Pbkdf2Sha512 { iterations: NonZeroU32, salt: Vec<u8>, hash: Vec<u8> },
}

impl MosquittoHash {
    /// `None` when `text` is in neither of Mosquitto's formats; an error
    /// (that does not repeat the hash) when it is, but broken.
    pub(super) fn parse(text: &str) -> Option<Result<MosquittoHash, &'static str>> {
        let rest = text.strip_prefix("$6$").or_else(|| text.strip_prefix("$7$"))?;
        let pbkdf2 = text.starts_with("$7$");
        Some(if pbkdf2 { parse_pbkdf2(rest) } else { parse_sha512(rest) })
    }

    pub(super) fn matches(&self, password: &[u8]) -> bool {
        match self {
            MosquittoHash::Sha512 { salt, hash } => {
                let mut context = digest::Context::new(&digest::SHA512);
                context.update(password);
                context.update(salt);
                bool::from(context.finish().as_ref().ct_eq(hash))
            }
            MosquittoHash::Pbkdf2Sha512 { iterations, salt, hash } => {
                pbkdf2::verify(pbkdf2::PBKDF2_HMAC_SHA512, *iterations, salt, password, hash)
                    .is_ok()
            }
        }
    }
}

fn parse_sha512(rest: &str) -> Result<MosquittoHash, &'static str> {
    let (salt, hash) = rest.split_once('$').ok_or("a Mosquitto SHA-512 hash without its salt")?;
    let (salt, hash) = salt_and_hash(salt, hash)?;
    Ok(MosquittoHash::Sha512 { salt, hash })
}

fn parse_pbkdf2(rest: &str) -> Result<MosquittoHash, &'static str> {
    let mut fields = rest.splitn(3, '$');
    let (Some(iterations), Some(salt), Some(hash)) = (fields.next(), fields.next(), fields.next())
    else {
        return Err("a Mosquitto PBKDF2 hash needs iterations, salt and hash");
    };
    let iterations = iterations
        .parse::<u32>()
        .ok()
        .and_then(NonZeroU32::new)
        .ok_or("a Mosquitto PBKDF2 hash's iterations are not a positive number")?;
    if iterations.get() > MAX_ITERATIONS {
        return Err("a Mosquitto PBKDF2 hash with more than 1,000,000 iterations");
    }
    let (salt, hash) = salt_and_hash(salt, hash)?;
    Ok(MosquittoHash::Pbkdf2Sha512 { iterations, salt, hash })
}

fn salt_and_hash(salt: &str, hash: &str) -> Result<(Vec<u8>, Vec<u8>), &'static str> {
    let salt = STANDARD.decode(salt).map_err(|_| "a Mosquitto hash's salt is not base64")?;
    let hash = STANDARD.decode(hash).map_err(|_| "a Mosquitto hash is not base64")?;
    if salt.is_empty() || hash.len() != HASH_BYTES {
        return Err("a Mosquitto hash needs a salt and 64 bytes of hash");
    }
    Ok((salt, hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    /// What `mosquitto_passwd` would write for `password`, made here with
    /// ring's own derivation: the parser and the check must agree with it.
    fn pbkdf2_line(password: &[u8], iterations: u32, salt: &[u8]) -> String {
        let mut hash = [0u8; HASH_BYTES];
        let rounds = NonZeroU32::new(iterations).unwrap();
        pbkdf2::derive(pbkdf2::PBKDF2_HMAC_SHA512, rounds, salt, password, &mut hash);
        format!("$7${iterations}${}${}", b64(salt), b64(&hash))
    }

    #[test]
    fn both_formats_check_the_password_they_were_made_from() {
        let pbkdf2 =
            MosquittoHash::parse(&pbkdf2_line(b"secret", 101, b"salt-bytes-12")).unwrap().unwrap();
        assert!(pbkdf2.matches(b"secret"));
        assert!(!pbkdf2.matches(b"Secret"));

        let salt = b"twelve bytes";
        let hash = digest::digest(&digest::SHA512, &[&b"secret"[..], salt].concat());
        let sha512 = MosquittoHash::parse(&format!("$6${}${}", b64(salt), b64(hash.as_ref())))
            .unwrap()
            .unwrap();
        assert!(sha512.matches(b"secret"));
        assert!(!sha512.matches(b"secret "));
    }

    #[test]
    fn other_formats_are_not_mosquittos_and_broken_ones_say_why() {
        assert_eq!(MosquittoHash::parse("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"), None);
        assert_eq!(MosquittoHash::parse("plain"), None);
        let hash = b64(&[7; HASH_BYTES]);
        for (text, says) in [
            ("$6$nosalt".to_string(), "without its salt"),
            (format!("$6$!!$${hash}"), "salt is not base64"),
            (format!("$6$c2FsdA==${}", b64(&[7; 32])), "64 bytes"),
            (format!("$7$c2FsdA==${hash}"), "iterations, salt and hash"),
            (format!("$7$0$c2FsdA==${hash}"), "positive number"),
            (format!("$7$1000001$c2FsdA==${hash}"), "1,000,000"),
        ] {
            let error = MosquittoHash::parse(&text).unwrap().unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
