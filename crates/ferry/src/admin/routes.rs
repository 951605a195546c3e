//! `/api/v1/routes` and `/api/v1/endpoints`: the routes in force, each
//! endpoint's state and queue, and pausing or resuming an endpoint.

use super::{rfc3339, Admin, AdminUser, ApiError};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use ferry_routes::EndpointStatus;
use serde_json::{json, Value};
use std::sync::Arc;

/// `{"data": [{"name", "route", "filter", "endpoint", "priority",
/// "ttl_seconds"}]}`, by name.
pub(super) async fn routes(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let applied = admin.reloader.applied();
    let data: Vec<Value> = applied
        .routes
        .routes
        .iter()
        .map(|(name, route)| {
            json!({
                "name": name,
                "route": route.route.to_string(),
                "filter": route.route.filter(),
                "endpoint": route.route.endpoint(),
                "priority": route.priority,
                "ttl_seconds": applied.routes.ttl_of(route).map(|ttl| ttl.as_secs()),
            })
        })
        .collect();
    Json(json!({ "data": data }))
}

/// `connected`, `backoff` (not connected: connecting, or waiting to try
/// again), `paused`, or `removed` (a queue left by an endpoint no longer
/// configured).
fn state(status: &EndpointStatus) -> &'static str {
    if !status.configured {
        "removed"
    } else if status.paused {
        "paused"
    } else if status.figures.connected {
        "connected"
    } else {
        "backoff"
    }
}

pub(super) async fn endpoints(State(admin): State<Arc<Admin>>) -> Json<Value> {
    let types = admin.reloader.applied().endpoint_types;
    let data: Vec<Value> = admin
        .reloader
        .endpoints()
        .await
        .iter()
        .map(|status| {
            let figures = &status.figures;
            json!({
                "name": status.name,
                "type": types.get(&status.name).copied(),
                "state": state(status),
                "queued_messages": status.queued.iter().sum::<usize>(),
                "queued_by_priority": status.queued,
                "queued_bytes": status.queued_bytes,
                "oldest_age_seconds": status.oldest.map(|age| age.as_secs_f64()),
                "routed": figures.routed,
                "sent": figures.sent,
                "dropped": figures.dropped,
                "backoff_until": (figures.backoff_until_ms != 0)
                    .then(|| rfc3339(figures.backoff_until_ms)),
            })
        })
        .collect();
    Json(json!({ "data": data }))
}

/// `POST /api/v1/endpoints/{name}/pause` and `/resume`.
pub(super) async fn pause_or_resume(
    State(admin): State<Arc<Admin>>,
    Extension(AdminUser(user)): Extension<AdminUser>,
    Path((name, action)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let paused = match action.as_str() {
        "pause" => true,
        "resume" => false,
        _ => {
            return Err(ApiError::not_found(
                "not_found",
                format!("no resource at /api/v1/endpoints/{name}/{action}"),
            ))
        }
    };
    if !admin.reloader.set_paused(&name, paused).await {
        return Err(ApiError::not_found(
            "endpoint_not_found",
            format!("no endpoint {name:?} is configured"),
        ));
    }
    tracing::info!(endpoint = name, admin = user, "endpoint {action}d by an administrator");
    Ok(StatusCode::NO_CONTENT)
}
