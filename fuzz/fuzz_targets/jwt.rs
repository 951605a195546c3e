//! Checks tokens with `JwtVerifier` and `JwtVerifier::looks_like_token`,
//! two ways per input:
//! - the input itself, as the MQTT password a client could send: random
//!   bytes mostly fail on the signature, so this covers splitting, base64,
//!   the header and the key choice;
//! - a token the target signs with the verifier's own HS256 secret, its
//!   header the input's bytes before the first NUL and its payload those
//!   after (no NUL: a fixed HS256 header, and the whole input as payload),
//!   so that the claims checks run on fuzzed JSON.
//!
//! Nothing may panic, and a token `verify` accepts must look like a token.
#![no_main]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ferry_auth::{JwtConfig, JwtVerifier};
use jsonwebtoken::{Algorithm, EncodingKey};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// At least `ferry_auth::jwt::MIN_SECRET_BYTES`.
const SECRET: &[u8] = b"ferry-fuzz-hs256-secret-0123456789abcdef";

const DEFAULT_HEADER: &[u8] = br#"{"alg":"HS256","typ":"JWT"}"#;

/// Clocks: the epoch, a plausible now (2023-11-14), and the end of time.
const NOWS: [u64; 3] = [0, 1_700_000_000, u64::MAX];

/// A verifier with the defaults, and one that also wants an audience and
/// issuer and reads other claims.
fn verifiers() -> &'static [JwtVerifier; 2] {
    static VERIFIERS: OnceLock<[JwtVerifier; 2]> = OnceLock::new();
    VERIFIERS.get_or_init(|| {
        let path =
            std::env::temp_dir().join(format!("ferry-fuzz-jwt-{}.secret", std::process::id()));
        // A trailing newline, as `echo` leaves, which loading trims.
        std::fs::write(&path, [SECRET, b"\n"].concat()).expect("write the secret file");
        let plain = JwtConfig { secret_file: Some(path.clone()), ..JwtConfig::default() };
        let strict = JwtConfig {
            secret_file: Some(path.clone()),
            audience: Some("ferry".into()),
            issuer: Some("https://issuer.example".into()),
            username_claim: "preferred_username".into(),
            groups_claim: "roles".into(),
            leeway_secs: 0,
            ..JwtConfig::default()
        };
        let verifiers = [
            JwtVerifier::load(&plain).expect("load the plain verifier"),
            JwtVerifier::load(&strict).expect("load the strict verifier"),
        ];
        // `verify` reads no files: the keys are in memory now.
        let _ = std::fs::remove_file(&path);
        verifiers
    })
}

fn check(token: &[u8]) {
    let looks = JwtVerifier::looks_like_token(token);
    for verifier in verifiers() {
        for now in NOWS {
            if let Ok(verified) = verifier.verify(token, now) {
                assert!(looks, "verify accepted what looks_like_token refuses: {verified:?}");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);

    let (header, payload) = match data.iter().position(|&byte| byte == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (DEFAULT_HEADER, data),
    };
    let signed = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
    let key = EncodingKey::from_secret(SECRET);
    let signature =
        jsonwebtoken::crypto::sign(signed.as_bytes(), &key, Algorithm::HS256).expect("HMAC");
    check(format!("{signed}.{signature}").as_bytes());
});
