//! `POST /api/v1/reload`: reads users, JWT keys, the ACL, certificates,
//! routes and endpoints again, as SIGHUP does (`crate::reload`).

use super::{Admin, AdminUser};
use crate::http::error;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;
use std::sync::Arc;

pub(super) async fn reload(
    State(admin): State<Arc<Admin>>,
    Extension(AdminUser(user)): Extension<AdminUser>,
) -> Response {
    tracing::info!(admin = user, "reload asked through the admin API");
    match admin.reloader.reload().await {
        Ok(loaded) => Json(json!({ "status": "reloaded", "loaded": loaded })).into_response(),
        Err(failure) => {
            tracing::error!("reload failed, the previous settings stay: {failure:#}");
            error(StatusCode::UNPROCESSABLE_ENTITY, "reload_failed", format!("{failure:#}"))
        }
    }
}
