//! The HTTP listener. Today it answers health checks; the admin API,
//! Prometheus metrics, the twin API and the console will be served here.

use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ferry_broker::Broker;
use serde_json::json;
use std::sync::Arc;

pub fn router(broker: Arc<Broker>) -> Router {
    Router::new()
        .route("/health", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(broker)
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
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
fn error(status: StatusCode, code: &str, message: String) -> Response {
    let body = json!({ "status": status.as_u16(), "error": code, "message": message });
    (status, Json(body)).into_response()
}
