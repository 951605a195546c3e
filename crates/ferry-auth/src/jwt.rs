//! A JWT as the MQTT password: a client that holds a token from an
//! identity provider connects with it in the CONNECT password field, and
//! Ferry verifies it against keys from its configuration, without calling
//! anyone.
//!
//! The algorithm a token is checked with comes from the key, never from
//! the token: each key has exactly one (HS256 for a shared secret, RS256
//! for an RSA key, ES256 for a P-256 key), and a token whose header names
//! another is rejected. Trusting the header is the classic JWT hole: a
//! token saying HS256, signed with the bytes of a published RSA public key
//! as the HMAC secret, would verify against that "secret".
//!
//! Which keys are tried: when the token's `kid` names a key (from the JWKS
//! file), only that one; when it names none, the keys that have no `kid`
//! (the secret and the PEM files), since an issuer may stamp a `kid` on
//! every token whatever the verifier knows; a token without `kid` is tried
//! against every key of its algorithm. Each try is one signature check,
//! microseconds for HS256 and tens of them for RS256 and ES256, which is
//! why the keys are few (`MAX_KEYS`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::{Map, Value};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use x509_parser::oid_registry::OID_EC_P256;
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;
use x509_parser::public_key::{PublicKey, RSAPublicKey};
use x509_parser::x509::SubjectPublicKeyInfo;

/// Tokens longer than this are malformed before any parsing. The password
/// field can hold 64 KiB, and base64, JSON and the signature check are work
/// whoever connects makes us do; real tokens are well under 2 KiB, and
/// 8 KiB leaves room for a long list of groups.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Key files larger than this are refused unread: a JWKS of sixteen
/// RSA-4096 keys is about 15 KiB, so a larger file is a wrong path (a log,
/// a device) that would otherwise be read whole into memory.
pub const MAX_KEY_FILE_BYTES: usize = 1024 * 1024;

/// Keys at most, all sources together: a token without `kid` is tried
/// against every key of its algorithm, so this bounds the signature checks
/// one CONNECT can cost. Identity providers publish two or three at a time
/// (the current one and the next, for rotation).
pub const MAX_KEYS: usize = 16;

/// The shortest HS256 secret: RFC 7518 §3.2 asks for at least the hash's
/// 256 bits, because anyone who captures one token can guess the secret
/// offline, as fast as they can compute HMACs.
pub const MIN_SECRET_BYTES: usize = 32;

/// The most clock skew `leeway_secs` may allow. Clocks kept by NTP differ
/// by well under a second; minutes of leeway make `exp` a suggestion.
pub const MAX_LEEWAY_SECS: u64 = 300;

/// `[auth.jwt]` in ferry.toml: where the keys are and what a token must say.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// HS256 shared secret, read from a file (its bytes, trailing newline
    /// trimmed). Never logged.
    pub secret_file: Option<PathBuf>,
    /// PEM public keys (RSA for RS256, EC P-256 for ES256), one key per file.
    pub public_key_files: Vec<PathBuf>,
    /// A JWKS document (RFC 7517) on disk; keys chosen by the token's `kid`.
    pub jwks_file: Option<PathBuf>,
    /// When set, `aud` must contain it. Set it whenever the issuer makes
    /// tokens for other services too: unset, a token made for one of them
    /// is accepted here.
    pub audience: Option<String>,
    /// When set, `iss` must equal it.
    pub issuer: Option<String>,
    /// Claim that names the user (default "sub").
    pub username_claim: String,
    /// Claim holding the client's groups, an array of strings or one string
    /// (default "groups").
    pub groups_claim: String,
    /// Clock skew allowed on exp/nbf, seconds (default 30, at most
    /// `MAX_LEEWAY_SECS`).
    pub leeway_secs: u64,
}

impl Default for JwtConfig {
    fn default() -> JwtConfig {
        JwtConfig {
            secret_file: None,
            public_key_files: Vec::new(),
            jwks_file: None,
            audience: None,
            issuer: None,
            username_claim: "sub".to_owned(),
            groups_claim: "groups".to_owned(),
            leeway_secs: 30,
        }
    }
}

/// What is wrong with `[auth.jwt]` or a file it names. Messages name the
/// file and the fault, never key material.
#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("[auth.jwt] names no key: set secret_file, public_key_files or jwks_file")]
    NoKeySource,
    #[error("[auth.jwt] leeway_secs = {0}: at most {max}, or `exp` means little", max = MAX_LEEWAY_SECS)]
    LeewayTooLong(u64),
    #[error(
        "[auth.jwt] names {0} keys: at most {max}, each a signature check for a token without `kid`",
        max = MAX_KEYS
    )]
    TooManyKeys(usize),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// Why a token was turned away. Short, for logs, and free of the token's
/// content: the token is a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JwtRejection {
    #[error("malformed token")]
    Malformed,
    #[error("no key for the token's kid")]
    UnknownKey,
    #[error("bad signature")]
    BadSignature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("token for another audience")]
    WrongAudience,
    #[error("token from another issuer")]
    WrongIssuer,
    #[error("token lacks a required claim")]
    MissingClaim,
    #[error("token's algorithm is not its key's")]
    WrongAlgorithm,
}

/// What a verified token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// The username claim, when the token has one.
    pub username: Option<Arc<str>>,
    pub groups: Vec<Arc<str>>,
    /// The token's `exp`, seconds since the Unix epoch (leeway not added).
    pub expires_at: u64,
}

/// The keys and rules of `[auth.jwt]`, loaded once; `verify` reads no files.
///
/// Its `Debug` shows each key's algorithm, `kid` and file, never the key
/// (`Key` writes its own `Debug` for that).
#[derive(Debug)]
pub struct JwtVerifier {
    keys: Vec<Key>,
    audience: Option<String>,
    issuer: Option<String>,
    username_claim: String,
    groups_claim: String,
    leeway_secs: u64,
}

struct Key {
    /// The only algorithm this key checks, decided by its type when loaded.
    algorithm: Algorithm,
    /// Set for JWKS keys that have one; the secret and PEM files have none.
    kid: Option<String>,
    /// The file it came from, to tell keys apart in `Debug`.
    file: PathBuf,
    decoding: DecodingKey,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("algorithm", &self.algorithm)
            .field("kid", &self.kid)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// Reads every key file `config` names and checks the keys are ones
    /// `verify` can use, so that a wrong file fails at startup rather than
    /// as every client's bad signature.
    pub fn load(config: &JwtConfig) -> Result<JwtVerifier, JwtError> {
        if config.secret_file.is_none()
            && config.public_key_files.is_empty()
            && config.jwks_file.is_none()
        {
            return Err(JwtError::NoKeySource);
        }
        if config.leeway_secs > MAX_LEEWAY_SECS {
            return Err(JwtError::LeewayTooLong(config.leeway_secs));
        }
        let mut keys = Vec::new();
        if let Some(path) = &config.secret_file {
            keys.push(load_secret(path)?);
        }
        for path in &config.public_key_files {
            keys.push(load_public_key(path)?);
        }
        if let Some(path) = &config.jwks_file {
            keys.extend(load_jwks(path)?);
        }
        if keys.len() > MAX_KEYS {
            return Err(JwtError::TooManyKeys(keys.len()));
        }
        Ok(JwtVerifier {
            keys,
            audience: config.audience.clone(),
            issuer: config.issuer.clone(),
            username_claim: config.username_claim.clone(),
            groups_claim: config.groups_claim.clone(),
            leeway_secs: config.leeway_secs,
        })
    }

    /// Cheap check the broker uses to decide whether a password looks like
    /// a JWT at all: three base64url segments separated by dots, the first
    /// decoding to a JSON object with a string `alg`. Only the header is
    /// decoded; the MQTT password bounds it to 64 KiB.
    pub fn looks_like_token(password: &[u8]) -> bool {
        split_token(password).is_some_and(|parts| decode_header(parts.header).is_some())
    }

    /// The last second a token that expires at `expires_at` is accepted:
    /// its `exp` and the leeway.
    pub fn valid_until(&self, expires_at: u64) -> u64 {
        expires_at.saturating_add(self.leeway_secs)
    }

    /// Checks `token`'s signature, then its claims at `now_unix_secs`. No
    /// claim is looked at before the signature holds.
    pub fn verify(&self, token: &[u8], now_unix_secs: u64) -> Result<VerifiedToken, JwtRejection> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwtRejection::Malformed);
        }
        let parts = split_token(token).ok_or(JwtRejection::Malformed)?;
        let header = decode_header(parts.header).ok_or(JwtRejection::Malformed)?;
        if header.crit {
            // Verified without the extension it names, it could mean
            // something other than what its signer meant.
            return Err(JwtRejection::Malformed);
        }
        let algorithm = supported_algorithm(&header.alg).ok_or(JwtRejection::WrongAlgorithm)?;
        self.check_signature(header.kid.as_deref(), algorithm, &parts)?;
        let claims =
            decode_json::<Map<String, Value>>(parts.payload).ok_or(JwtRejection::Malformed)?;
        self.check_claims(&claims, now_unix_secs)
    }

    fn check_signature(
        &self,
        kid: Option<&str>,
        algorithm: Algorithm,
        parts: &TokenParts<'_>,
    ) -> Result<(), JwtRejection> {
        let named = kid.filter(|kid| self.keys.iter().any(|key| key.kid.as_deref() == Some(*kid)));
        let mut candidates = self
            .keys
            .iter()
            .filter(|key| match (named, kid) {
                (Some(named), _) => key.kid.as_deref() == Some(named),
                (None, Some(_)) => key.kid.is_none(),
                (None, None) => true,
            })
            .peekable();
        if candidates.peek().is_none() {
            return Err(JwtRejection::UnknownKey);
        }
        let mut of_algorithm = candidates.filter(|key| key.algorithm == algorithm).peekable();
        if of_algorithm.peek().is_none() {
            return Err(JwtRejection::WrongAlgorithm);
        }
        let signature =
            std::str::from_utf8(parts.signature).map_err(|_| JwtRejection::Malformed)?;
        for key in of_algorithm {
            // The key's algorithm, not the header's: they are equal here,
            // but this is the one that must not come from the token.
            match jsonwebtoken::crypto::verify(
                signature,
                parts.signed,
                &key.decoding,
                key.algorithm,
            ) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // It fails only on a signature that is not base64url.
                Err(_) => return Err(JwtRejection::Malformed),
            }
        }
        Err(JwtRejection::BadSignature)
    }

    fn check_claims(
        &self,
        claims: &Map<String, Value>,
        now: u64,
    ) -> Result<VerifiedToken, JwtRejection> {
        let exp = claims.get("exp").ok_or(JwtRejection::MissingClaim)?;
        let exp = numeric_date(exp).ok_or(JwtRejection::Malformed)?;
        // RFC 7519 §4.1.4: invalid "on or after" exp.
        if now >= exp.saturating_add(self.leeway_secs) {
            return Err(JwtRejection::Expired);
        }
        if let Some(nbf) = claims.get("nbf") {
            let nbf = numeric_date(nbf).ok_or(JwtRejection::Malformed)?;
            if now.saturating_add(self.leeway_secs) < nbf {
                return Err(JwtRejection::NotYetValid);
            }
        }
        if let Some(issuer) = &self.issuer {
            match claims.get("iss") {
                None => return Err(JwtRejection::MissingClaim),
                Some(iss) if iss.as_str() != Some(issuer.as_str()) => {
                    return Err(JwtRejection::WrongIssuer)
                }
                Some(_) => {}
            }
        }
        if let Some(audience) = &self.audience {
            let names_us = |aud: &Value| aud.as_str() == Some(audience.as_str());
            match claims.get("aud") {
                None => return Err(JwtRejection::MissingClaim),
                Some(Value::Array(auds)) if auds.iter().any(names_us) => {}
                Some(aud) if names_us(aud) => {}
                Some(_) => return Err(JwtRejection::WrongAudience),
            }
        }
        let username = match claims.get(&self.username_claim) {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(Arc::from(name.as_str())),
            Some(_) => return Err(JwtRejection::Malformed),
        };
        // Their number is bounded by the token's size.
        let groups = match claims.get(&self.groups_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(group)) => vec![Arc::from(group.as_str())],
            Some(Value::Array(groups)) => groups
                .iter()
                .map(|group| group.as_str().map(Arc::from).ok_or(JwtRejection::Malformed))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(JwtRejection::Malformed),
        };
        Ok(VerifiedToken { username, groups, expires_at: exp })
    }
}

/// The three segments of a compact JWS, still base64url, and the bytes the
/// signature covers (`header.payload`).
struct TokenParts<'a> {
    header: &'a [u8],
    payload: &'a [u8],
    signature: &'a [u8],
    signed: &'a [u8],
}

fn split_token(token: &[u8]) -> Option<TokenParts<'_>> {
    // The signature is decoded only by `verify`, so its alphabet is checked
    // here for `looks_like_token`.
    if !token.iter().all(|&byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte)) {
        return None;
    }
    let mut segments = token.split(|&byte| byte == b'.');
    let (header, payload, signature) = (segments.next()?, segments.next()?, segments.next()?);
    if segments.next().is_some() || header.is_empty() || payload.is_empty() {
        return None;
    }
    let signed = &token[..header.len() + 1 + payload.len()];
    Some(TokenParts { header, payload, signature, signed })
}

/// The header fields Ferry reads; others are ignored, as RFC 7515 allows.
struct TokenHeader {
    alg: String,
    kid: Option<String>,
    /// Whether it lists extensions a verifier must understand (RFC 7515
    /// §4.1.11); Ferry understands none.
    crit: bool,
}

/// The header, if it is a JSON object with a string `alg` (and a string
/// `kid`, if any). Read as a map, not a derived struct, which would also
/// take a JSON array.
fn decode_header(segment: &[u8]) -> Option<TokenHeader> {
    let mut header = decode_json::<Map<String, Value>>(segment)?;
    let Value::String(alg) = header.remove("alg")? else { return None };
    let kid = match header.remove("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid),
        Some(_) => return None,
    };
    Some(TokenHeader { alg, kid, crit: header.contains_key("crit") })
}

fn decode_json<T: serde::de::DeserializeOwned>(segment: &[u8]) -> Option<T> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(segment).ok()?).ok()
}

fn supported_algorithm(name: &str) -> Option<Algorithm> {
    match name {
        "HS256" => Some(Algorithm::HS256),
        "RS256" => Some(Algorithm::RS256),
        "ES256" => Some(Algorithm::ES256),
        _ => None,
    }
}

/// A NumericDate (RFC 7519 §2): seconds, possibly fractional. A fraction is
/// dropped, which moves `exp` earlier and `nbf` by less than a second.
fn numeric_date(value: &Value) -> Option<u64> {
    if let Some(seconds) = value.as_u64() {
        return Some(seconds);
    }
    let seconds = value.as_f64()?;
    (seconds.is_finite() && seconds >= 0.0 && seconds < u64::MAX as f64).then_some(seconds as u64)
}

fn invalid(path: &Path, message: impl Into<String>) -> JwtError {
    JwtError::Invalid { path: path.to_owned(), message: message.into() }
}

fn read_key_file(path: &Path) -> Result<Vec<u8>, JwtError> {
    let io = |source| JwtError::Io { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    // `take`, not the file's length: a device or a growing file has none.
    file.take(MAX_KEY_FILE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() > MAX_KEY_FILE_BYTES {
        return Err(invalid(path, "larger than 1 MiB, so not a key file"));
    }
    Ok(bytes)
}

fn load_secret(path: &Path) -> Result<Key, JwtError> {
    let mut secret = read_key_file(path)?;
    // Editors and `echo` end files with a newline the issuer's copy of the
    // secret does not have.
    if secret.last() == Some(&b'\n') {
        secret.pop();
        if secret.last() == Some(&b'\r') {
            secret.pop();
        }
    }
    check_secret(&secret).map_err(|message| invalid(path, message))?;
    let decoding = DecodingKey::from_secret(&secret);
    Ok(Key { algorithm: Algorithm::HS256, kid: None, file: path.to_owned(), decoding })
}

fn check_secret(secret: &[u8]) -> Result<(), String> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "an HS256 secret shorter than {MIN_SECRET_BYTES} bytes, which one captured token \
             lets anyone guess offline (RFC 7518 §3.2)"
        ));
    }
    Ok(())
}

fn load_public_key(path: &Path) -> Result<Key, JwtError> {
    let bytes = read_key_file(path)?;
    let pem = read_pem(&bytes).map_err(|message| invalid(path, message))?;
    let (algorithm, decoding) = match pem.label.as_str() {
        "PUBLIC KEY" => public_key_info(&pem.contents),
        "RSA PUBLIC KEY" => RSAPublicKey::from_der(&pem.contents)
            .map_err(|_| "not a well-formed RSA public key".to_owned())
            .and_then(|(_, key)| check_rsa_modulus(key.modulus))
            .map(|()| (Algorithm::RS256, DecodingKey::from_rsa_der(&pem.contents))),
        "CERTIFICATE" => Err("a certificate: give its public key \
                              (`openssl x509 -in cert.pem -pubkey -noout`)"
            .to_owned()),
        label if label.ends_with("PRIVATE KEY") => Err("a private key, which the broker must \
                                                        not hold: give the public key \
                                                        (`openssl pkey -in key.pem -pubout`)"
            .to_owned()),
        label => Err(format!("a PEM {label:?}, not a public key")),
    }
    .map_err(|message| invalid(path, message))?;
    Ok(Key { algorithm, kid: None, file: path.to_owned(), decoding })
}

/// The one PEM block in `bytes`.
fn read_pem(bytes: &[u8]) -> Result<Pem, String> {
    let mut blocks = Pem::iter_from_buffer(bytes);
    let pem = blocks
        .next()
        .ok_or("not a PEM file (no `-----BEGIN` line)")?
        .map_err(|error| format!("not a readable PEM block: {error}"))?;
    if blocks.next().is_some() {
        return Err("more than one PEM block: give one key per file".to_owned());
    }
    Ok(pem)
}

/// A SubjectPublicKeyInfo (RFC 5280 §4.1), what `openssl pkey -pubout`
/// writes. Read here, not left to the signature check, because the wrong
/// key (a P-384 one, a 1024-bit RSA one) would otherwise load fine and
/// fail every token.
fn public_key_info(der: &[u8]) -> Result<(Algorithm, DecodingKey), String> {
    let malformed = || "not a well-formed public key".to_owned();
    let (_, info) = SubjectPublicKeyInfo::from_der(der).map_err(|_| malformed())?;
    match info.parsed().map_err(|_| malformed())? {
        PublicKey::RSA(key) => {
            check_rsa_modulus(key.modulus)?;
            Ok((Algorithm::RS256, DecodingKey::from_rsa_der(&info.subject_public_key.data)))
        }
        PublicKey::EC(point) => {
            let curve = info.algorithm.parameters.as_ref().and_then(|curve| curve.as_oid().ok());
            if curve != Some(OID_EC_P256) {
                return Err("an EC key on a curve other than P-256, which ES256 needs".to_owned());
            }
            // The uncompressed point, 0x04 then x and y, is what ring takes.
            if !matches!(point.data(), [0x04, xy @ ..] if xy.len() == 64) {
                return Err("a P-256 key not in uncompressed form".to_owned());
            }
            Ok((Algorithm::ES256, DecodingKey::from_ec_der(point.data())))
        }
        _ => Err("neither an RSA nor an EC key: Ferry verifies HS256, RS256 and ES256".to_owned()),
    }
}

/// ring verifies RS256 only with keys of 2048 to 8192 bits.
fn check_rsa_modulus(modulus: &[u8]) -> Result<(), String> {
    let start = modulus.iter().position(|&byte| byte != 0).unwrap_or(modulus.len());
    let modulus = &modulus[start..];
    let bits =
        modulus.first().map_or(0, |&first| modulus.len() * 8 - first.leading_zeros() as usize);
    if !(2048..=8192).contains(&bits) {
        return Err(format!("an RSA key of {bits} bits; RS256 verification takes 2048 to 8192"));
    }
    Ok(())
}

/// The keys of a JWK set (RFC 7517 §5). Keys marked `"use": "enc"` are
/// skipped: identity providers publish their encryption keys beside their
/// signing keys, and they sign nothing.
fn load_jwks(path: &Path) -> Result<Vec<Key>, JwtError> {
    let bytes = read_key_file(path)?;
    // The position only: serde_json's other messages can quote a value,
    // and a value here can be a secret.
    let document: Value = serde_json::from_slice(&bytes).map_err(|error| {
        invalid(path, format!("not JSON (line {}, column {})", error.line(), error.column()))
    })?;
    let entries = document
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(path, "not a JWK set: no `keys` array"))?;
    let mut keys: Vec<Key> = Vec::new();
    for (index, jwk) in entries.iter().enumerate() {
        let kid = match jwk.get("kid") {
            None => None,
            Some(Value::String(kid)) => Some(kid.clone()),
            Some(_) => return Err(invalid(path, format!("keys[{index}]: `kid` is not a string"))),
        };
        let name = match &kid {
            Some(kid) => format!("keys[{index}] (kid {kid:?})"),
            None => format!("keys[{index}]"),
        };
        if jwk.get("use").and_then(Value::as_str) == Some("enc") {
            continue;
        }
        let (algorithm, decoding) =
            jwk_key(jwk).map_err(|message| invalid(path, format!("{name}: {message}")))?;
        if kid.is_some() && keys.iter().any(|key| key.kid == kid) {
            return Err(invalid(path, format!("{name}: another key has the same kid")));
        }
        keys.push(Key { algorithm, kid, file: path.to_owned(), decoding });
    }
    if keys.is_empty() {
        return Err(invalid(path, "no signing keys"));
    }
    Ok(keys)
}

fn jwk_key(jwk: &Value) -> Result<(Algorithm, DecodingKey), String> {
    let text = |name: &str| {
        jwk.get(name).and_then(Value::as_str).ok_or_else(|| format!("no `{name}` string"))
    };
    let bytes = |name: &str| {
        URL_SAFE_NO_PAD.decode(text(name)?).map_err(|_| format!("`{name}` is not base64url"))
    };
    let kty = text("kty")?;
    let (algorithm, decoding) = match kty {
        "RSA" => {
            let (modulus, exponent) = (bytes("n")?, bytes("e")?);
            check_rsa_modulus(&modulus)?;
            (Algorithm::RS256, DecodingKey::from_rsa_raw_components(&modulus, &exponent))
        }
        "EC" => {
            let curve = text("crv")?;
            if curve != "P-256" {
                return Err(format!("curve {curve:?}: ES256 needs P-256"));
            }
            if bytes("x")?.len() != 32 || bytes("y")?.len() != 32 {
                return Err("`x` and `y` are not 32 bytes each, as on P-256".to_owned());
            }
            let key = DecodingKey::from_ec_components(text("x")?, text("y")?)
                .map_err(|_| "its components do not make a key")?;
            (Algorithm::ES256, key)
        }
        "oct" => {
            let secret = bytes("k")?;
            check_secret(&secret)?;
            (Algorithm::HS256, DecodingKey::from_secret(&secret))
        }
        kty => {
            return Err(format!(
                "key type {kty:?} is not supported: Ferry verifies HS256, RS256 and ES256"
            ))
        }
    };
    match jwk.get("alg") {
        None => {}
        Some(Value::String(alg)) if supported_algorithm(alg) == Some(algorithm) => {}
        Some(alg) => {
            return Err(format!(
                "`alg` {alg} with a {kty:?} key: Ferry verifies only {algorithm:?} with it"
            ))
        }
    }
    Ok((algorithm, decoding))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const NOW: u64 = 1_700_000_000;
    const SECRET: &str = "a shared secret of more than 32 bytes";

    // Keys made for these tests alone with `openssl genpkey` (RSA 2048,
    // EC P-256, P-384, RSA 1024) and `openssl pkey -pubout`.
    const RSA_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCpPB49wGsaneN/
+RQx72a5yGRANlRw/YMAVdVblN9dSGbQf1V7qawhVbnrXaEgCWsXl89sU+/oESYT
wwLd0XxX92bw/hVHlhlaZh2wkZUfmvQGaJwaYBayc+sU/RJzCIiymp7/+/a3tzQ4
pMzWs8wXVRPW1vg+lMT6mwbodXuXB/Qo/LrCx2JzPMKeV+TQlXDh0d2ZLd+MqSU0
4VzS6mXdAR0n8hhV4hZZgnbz/+UDIPXyTDp+AMvwcVPY+SRalorHVAh3k2BHB0YV
q4qEoZb8/MWnU7elZTnJ9tkAEqPu0f1zYNa7027I4sz9z89DbXyzjqcH5agTgnRQ
0nftXPtBAgMBAAECggEAGUrJUDxKJXu0TONqT74yMZDP3sLf4tUYd3vce6fnq/bO
mtl06prkhUTdGN5w3qtZrHh9QPjYcWvir3BlJMaSmUj5wwmOH5lAp8B8Lm/LhCIx
1yVaMxzqN3hYiVX7JGMBnwO5wJMk/7brII4MqQfM+C24XdLZ3ex49eUmZqZsNpl0
pmxQHSgxIcWBqc/RDe8FKpmpRemuSYSqVjAVCpapv6gODNVviA/NPBAKG7jy2RBs
b8vNgQymxHftLD4DhrvkLuIS2JRuAkZ1XlzQXfDc2djsV5lvbAVGU7fzfuEtGdEu
PPO4I1W4wWz3D99lyDby2Ps2tT8C0ff9gRKzFM5B0wKBgQDnNOyT4PGrVnDAQmBp
Dc2NS87gE+vc/7UdtqsudrOrozO0jKWYRAG0Av+oNJAjMbEullNQtKyJorYJQNDT
+pvcTf0YkOm7bexywLVDOqICbRXxGqUCIvkqdWseMbN6bffrtRRBgrIXC9l0VFZ8
covp5+4G5AfZ2W8+4m3MemxGuwKBgQC7YfHK62Scx8GVC6XcWBL3G3WQ0Hf2/ieC
lvCBsaaSipI6karslAEm/0VrjPODMXhqw0Xka0v6cxbspzUj6MHFJ2FEsurDIriI
etfPRhkRx5ELFYQeN0XTRHAmQqAI8yEHt1+52lj/1d/DM331c4Nprv4c8iXdJtR6
96WhJpxsMwKBgEFDJCBd13mYrbznP5WHyuS+aEfB98rq9vHLNSipYu/o4lhtdvSz
BZQNYKLXK3Rzu2K+Fghq52T2Y9Ha1NdxHvuhm/aKOR+p2JtPoBq4+zAaIJ5s+fTP
cGu2tyTPvKyrS9bhxzTyslhlBN2cTMlV//5ndD3HshuhD5C9k2ari9KvAoGAM/oo
OvRutTqHzRMtD+Dyac8ZHnFlRYMcbJH35tHjdbSweUSc2AD6DNo0ZG/1wEeBsoO2
KHVG3xL7oeuDxxEyZsDUr1y92CESdPE2Wc2E+LSV3DA8tLD6Um8ieMp0X+cpG13X
VNNnapfl+NyYrPQ82Jzs6hSVQjIaMH3vWLNAIpcCgYEAy9E8R8MTw66D9uNWgc6Z
nJqlMkfg/QL/SjO4fPQVGeLH9g5M52+0STxu0HJgW1DKdkIBIoKAEkgl6fLSBx4i
Dg7emRAYBuFWuSou5DMvuyjBJzjpef6f5T/un3SzBMs5dfGVaz0aBam46ybiGrs9
8IoFM+0qn5dmLCPW/XZt1AA=
-----END PRIVATE KEY-----
";
    const RSA_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAqTwePcBrGp3jf/kUMe9m
uchkQDZUcP2DAFXVW5TfXUhm0H9Ve6msIVW5612hIAlrF5fPbFPv6BEmE8MC3dF8
V/dm8P4VR5YZWmYdsJGVH5r0BmicGmAWsnPrFP0ScwiIspqe//v2t7c0OKTM1rPM
F1UT1tb4PpTE+psG6HV7lwf0KPy6wsdiczzCnlfk0JVw4dHdmS3fjKklNOFc0upl
3QEdJ/IYVeIWWYJ28//lAyD18kw6fgDL8HFT2PkkWpaKx1QId5NgRwdGFauKhKGW
/PzFp1O3pWU5yfbZABKj7tH9c2DWu9NuyOLM/c/PQ218s46nB+WoE4J0UNJ37Vz7
QQIDAQAB
-----END PUBLIC KEY-----
";
    /// `RSA_PUBLIC`'s modulus, base64url, as a JWK carries it.
    const RSA_N: &str = "qTwePcBrGp3jf_kUMe9muchkQDZUcP2DAFXVW5TfXUhm0H9Ve6msIVW5612hIAlrF5fPbFPv6BEmE8MC3dF8V_dm8P4VR5YZWmYdsJGVH5r0BmicGmAWsnPrFP0ScwiIspqe__v2t7c0OKTM1rPMF1UT1tb4PpTE-psG6HV7lwf0KPy6wsdiczzCnlfk0JVw4dHdmS3fjKklNOFc0upl3QEdJ_IYVeIWWYJ28__lAyD18kw6fgDL8HFT2PkkWpaKx1QId5NgRwdGFauKhKGW_PzFp1O3pWU5yfbZABKj7tH9c2DWu9NuyOLM_c_PQ218s46nB-WoE4J0UNJ37Vz7QQ";
    const EC1_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaw938p5Mui/pKL4T
F1yU0YdWNLzruMU8aAw4B4SHUpmhRANCAAQuwQY+qxdgdCgkyuV9m5UMkZJelpCj
7qq+p9bhzI9UZ0Dw3s2VC8vFpi4Ed8F2vmOmKBfXW045uH/yfbQM8JvN
-----END PRIVATE KEY-----
";
    const EC1_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAELsEGPqsXYHQoJMrlfZuVDJGSXpaQ
o+6qvqfW4cyPVGdA8N7NlQvLxaYuBHfBdr5jpigX11tOObh/8n20DPCbzQ==
-----END PUBLIC KEY-----
";
    const EC1_XY: (&str, &str) = (
        "LsEGPqsXYHQoJMrlfZuVDJGSXpaQo-6qvqfW4cyPVGc",
        "QPDezZULy8WmLgR3wXa-Y6YoF9dbTjm4f_J9tAzwm80",
    );
    const EC2_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgb9did4Ai78sFa3kv
6RE3OSHYEKImW6tFxQZ5DiSgV6ChRANCAAShmHeCuoGzBbZjW/E8H3065TL84yfM
1mesQc+N+iSi46VVEbyFG6j/FK91kaBQWLk7mmI78LBeB5wZl+ZWaxq8
-----END PRIVATE KEY-----
";
    const EC2_XY: (&str, &str) = (
        "oZh3grqBswW2Y1vxPB99OuUy_OMnzNZnrEHPjfokouM",
        "pVURvIUbqP8Ur3WRoFBYuTuaYjvwsF4HnBmX5lZrGrw",
    );
    const P384_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEQ9OU4BHANanLPfVwElErz2/M351TEE7J
+bok2hQd6clhbY2gcbO4LbGeVtHxVxPHkcVgv0BWVlaBcRTUR0HFQSceDTOEG+HQ
0C4/mFfSi0AIPDkNoWYfPxFBnqBXfPwK
-----END PUBLIC KEY-----
";
    const RSA1024_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQCuI0nHZGOJxD8JusW0bHzc+oqI
1N4oES2S1Q+QVbC03zx1WIFGYJW9XjE55KbgFE2ZYnwvyA9xg7YvWLlvQQz02KAx
jMkxQhF4D9Uu4WiZEWsVB24vfEniQZd5MdZ/WR1BW1dvk5GE+DbvWvVs8lwROpY+
Q0iyA3e1GguwfhzlmQIDAQAB
-----END PUBLIC KEY-----
";

    /// A config and the directory its files are written to.
    struct Setup {
        dir: tempfile::TempDir,
        config: JwtConfig,
    }

    impl Setup {
        fn new() -> Setup {
            Setup { dir: tempfile::tempdir().unwrap(), config: JwtConfig::default() }
        }

        fn file(&self, name: &str, contents: &[u8]) -> PathBuf {
            let path = self.dir.path().join(name);
            std::fs::write(&path, contents).unwrap();
            path
        }

        fn secret(mut self) -> Setup {
            self.config.secret_file = Some(self.file("secret", format!("{SECRET}\n").as_bytes()));
            self
        }

        fn public_key(mut self, name: &str, pem: &str) -> Setup {
            let path = self.file(name, pem.as_bytes());
            self.config.public_key_files.push(path);
            self
        }

        fn jwks(mut self, document: Value) -> Setup {
            self.config.jwks_file = Some(self.file("jwks.json", document.to_string().as_bytes()));
            self
        }

        fn load(&self) -> Result<JwtVerifier, JwtError> {
            JwtVerifier::load(&self.config)
        }

        fn verifier(&self) -> JwtVerifier {
            self.load().unwrap()
        }
    }

    fn sign(algorithm: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
        let mut header = Header::new(algorithm);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    fn hs256(claims: &Value) -> String {
        sign(Algorithm::HS256, None, &EncodingKey::from_secret(SECRET.as_bytes()), claims)
    }

    fn rsa() -> EncodingKey {
        EncodingKey::from_rsa_pem(RSA_PRIVATE.as_bytes()).unwrap()
    }

    fn ec(private: &str) -> EncodingKey {
        EncodingKey::from_ec_pem(private.as_bytes()).unwrap()
    }

    fn claims() -> Value {
        json!({"sub": "sensor-1", "exp": NOW + 600, "groups": ["sensors", "site-a"]})
    }

    fn check(verifier: &JwtVerifier, token: &str) -> Result<VerifiedToken, JwtRejection> {
        verifier.verify(token.as_bytes(), NOW)
    }

    fn names(groups: &[Arc<str>]) -> Vec<&str> {
        groups.iter().map(|group| &**group).collect()
    }

    #[test]
    fn tokens_signed_with_each_kind_of_key_verify() {
        let verifier = Setup::new()
            .secret()
            .public_key("rsa.pem", RSA_PUBLIC)
            .public_key("ec.pem", EC1_PUBLIC)
            .verifier();
        for token in [
            hs256(&claims()),
            sign(Algorithm::RS256, None, &rsa(), &claims()),
            sign(Algorithm::ES256, None, &ec(EC1_PRIVATE), &claims()),
        ] {
            let verified = check(&verifier, &token).unwrap();
            assert_eq!(verified.username.as_deref(), Some("sensor-1"));
            assert_eq!(names(&verified.groups), ["sensors", "site-a"]);
            assert_eq!(verified.expires_at, NOW + 600);
        }
    }

    #[test]
    fn exp_is_required_and_allowed_the_leeway_and_no_more() {
        let verifier = Setup::new().secret().verifier();
        let at = |exp: Value| check(&verifier, &hs256(&json!({"sub": "u", "exp": exp})));
        assert!(at(json!(NOW - 29)).is_ok(), "within the 30 s leeway");
        assert_eq!(at(json!(NOW - 30)), Err(JwtRejection::Expired));
        assert_eq!(at(json!(NOW - 3600)), Err(JwtRejection::Expired));
        assert_eq!(at(json!((NOW + 60) as f64 + 0.5)).unwrap().expires_at, NOW + 60);
        // Accepted up to the same point while connected: exp and the leeway.
        assert_eq!(verifier.valid_until(NOW - 29), NOW + 1);
        assert_eq!(at(json!("tomorrow")), Err(JwtRejection::Malformed));
        assert_eq!(at(json!(-1)), Err(JwtRejection::Malformed));
        assert_eq!(check(&verifier, &hs256(&json!({"sub": "u"}))), Err(JwtRejection::MissingClaim));
    }

    #[test]
    fn nbf_in_the_future_is_not_yet_valid() {
        let verifier = Setup::new().secret().verifier();
        let at = |nbf: u64| check(&verifier, &hs256(&json!({"exp": NOW + 600, "nbf": nbf})));
        assert_eq!(at(NOW + 31), Err(JwtRejection::NotYetValid));
        assert!(at(NOW + 30).is_ok(), "within the leeway");
        assert!(at(NOW - 10).is_ok());
    }

    #[test]
    fn a_wrong_or_tampered_signature_is_refused() {
        let verifier = Setup::new().secret().verifier();
        let other = EncodingKey::from_secret(b"another secret of more than 32 bytes");
        let forged = sign(Algorithm::HS256, None, &other, &claims());
        assert_eq!(check(&verifier, &forged), Err(JwtRejection::BadSignature));

        // Another user's claims under a genuine signature.
        let genuine = hs256(&claims());
        let (_, signature) = genuine.rsplit_once('.').unwrap();
        let altered = hs256(&json!({"sub": "admin", "exp": NOW + 600}));
        let (signed, _) = altered.rsplit_once('.').unwrap();
        let spliced = format!("{signed}.{signature}");
        assert_eq!(check(&verifier, &spliced), Err(JwtRejection::BadSignature));
        let unsigned = format!("{signed}.");
        assert_eq!(check(&verifier, &unsigned), Err(JwtRejection::BadSignature));
    }

    #[test]
    fn audience_and_issuer_are_checked_when_configured() {
        let mut setup = Setup::new().secret();
        setup.config.audience = Some("ferry".into());
        setup.config.issuer = Some("https://id.example".into());
        let verifier = setup.verifier();
        let with = |extra: Value| {
            let mut claims = json!({"exp": NOW + 600, "iss": "https://id.example", "aud": "ferry"});
            for (name, value) in extra.as_object().unwrap() {
                if value.is_null() {
                    claims.as_object_mut().unwrap().remove(name);
                } else {
                    claims[name] = value.clone();
                }
            }
            check(&verifier, &hs256(&claims))
        };
        assert!(with(json!({})).is_ok());
        assert!(with(json!({"aud": ["billing", "ferry"]})).is_ok());
        assert_eq!(with(json!({"aud": "billing"})), Err(JwtRejection::WrongAudience));
        assert_eq!(with(json!({"aud": ["billing"]})), Err(JwtRejection::WrongAudience));
        assert_eq!(with(json!({"aud": null})), Err(JwtRejection::MissingClaim));
        assert_eq!(with(json!({"iss": "https://evil.example"})), Err(JwtRejection::WrongIssuer));
        assert_eq!(with(json!({"iss": ["https://id.example"]})), Err(JwtRejection::WrongIssuer));
        assert_eq!(with(json!({"iss": null})), Err(JwtRejection::MissingClaim));

        // Not configured: not checked.
        let open = Setup::new().secret().verifier();
        let claims = json!({"exp": NOW + 600, "iss": "anyone", "aud": "anything"});
        assert!(check(&open, &hs256(&claims)).is_ok());
    }

    #[test]
    fn the_algorithm_is_the_keys_and_not_the_tokens() {
        // The classic confusion: HS256 with the RSA public key's PEM bytes
        // as the HMAC secret, against a verifier that holds that RSA key.
        let confused = EncodingKey::from_secret(RSA_PUBLIC.as_bytes());
        let token = sign(Algorithm::HS256, None, &confused, &claims());
        let rsa_only = Setup::new().public_key("rsa.pem", RSA_PUBLIC).verifier();
        assert_eq!(check(&rsa_only, &token), Err(JwtRejection::WrongAlgorithm));

        // The same through a JWKS key named by the token's kid.
        let jwks = Setup::new()
            .jwks(json!({"keys": [{"kty": "RSA", "kid": "r1", "n": RSA_N, "e": "AQAB"}]}))
            .verifier();
        let token = sign(Algorithm::HS256, Some("r1"), &confused, &claims());
        assert_eq!(check(&jwks, &token), Err(JwtRejection::WrongAlgorithm));

        // RS256 where only a secret is configured.
        let secret_only = Setup::new().secret().verifier();
        let token = sign(Algorithm::RS256, None, &rsa(), &claims());
        assert_eq!(check(&secret_only, &token), Err(JwtRejection::WrongAlgorithm));

        // Algorithms Ferry never accepts, "none" among them.
        let hs512 =
            sign(Algorithm::HS512, None, &EncodingKey::from_secret(SECRET.as_bytes()), &claims());
        assert_eq!(check(&secret_only, &hs512), Err(JwtRejection::WrongAlgorithm));
        let unsecured = format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(&claims().to_string()));
        assert!(JwtVerifier::looks_like_token(unsecured.as_bytes()));
        assert_eq!(check(&secret_only, &unsecured), Err(JwtRejection::WrongAlgorithm));
    }

    #[test]
    fn a_jwks_key_is_chosen_by_kid() {
        let verifier = Setup::new()
            .jwks(json!({"keys": [
                {"kty": "EC", "crv": "P-256", "kid": "one", "x": EC1_XY.0, "y": EC1_XY.1, "alg": "ES256"},
                {"kty": "EC", "crv": "P-256", "kid": "two", "x": EC2_XY.0, "y": EC2_XY.1, "use": "sig"},
                {"kty": "RSA", "kid": "rsa", "n": RSA_N, "e": "AQAB", "alg": "RS256"},
                {"kty": "RSA", "kid": "encryption", "n": RSA_N, "e": "AQAB", "use": "enc", "alg": "RSA-OAEP"},
            ]}))
            .verifier();
        let es256 = |kid: Option<&str>, private: &str| {
            check(&verifier, &sign(Algorithm::ES256, kid, &ec(private), &claims()))
        };
        assert!(es256(Some("one"), EC1_PRIVATE).is_ok());
        assert!(es256(Some("two"), EC2_PRIVATE).is_ok());
        assert_eq!(es256(Some("one"), EC2_PRIVATE), Err(JwtRejection::BadSignature));
        assert_eq!(es256(Some("three"), EC2_PRIVATE), Err(JwtRejection::UnknownKey));
        assert_eq!(es256(Some("encryption"), EC2_PRIVATE), Err(JwtRejection::UnknownKey));
        assert!(es256(None, EC2_PRIVATE).is_ok(), "without kid, every key of its algorithm");
        assert!(check(&verifier, &sign(Algorithm::RS256, Some("rsa"), &rsa(), &claims())).is_ok());
        assert_eq!(es256(Some("rsa"), EC1_PRIVATE), Err(JwtRejection::WrongAlgorithm));
    }

    #[test]
    fn a_kid_no_key_has_falls_back_to_the_keys_without_one() {
        let verifier = Setup::new()
            .secret()
            .jwks(json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "one", "x": EC1_XY.0, "y": EC1_XY.1}]}))
            .verifier();
        let secret = EncodingKey::from_secret(SECRET.as_bytes());
        assert!(
            check(&verifier, &sign(Algorithm::HS256, Some("rotated"), &secret, &claims())).is_ok()
        );
        let named = sign(Algorithm::HS256, Some("one"), &secret, &claims());
        assert_eq!(check(&verifier, &named), Err(JwtRejection::WrongAlgorithm));
    }

    #[test]
    fn groups_are_an_array_or_one_string_and_the_user_any_claim() {
        let mut setup = Setup::new().secret();
        setup.config.username_claim = "preferred_username".into();
        setup.config.groups_claim = "roles".into();
        let verifier = setup.verifier();
        let verify = |claims: Value| check(&verifier, &hs256(&claims));

        let token = verify(json!({"exp": NOW + 600, "sub": "x1", "preferred_username": "alice", "roles": ["a", "b"]}))
            .unwrap();
        assert_eq!(token.username.as_deref(), Some("alice"));
        assert_eq!(names(&token.groups), ["a", "b"]);
        let token =
            verify(json!({"exp": NOW + 600, "roles": "operators", "groups": ["ignored"]})).unwrap();
        assert_eq!(token.username, None, "no username claim, no user");
        assert_eq!(names(&token.groups), ["operators"]);
        assert!(verify(json!({"exp": NOW + 600})).unwrap().groups.is_empty());
        for bad in
            [json!({"roles": [1]}), json!({"roles": {"a": true}}), json!({"preferred_username": 7})]
        {
            let mut claims = bad.clone();
            claims["exp"] = json!(NOW + 600);
            assert_eq!(verify(claims), Err(JwtRejection::Malformed), "{bad}");
        }
    }

    #[test]
    fn what_looks_like_a_token() {
        assert!(JwtVerifier::looks_like_token(hs256(&claims()).as_bytes()));
        let header = b64(r#"{"alg":"HS256","typ":"JWT"}"#);
        assert!(JwtVerifier::looks_like_token(format!("{header}.e30.c2ln").as_bytes()));
        for password in [
            "hunter2".to_string(),
            String::new(),
            "a.b.c".into(),
            format!("{header}.e30"),
            format!("{header}.e30.c2ln.ZXh0cmE"),
            format!("{header}..c2ln"),
            format!("{}.e30.c2ln", b64(r#"{"typ":"JWT"}"#)),
            format!("{}.e30.c2ln", b64(r#"["alg"]"#)),
            format!("{}.e30.c2ln", b64(r#"{"alg":1}"#)),
            format!("{header}.e30.c2ln=="),
            format!("{header} .e30.c2ln"),
        ] {
            assert!(!JwtVerifier::looks_like_token(password.as_bytes()), "{password:?}");
        }
        assert!(!JwtVerifier::looks_like_token(&[0xff, b'.', b'a', b'.', b'b']));
    }

    #[test]
    fn malformed_and_oversized_tokens_are_refused_before_any_key() {
        let verifier = Setup::new().secret().verifier();
        // Genuinely signed, but beyond the bound.
        let padding = "g".repeat(MAX_TOKEN_BYTES);
        let oversized = hs256(&json!({"exp": NOW + 600, "padding": padding}));
        assert_eq!(check(&verifier, &oversized), Err(JwtRejection::Malformed));
        for token in ["", "hunter2", "a.b", "a.b.c.d", "!!.e30.c2ln"] {
            assert_eq!(check(&verifier, token), Err(JwtRejection::Malformed), "{token:?}");
        }
        let header = b64(r#"{"alg":"HS256","crit":["exp"]}"#);
        assert_eq!(check(&verifier, &format!("{header}.e30.c2ln")), Err(JwtRejection::Malformed));
        // Signed properly, but the claims are not an object.
        let token =
            sign(Algorithm::HS256, None, &EncodingKey::from_secret(SECRET.as_bytes()), &json!([1]));
        assert_eq!(check(&verifier, &token), Err(JwtRejection::Malformed));
    }

    #[test]
    fn load_errors_name_the_file_and_never_the_secret() {
        let setup = Setup::new();
        let short = "tiny secret";
        let mut config = JwtConfig {
            secret_file: Some(setup.file("short", short.as_bytes())),
            ..JwtConfig::default()
        };
        let error = JwtVerifier::load(&config).unwrap_err().to_string();
        assert!(error.contains("short") && error.contains("32 bytes"), "{error}");
        assert!(!error.contains(short), "{error}");

        config.secret_file = Some(setup.dir.path().join("missing"));
        let error = JwtVerifier::load(&config).unwrap_err().to_string();
        assert!(error.contains("missing"), "{error}");

        let public_key = |pem: &str| {
            let config = JwtConfig {
                public_key_files: vec![setup.file("key.pem", pem.as_bytes())],
                ..JwtConfig::default()
            };
            let error = JwtVerifier::load(&config).unwrap_err().to_string();
            assert!(error.contains("key.pem"), "{error}");
            error
        };
        assert!(public_key(RSA_PRIVATE).contains("private key"));
        assert!(!public_key(RSA_PRIVATE).contains("MIIE"), "no key material");
        assert!(public_key(P384_PUBLIC).contains("P-256"));
        assert!(public_key(RSA1024_PUBLIC).contains("1024 bits"));
        assert!(public_key("not a key").contains("not a PEM file"));
        assert!(public_key(&format!("{EC1_PUBLIC}{RSA_PUBLIC}")).contains("one key per file"));
        assert!(public_key(&EC1_PUBLIC.replace("MFkw", "MFk*")).contains("base64"));

        let jwks = |document: &str| {
            let config = JwtConfig {
                jwks_file: Some(setup.file("jwks.json", document.as_bytes())),
                ..JwtConfig::default()
            };
            let error = JwtVerifier::load(&config).unwrap_err().to_string();
            assert!(error.contains("jwks.json"), "{error}");
            error
        };
        let k = "c2VjcmV0LWJ5dGVzLXRoYXQtYXJlLWxvbmctZW5vdWdoLWZvci1oczI1Ng";
        let error = jwks(
            &json!({"keys": [{"kty": "oct", "kid": "h", "k": k, "alg": "HS512"}]}).to_string(),
        );
        assert!(error.contains(r#"keys[0] (kid "h")"#) && error.contains("HS512"), "{error}");
        assert!(!error.contains(k), "{error}");
        let error = jwks(&format!(r#"{{"keys": [{{"kty": "oct", "k": "{k}"#));
        assert!(error.contains("not JSON") && !error.contains(k), "{error}");
        assert!(jwks(r#"{"keys": [{"kty": "oct", "k": "c2hvcnQ"}]}"#).contains("32 bytes"));
        assert!(jwks(r#"{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AA"}]}"#)
            .contains("not supported"));
        assert!(jwks(r#"{"keys": []}"#).contains("no signing keys"));
        assert!(jwks(r#"{"kty": "oct"}"#).contains("`keys`"));
        let twice = json!({"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "a", "x": EC1_XY.0, "y": EC1_XY.1},
            {"kty": "EC", "crv": "P-256", "kid": "a", "x": EC2_XY.0, "y": EC2_XY.1},
        ]});
        assert!(jwks(&twice.to_string()).contains("same kid"));
    }

    #[test]
    fn the_verifier_does_not_show_its_secret() {
        let verifier = Setup::new().secret().public_key("rsa.pem", RSA_PUBLIC).verifier();
        let shown = format!("{verifier:?}");
        assert!(shown.contains("HS256") && shown.contains("rsa.pem"), "{shown}");
        assert!(!shown.contains(SECRET) && !shown.contains("MIIB"), "{shown}");
        // Nor as the numbers of its bytes.
        let first_bytes = format!("{:?}", &SECRET.as_bytes()[..4]);
        assert!(!shown.contains(first_bytes.trim_matches(['[', ']'])), "{shown}");
    }

    #[test]
    fn a_config_needs_a_key_and_a_sane_leeway() {
        assert!(matches!(JwtVerifier::load(&JwtConfig::default()), Err(JwtError::NoKeySource)));
        let mut setup = Setup::new().secret();
        setup.config.leeway_secs = 3600;
        assert!(matches!(setup.load(), Err(JwtError::LeewayTooLong(3600))));
        let mut setup = Setup::new();
        for n in 0..=MAX_KEYS {
            setup = setup.public_key(&format!("{n}.pem"), EC1_PUBLIC);
        }
        assert!(matches!(setup.load(), Err(JwtError::TooManyKeys(17))));
    }

    #[test]
    fn the_config_reads_from_toml_with_defaults() {
        let config: JwtConfig = toml::from_str(r#"jwks_file = "/etc/ferry/jwks.json""#).unwrap();
        assert_eq!(config.jwks_file, Some(PathBuf::from("/etc/ferry/jwks.json")));
        assert_eq!(
            (config.username_claim.as_str(), config.groups_claim.as_str()),
            ("sub", "groups")
        );
        assert_eq!(config.leeway_secs, 30);
        assert!(toml::from_str::<JwtConfig>("secret = \"x\"").is_err(), "unknown fields refused");
    }

    #[test]
    fn segments_are_unpadded_base64url_decoded_strictly() {
        let decode = |text: &str| URL_SAFE_NO_PAD.decode(text).ok();
        assert_eq!(decode("").unwrap(), b"");
        assert_eq!(decode("Zg").unwrap(), b"f");
        assert_eq!(decode("Zm8").unwrap(), b"fo");
        assert_eq!(decode("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(decode("-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode("+/8"), None, "the standard alphabet");
        assert_eq!(decode("Zm9vY"), None, "a lone last character");
        assert_eq!(decode("Zg=="), None, "padding");
        assert_eq!(decode("Zh"), None, "bits beyond the last byte");
    }

    /// Unpadded base64url, for hand-made tokens.
    fn b64(text: &str) -> String {
        URL_SAFE_NO_PAD.encode(text)
    }
}
