//! The HTTP listener. Today it answers health checks; the admin API,
//! Prometheus metrics, the twin API and the console will be served here.

use axum::http::StatusCode;
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
        .with_state(broker)
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// Errors are JSON `{status, error, message}`, like Ditto's.
async fn not_found(uri: axum::http::Uri) -> Response {
    let body = json!({
        "status": 404,
        "error": "not_found",
        "message": format!("no resource at {}", uri.path()),
    });
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}
