//! The console's login: `POST /api/v1/login` checks a user's password and
//! administrator role once and answers a session cookie, so that the
//! browser never holds the password; `POST /api/v1/logout` ends it and
//! `GET /api/v1/me` says who is logged in.
//!
//! Sessions live in memory only (a restart logs everybody out), are
//! bounded in number and end after [`IDLE`] without a request.

use super::{Admin, AdminUser, ApiError};
use crate::twins::Peer;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const COOKIE: &str = "ferry_session";

/// Login sessions at most: a handful of operators with a few browsers
/// each, and a bound so that a script logging in in a loop cannot grow
/// the table; past it the session idle longest is ended.
const MAX_SESSIONS: usize = 1_000;

/// A session unused this long has ended: a working day and a half, so a
/// console left open overnight asks for the password again.
const IDLE: Duration = Duration::from_secs(12 * 3600);

/// The bytes of a session token: 256 random bits, as hard to guess as a
/// key.
type Token = [u8; 32];

#[derive(Default)]
pub struct Logins {
    sessions: Mutex<HashMap<Token, Login>>,
}

struct Login {
    username: String,
    last_used: Instant,
}

impl Logins {
    /// A new session for `username`, and its cookie value.
    fn open(&self, username: String) -> Result<String, getrandom::Error> {
        let mut token: Token = [0; 32];
        getrandom::fill(&mut token)?;
        let now = Instant::now();
        let mut sessions = self.sessions.lock();
        sessions.retain(|_, login| now.duration_since(login.last_used) < IDLE);
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions.iter().min_by_key(|(_, login)| login.last_used).map(|(t, _)| *t);
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(token, Login { username, last_used: now });
        Ok(hex(&token))
    }

    /// The user of a live session, whose idle clock starts again.
    fn touch(&self, cookie: &str) -> Option<String> {
        let token = unhex(cookie)?;
        let mut sessions = self.sessions.lock();
        let login = sessions.get_mut(&token)?;
        let now = Instant::now();
        if now.duration_since(login.last_used) >= IDLE {
            sessions.remove(&token);
            return None;
        }
        login.last_used = now;
        Some(login.username.clone())
    }

    fn close(&self, cookie: &str) {
        if let Some(token) = unhex(cookie) {
            self.sessions.lock().remove(&token);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Token> {
    if text.len() != 64 {
        return None;
    }
    let mut token: Token = [0; 32];
    for (index, byte) in token.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(token)
}

/// The session cookie's value in a request, if it sent one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The administrator whose session cookie the request carries, if live.
/// A session whose user a reload took out of the password file, or out of
/// `[admin]` or the group that made them one, ends here at its next
/// request rather than at its idle timeout.
pub(super) fn session_user(admin: &Admin, headers: &HeaderMap) -> Option<String> {
    let cookie = cookie(headers)?;
    let user = admin.logins.touch(cookie)?;
    let gone = if !admin.broker.has_password_user(&user) {
        "no longer in the password file"
    } else if !admin.is_admin(&user, &[]) {
        "no longer an administrator"
    } else {
        return Some(user);
    };
    admin.logins.close(cookie);
    tracing::info!(user, "console session ended: {gone}");
    None
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Credentials {
    username: String,
    password: String,
}

pub(super) async fn login(
    State(admin): State<Arc<Admin>>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    body: Result<Json<Credentials>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(credentials) = body.map_err(|rejection| {
        ApiError::bad_request(format!("expected {{\"username\", \"password\"}}: {rejection}"))
    })?;
    let username = credentials.username;
    if let Err(reason) = admin.auth.password(&username, &credentials.password, peer).await {
        tracing::info!(%peer, user = username, reason, "console login refused");
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", reason));
    }
    if !admin.is_admin(&username, &[]) {
        tracing::info!(%peer, user = username, "console login refused: not an administrator");
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("user {username:?} is not an administrator ([admin] users or groups)"),
        ));
    }
    let token = admin.logins.open(username.clone()).map_err(|error| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "no_randomness", error.to_string())
    })?;
    tracing::info!(%peer, user = username, "console login");
    let secure = if admin.tls { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/{secure}");
    let mut response = Json(json!({ "username": username })).into_response();
    let cookie = HeaderValue::from_str(&cookie).map_err(|_| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "cookie", "the cookie is not a header")
    })?;
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// Ends the request's login session, if it has one, and tells the browser
/// to forget the cookie.
pub(super) async fn logout(State(admin): State<Arc<Admin>>, headers: HeaderMap) -> Response {
    if let Some(cookie) = cookie(&headers) {
        admin.logins.close(cookie);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("ferry_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    response
}

pub(super) async fn me(
    Extension(AdminUser(user)): Extension<AdminUser>,
) -> Json<serde_json::Value> {
    Json(json!({ "username": user }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_cookie_and_ends_on_logout() {
        let logins = Logins::default();
        let cookie = logins.open("alice".into()).unwrap();
        assert_eq!(cookie.len(), 64);
        assert_eq!(logins.touch(&cookie).as_deref(), Some("alice"));
        assert_eq!(logins.touch(&cookie.replace(&cookie[..2], "zz")), None);
        logins.close(&cookie);
        assert_eq!(logins.touch(&cookie), None);
    }

    #[test]
    fn the_table_is_bounded_and_the_idle_longest_goes_first() {
        let logins = Logins::default();
        let first = logins.open("first".into()).unwrap();
        let second = logins.open("second".into()).unwrap();
        assert!(logins.touch(&first).is_some(), "first is now the more recently used");
        for n in 2..MAX_SESSIONS {
            logins.open(format!("user{n}")).unwrap();
        }
        assert_eq!(logins.sessions.lock().len(), MAX_SESSIONS);
        logins.open("one more".into()).unwrap();
        assert_eq!(logins.sessions.lock().len(), MAX_SESSIONS);
        assert_eq!(logins.touch(&second), None, "the session idle longest was ended");
        assert!(logins.touch(&first).is_some());
    }

    #[test]
    fn the_cookie_is_read_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_static("a=b; ferry_session=abc; c=d"));
        assert_eq!(cookie(&headers), Some("abc"));
    }
}
