//! The admin API under `/api/v1`: JSON over Ferry's HTTP listener, for
//! operators and the web console. This file is its router and the one
//! authentication layer in front of every route but `login` and
//! `openapi.json`; each resource is a file of its own under `admin/`.
//!
//! Who may use it:
//! - a session cookie from `POST /api/v1/login` (`login.rs`);
//! - `Authorization: Basic` or `Bearer` (`http_auth.rs`), for a user that
//!   `[admin] users` names or that is in a group `[admin] groups` names
//!   (the ACL file's `[groups]`, or a JWT's groups claim); others are 403;
//! - nothing, on a loopback listener of a Ferry with no password file and
//!   no JWT keys (the loopback rule of `/api/2` and Mosquitto 2): the
//!   user `anonymous`. Never beyond loopback, where with no `[admin]`
//!   users every request is refused.

mod clients;
mod info;
mod login;
mod message;
mod openapi;
mod overview;
mod params;
mod publish;
mod reload;
mod retained;
mod routes;
mod sessions;
mod subscriptions;
mod topics;

use crate::config::Config;
use crate::http::error;
use crate::http_auth::{HttpAuth, HttpUser};
use crate::reload::Reloader;
use crate::twins::Peer;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use ferry_broker::Broker;
use std::sync::Arc;
use tokio::sync::Semaphore;

pub use info::Listening;

/// Topic and overview streams open at once, over all clients: each holds
/// a connection, a task and (topic streams) an in-broker subscription
/// with its buffer; a console tab needs two. Beyond it: 503.
const MAX_STREAMS: usize = 64;

/// What every handler shares.
pub struct Admin {
    auth: Arc<HttpAuth>,
    broker: Arc<Broker>,
    reloader: Arc<Reloader>,
    logins: login::Logins,
    /// The listener speaks TLS: the session cookie is then `Secure`.
    tls: bool,
    info: info::Info,
    streams: Arc<Semaphore>,
}

/// The administrator a request comes from, put in it by `authenticate`.
#[derive(Debug, Clone)]
pub struct AdminUser(pub String);

impl Admin {
    pub fn new(
        config: &Config,
        auth: Arc<HttpAuth>,
        reloader: Arc<Reloader>,
        listening: Vec<Listening>,
        tls: bool,
    ) -> Admin {
        Admin {
            broker: auth.broker().clone(),
            auth,
            reloader,
            logins: login::Logins::default(),
            tls,
            info: info::Info::new(config, listening),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
        }
    }

    /// Whether `user`, in `groups` (a JWT's), is an administrator, by name
    /// or by a group of theirs (a JWT's, or the ACL file's), as the
    /// configuration last (re)loaded says.
    fn is_admin(&self, user: &str, groups: &[Arc<str>]) -> bool {
        let settings = self.reloader.admin_settings();
        settings.users.iter().any(|admin| admin == user)
            || settings.groups.iter().any(|wanted| {
                groups.iter().any(|group| **group == **wanted)
                    || self.broker.acl_groups_of(user).iter().any(|group| group == wanted)
            })
    }

    /// The administrator whose console session the request's cookie is,
    /// if live: the twin API (`twins.rs`) takes it too.
    pub fn session_user(&self, headers: &axum::http::HeaderMap) -> Option<String> {
        login::session_user(self, headers)
    }

    /// A place for one more stream, or the 503 that says there is none.
    fn stream_permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
        self.streams.clone().try_acquire_owned().map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_streams",
                format!("{MAX_STREAMS} streams are open already; close one and try again"),
            )
        })
    }
}

pub fn router(admin: Arc<Admin>) -> Router {
    let guarded = Router::new()
        .route("/api/v1/me", get(login::me))
        .route("/api/v1/logout", post(login::logout))
        .route("/api/v1/info", get(info::info))
        .route("/api/v1/clients", get(clients::list))
        .route("/api/v1/clients/{client_id}", get(clients::one).delete(clients::disconnect))
        .route("/api/v1/sessions", get(sessions::list))
        .route("/api/v1/sessions/{client_id}", get(sessions::one).delete(sessions::delete))
        .route("/api/v1/subscriptions", get(subscriptions::list))
        .route("/api/v1/retained", get(retained::list))
        .route("/api/v1/retained/{*topic}", get(retained::one).delete(retained::delete))
        .route("/api/v1/publish", post(publish::publish))
        .route("/api/v1/routes", get(routes::routes))
        .route("/api/v1/endpoints", get(routes::endpoints))
        .route("/api/v1/endpoints/{name}/{action}", post(routes::pause_or_resume))
        .route("/api/v1/reload", post(reload::reload))
        .route("/api/v1/overview", get(overview::snapshot))
        .route("/api/v1/overview/stream", get(overview::stream))
        .route("/api/v1/topics/stream", get(topics::stream))
        .layer(axum::middleware::from_fn_with_state(admin.clone(), authenticate));
    Router::new()
        .route("/api/v1/login", post(login::login))
        .route("/api/v1/openapi.json", get(openapi::serve))
        .merge(guarded)
        .with_state(admin)
}

/// The layer in front of every guarded route: a login session's cookie,
/// else the `Authorization` header, else the loopback rule.
async fn authenticate(
    State(admin): State<Arc<Admin>>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(user) = login::session_user(&admin, request.headers()) {
        request.extensions_mut().insert(AdminUser(user));
        return next.run(request).await;
    }
    let user = match admin.auth.user(request.headers(), peer).await {
        Ok(HttpUser::LoopbackDefault) => "anonymous".to_owned(),
        Ok(HttpUser::Basic(user)) if admin.is_admin(&user, &[]) => user,
        Ok(HttpUser::Bearer { user, groups }) if admin.is_admin(&user, &groups) => user,
        Ok(HttpUser::Basic(user) | HttpUser::Bearer { user, .. }) => {
            tracing::info!(%peer, user, "admin API refused: not an administrator");
            return error(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("user {user:?} is not an administrator ([admin] users or groups)"),
            );
        }
        Err(reason) => {
            tracing::debug!(%peer, reason, "admin API request not authenticated");
            return unauthorized(reason);
        }
    };
    request.extensions_mut().insert(AdminUser(user));
    next.run(request).await
}

/// 401, with the challenge that lets `curl -u` and browsers answer it.
fn unauthorized(reason: &str) -> Response {
    let mut response = error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        format!("the request could not be authenticated: {reason}"),
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"ferry\""));
    response
}

/// An error answer of a handler, as `http::error` writes it.
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error(self.status, self.code, self.message)
    }
}

/// A `text/event-stream` response of `frames`.
fn event_stream<S>(frames: S) -> Response
where
    S: futures_util::Stream<Item = Result<axum::body::Bytes, std::convert::Infallible>>
        + Send
        + 'static,
{
    (
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        axum::body::Body::from_stream(frames),
    )
        .into_response()
}

/// Unix milliseconds as RFC 3339, UTC.
fn rfc3339(unix_ms: u64) -> String {
    let seconds = i64::try_from(unix_ms / 1000).unwrap_or(i64::MAX);
    // Below a billion, so the cast cannot truncate.
    let nanos = (unix_ms % 1000) as u32 * 1_000_000;
    ferry_twins::policy::Timestamp::from_unix(seconds, nanos).to_string()
}

/// Unix milliseconds now.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}
