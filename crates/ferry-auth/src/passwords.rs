//! The password file: one `user:hash` line per user, the hash an argon2id
//! PHC string (`$argon2id$v=19$m=19456,t=2,p=1$salt$hash`). Blank lines and
//! lines starting with `#` are comments, kept as they are when the file is
//! rewritten.
//!
//! It plays the part of `mosquitto_passwd`'s file, with argon2id instead of
//! salted SHA-512: argon2id is memory-hard, so each guess against a stolen
//! file costs an attacker 19 MiB and two passes instead of a few
//! nanoseconds. The price is paid on our side too, about 20 ms of one core
//! per check, which is why the broker checks passwords off its connection
//! threads and rate-limits failures. A Mosquitto password file works as it
//! is: its hashes are checked too (`mosquitto.rs`), and replaced by
//! argon2id when `ferry passwd` sets a user's password.

mod mosquitto;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Argon2, Params};
use mosquitto::MosquittoHash;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The longest user name: an MQTT string's length is 16 bits.
const MAX_USER_BYTES: usize = 65_535;

/// Passwords longer than this are refused: argon2 hashes any length, but
/// an MQTT password is at most 65,535 bytes and a longer one is a mistake.
const MAX_PASSWORD_BYTES: usize = 65_535;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("{path}:{line}: {message}")]
    Invalid { path: PathBuf, line: usize, message: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("user name {user:?}: {reason}")]
    BadUser { user: String, reason: &'static str },
    #[error("password: {0}")]
    BadPassword(&'static str),
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

/// A password file in memory, in its order, comments included.
#[derive(Debug, Clone, Default)]
pub struct PasswordFile {
    lines: Vec<Line>,
}

#[derive(Debug, Clone)]
enum Line {
    User { name: String, hash: String },
    Comment(String),
}

impl PasswordFile {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<PasswordFile, PasswordError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PasswordError::Io { path: path.to_owned(), source })?;
        PasswordFile::parse(&text, path)
    }

    /// Checks every line: a user line needs a valid name, an argon2id hash
    /// (or one of Mosquitto's) and a name not seen before. Errors name the file and line, never
    /// the hash.
    pub fn parse(text: &str, path: &Path) -> Result<PasswordFile, PasswordError> {
        let mut file = PasswordFile::default();
        for (index, line) in text.lines().enumerate() {
            let invalid = |message: String| PasswordError::Invalid {
                path: path.to_owned(),
                line: index + 1,
                message,
            };
            if line.trim().is_empty() || line.starts_with('#') {
                file.lines.push(Line::Comment(line.to_owned()));
                continue;
            }
            let Some((name, hash)) = line.split_once(':') else {
                return Err(invalid("expected `user:hash`".into()));
            };
            check_user(name).map_err(|error| invalid(error.to_string()))?;
            check_hash(hash).map_err(|reason| invalid(format!("user {name:?}: {reason}")))?;
            if file.hash_of(name).is_some() {
                return Err(invalid(format!("user {name:?} appears twice")));
            }
            file.lines.push(Line::User { name: name.to_owned(), hash: hash.to_owned() });
        }
        Ok(file)
    }

    /// Whether `password` is `user`'s. An unknown user takes as long as a
    /// wrong password, so timing does not tell which names exist.
    ///
    /// An empty password (as a CONNECT without one is taken) never matches:
    /// `set` makes no hash of one, and one a Mosquitto file holds must not
    /// let in a client that sends a user name alone. Mosquitto refuses it
    /// too. Refused before any hashing, for every name alike.
    pub fn verify(&self, user: &str, password: &[u8]) -> bool {
        if password.is_empty() {
            return false;
        }
        let known = self.hash_of(user);
        let hash = known.unwrap_or_else(|| unknown_user_hash());
        // Parsed when loaded (or made by `set`), so this cannot fail; if it
        // did, refusing is the safe answer.
        let matches = match MosquittoHash::parse(hash) {
            Some(mosquitto) => mosquitto.is_ok_and(|mosquitto| mosquitto.matches(password)),
            None => PasswordHash::new(hash)
                .is_ok_and(|parsed| Argon2::default().verify_password(password, &parsed).is_ok()),
        };
        matches && known.is_some()
    }

    /// Adds `user` with `password`, or changes its password.
    pub fn set(&mut self, user: &str, password: &[u8]) -> Result<(), PasswordError> {
        check_user(user)?;
        if password.is_empty() {
            return Err(PasswordError::BadPassword("empty"));
        }
        if password.len() > MAX_PASSWORD_BYTES {
            return Err(PasswordError::BadPassword("longer than 65,535 bytes"));
        }
        let hash = hash(password)?;
        match self.lines.iter_mut().find_map(|line| match line {
            Line::User { name, hash } if name == user => Some(hash),
            _ => None,
        }) {
            Some(existing) => *existing = hash,
            None => self.lines.push(Line::User { name: user.to_owned(), hash }),
        }
        Ok(())
    }

    /// Removes `user`; false if there was none.
    pub fn remove(&mut self, user: &str) -> bool {
        let before = self.lines.len();
        self.lines.retain(|line| !matches!(line, Line::User { name, .. } if name == user));
        self.lines.len() != before
    }

    pub fn users(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|line| match line {
            Line::User { name, .. } => Some(name.as_str()),
            Line::Comment(_) => None,
        })
    }

    /// Writes the file to `path` in one step (a temporary file renamed
    /// over it), readable by its owner only: it is as good as the
    /// passwords to anyone who can spend the time.
    pub fn save(&self, path: &Path) -> Result<(), PasswordError> {
        let io = |source| PasswordError::Io { path: path.to_owned(), source };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            let mut out = open_private(&tmp).map_err(io)?;
            out.write_all(self.to_string().as_bytes()).map_err(io)?;
            out.sync_all().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)
    }

    fn hash_of(&self, user: &str) -> Option<&str> {
        self.lines.iter().find_map(|line| match line {
            Line::User { name, hash } if name == user => Some(hash.as_str()),
            _ => None,
        })
    }
}

impl std::fmt::Display for PasswordFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for line in &self.lines {
            match line {
                Line::User { name, hash } => writeln!(f, "{name}:{hash}")?,
                Line::Comment(text) => writeln!(f, "{text}")?,
            }
        }
        Ok(())
    }
}

fn check_user(user: &str) -> Result<(), PasswordError> {
    let bad = |reason| Err(PasswordError::BadUser { user: user.to_owned(), reason });
    if user.is_empty() {
        return bad("empty");
    }
    if user.len() > MAX_USER_BYTES {
        return bad("longer than 65,535 bytes");
    }
    if user.contains(':') {
        return bad("contains `:`, which separates the name from the hash");
    }
    if user.starts_with('#') {
        return bad("starts with `#`, which starts a comment");
    }
    if user.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    Ok(())
}

fn check_hash(hash: &str) -> Result<(), &'static str> {
    if let Some(mosquitto) = MosquittoHash::parse(hash) {
        return mosquitto.map(drop);
    }
    let parsed = PasswordHash::new(hash).map_err(|_| "not a PHC password hash")?;
    if parsed.algorithm.as_str() != "argon2id" {
        return Err("not an argon2id hash (make it with `ferry passwd`)");
    }
    if parsed.salt.is_none() || parsed.hash.is_none() || Params::try_from(&parsed).is_err() {
        return Err("an incomplete argon2id hash: parameters, salt or hash missing or invalid");
    }
    Ok(())
}

fn hash(password: &[u8]) -> Result<String, PasswordError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password, &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| PasswordError::Hash(error.to_string()))
}

/// A hash no password matches (of random bytes nobody keeps), verified in
/// place of an unknown user's.
fn unknown_user_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        let mut secret = [0u8; 32];
        argon2::password_hash::rand_core::RngCore::fill_bytes(&mut OsRng, &mut secret);
        hash(&secret).unwrap_or_default()
    })
}

fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> PathBuf {
        PathBuf::from("passwords")
    }

    #[test]
    fn a_set_password_verifies_and_nothing_else_does() {
        let mut file = PasswordFile::default();
        file.set("sensor-1", b"right").unwrap();
        file.set("sensor-2", b"other").unwrap();
        assert!(file.verify("sensor-1", b"right"));
        assert!(!file.verify("sensor-1", b"wrong"));
        assert!(!file.verify("sensor-1", b"other"), "another user's password");
        assert!(!file.verify("nobody", b"right"));
        file.set("sensor-1", b"changed").unwrap();
        assert!(file.verify("sensor-1", b"changed"));
        assert!(!file.verify("sensor-1", b"right"));
        assert!(file.remove("sensor-1"));
        assert!(!file.remove("sensor-1"));
        assert!(!file.verify("sensor-1", b"changed"));
        assert_eq!(file.users().collect::<Vec<_>>(), ["sensor-2"]);
    }

    #[test]
    fn an_empty_password_never_verifies_even_against_its_own_hash() {
        use base64::Engine;
        let salt = b"0123456789abcdef";
        let of_nothing = ring::digest::digest(&ring::digest::SHA512, salt);
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let line = format!("empty:$6${}${}\n", b64(salt), b64(of_nothing.as_ref()));
        let file = PasswordFile::parse(&line, &path()).unwrap();
        assert!(!file.verify("empty", b""));
        assert!(!file.verify("empty", b"x"));
    }

    #[test]
    fn comments_and_order_survive_a_rewrite() {
        let mut file = PasswordFile::default();
        file.set("a", b"pa").unwrap();
        let text = format!("# devices\n\n{file}# end\n");
        let mut parsed = PasswordFile::parse(&text, &path()).unwrap();
        parsed.set("b", b"pb").unwrap();
        let again = PasswordFile::parse(&parsed.to_string(), &path()).unwrap();
        assert!(again.to_string().starts_with("# devices\n\na:$argon2id$"));
        assert!(again.to_string().contains("# end\nb:$argon2id$"));
        assert!(again.verify("a", b"pa") && again.verify("b", b"pb"));
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number() {
        let mut good = PasswordFile::default();
        good.set("u", b"p").unwrap();
        let good = good.to_string();
        let hash = good.trim_end().split_once(':').unwrap().1;
        for (text, line, says) in [
            ("# ok\nno separator\n".to_string(), 2, "expected `user:hash`"),
            (format!(":{hash}\n"), 1, "empty"),
            ("u:nonsense\n".to_string(), 1, "not a PHC password hash"),
            ("u:$argon2id$v=19$m=19456,t=2,p=1\n".to_string(), 1, "incomplete"),
            ("u:$6$salt$sha512crypt\n".to_string(), 1, "Mosquitto hash is not base64"),
            ("u:$5$rounds=5000$salt$hash\n".to_string(), 1, "not a PHC password hash"),
            (format!("{good}u:{hash}\n"), 2, "appears twice"),
        ] {
            let error = PasswordFile::parse(&text, &path()).unwrap_err().to_string();
            assert!(error.starts_with(&format!("passwords:{line}: ")), "{error}");
            assert!(error.contains(says), "{error}");
            assert!(!error.contains(hash), "the hash is not repeated: {error}");
        }
    }

    #[test]
    fn names_and_passwords_that_cannot_be_stored_are_refused() {
        let mut file = PasswordFile::default();
        for user in ["", "a:b", "#a", "a\nb"] {
            assert!(matches!(file.set(user, b"p"), Err(PasswordError::BadUser { .. })), "{user:?}");
        }
        assert!(matches!(file.set("u", b""), Err(PasswordError::BadPassword(_))));
        assert_eq!(file.users().count(), 0);
    }

    #[test]
    fn saved_files_load_again_and_only_the_owner_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passwd");
        let mut file = PasswordFile::default();
        file.set("u", b"p").unwrap();
        file.save(&path).unwrap();
        assert!(PasswordFile::load(&path).unwrap().verify("u", b"p"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let missing = PasswordFile::load(&dir.path().join("none")).unwrap_err().to_string();
        assert!(missing.contains("none"), "{missing}");
    }
}
