//! The HTTP listener: health and readiness, Prometheus metrics, the admin
//! API under `/api/v1` (`admin.rs`), Ditto's twin API under `/api/2`
//! (`ferry_twins::http`) behind its authentication (`twins.rs`), and the
//! web console's assets (`console.rs`); a body a handler leaves unread is
//! read away before its answer goes (`unread_body.rs`).

use crate::admin::Admin;
use crate::ready::Accepting;
use crate::reload::Reloader;
use crate::twins::TwinAuth;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ferry_broker::Broker;
use ferry_twins::connections::Connections;
use ferry_twins::service::Twins;
use serde_json::json;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    reloader: Arc<Reloader>,
    broker: Arc<Broker>,
    /// The MQTT listeners: their figures, and whether they still accept.
    listeners: Arc<[Arc<Accepting>]>,
    twins: Option<Arc<Twins>>,
    connections: Option<Arc<Connections>>,
}

pub fn router(
    reloader: Arc<Reloader>,
    broker: Arc<Broker>,
    listeners: Arc<[Arc<Accepting>]>,
    admin: Arc<Admin>,
    twins: Option<(Arc<Twins>, Arc<TwinAuth>, Arc<Connections>)>,
) -> Router {
    let router = Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .merge(crate::console::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(AppState {
            reloader,
            broker,
            listeners,
            twins: twins.as_ref().map(|(twins, _, _)| twins.clone()),
            connections: twins.as_ref().map(|(_, _, connections)| connections.clone()),
        })
        .merge(crate::admin::router(admin));
    let router = match twins {
        Some((twins, auth, connections)) => router.merge(ferry_twins::http::public_router()).merge(
            ferry_twins::http::router(twins)
                .merge(ferry_twins::http::connections_router(connections))
                .layer(axum::middleware::from_fn_with_state(auth, crate::twins::authenticate)),
        ),
        None => router,
    };
    router
        .layer(axum::middleware::from_fn(crate::console::no_password_dialog))
        .layer(axum::middleware::from_fn(crate::unread_body::read_away))
}

async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("application/openmetrics-text"));
    let sources = crate::metrics::Sources {
        broker: &state.broker,
        reloader: &state.reloader,
        listeners: &state.listeners,
        twins: state.twins.as_deref(),
        connections: state.connections.as_deref(),
    };
    match crate::metrics::render(sources).await {
        Ok(text) if openmetrics => {
            ([(header::CONTENT_TYPE, crate::metrics::OPENMETRICS)], text).into_response()
        }
        Ok(text) => {
            let text = crate::metrics::to_prometheus_text(&text);
            ([(header::CONTENT_TYPE, crate::metrics::TEXT)], text).into_response()
        }
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics_failed",
            "the metrics could not be encoded".into(),
        ),
    }
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// 200 when Ferry can serve (`ready.rs`), 503 naming what fails. The
/// checks touch the disk: on a blocking thread, off the runtime that
/// accepts connections.
async fn ready(State(state): State<AppState>) -> Response {
    let checked =
        tokio::task::spawn_blocking(move || crate::ready::check(&state.broker, &state.listeners))
            .await
            .unwrap_or_else(|_| Err("the readiness check failed".into()));
    match checked {
        Ok(()) => Json(json!({ "status": "ready" })).into_response(),
        Err(message) => error(StatusCode::SERVICE_UNAVAILABLE, "not_ready", message),
    }
}

async fn not_found(uri: Uri) -> Response {
    error(StatusCode::NOT_FOUND, "not_found", format!("no resource at {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// Every HTTP error is JSON `{status, error, message}`, like Ditto's.
pub(crate) fn error(status: StatusCode, code: &str, message: String) -> Response {
    let body = json!({ "status": status.as_u16(), "error": code, "message": message });
    (status, Json(body)).into_response()
}
