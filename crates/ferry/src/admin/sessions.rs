//! `/api/v1/sessions`: every session, online or offline; one session;
//! deleting an offline one.

use super::params::{page_json, Params};
use super::{Admin, AdminUser, ApiError};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use ferry_broker::inspect::{DeleteSessionError, SessionView};
use serde_json::{json, Value};
use std::sync::Arc;

fn session_json(session: SessionView) -> Value {
    json!({
        "client_id": session.client_id,
        "online": session.online,
        "expiry_interval": session.expiry_interval_secs,
        "queued": session.queued,
        "subscriptions": session.subscriptions,
    })
}

fn not_found(client_id: &str) -> ApiError {
    ApiError::not_found("session_not_found", format!("no session for client id {client_id:?}"))
}

pub(super) async fn list(
    State(admin): State<Arc<Admin>>,
    mut params: Params,
) -> Result<Json<Value>, ApiError> {
    let paging = params.paging()?;
    let prefix = params.take("client_id_prefix");
    let online = match params.take("state").as_deref() {
        None => None,
        Some("online") => Some(true),
        Some("offline") => Some(false),
        Some(other) => {
            return Err(ApiError::bad_request(format!("state is online or offline, not {other:?}")))
        }
    };
    params.finish()?;
    let page = admin.broker.sessions_page(prefix.as_deref(), online, paging);
    Ok(Json(page_json(page, paging, session_json)))
}

pub(super) async fn one(
    State(admin): State<Arc<Admin>>,
    Path(client_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let session = admin.broker.session(&client_id).ok_or_else(|| not_found(&client_id))?;
    Ok(Json(session_json(session)))
}

pub(super) async fn delete(
    State(admin): State<Arc<Admin>>,
    Extension(AdminUser(user)): Extension<AdminUser>,
    Path(client_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    match admin.broker.delete_session(&client_id) {
        Ok(()) => {
            tracing::info!(client_id, admin = user, "session deleted by an administrator");
            Ok(StatusCode::NO_CONTENT)
        }
        Err(DeleteSessionError::NotFound) => Err(not_found(&client_id)),
        Err(error @ DeleteSessionError::Online) => {
            Err(ApiError::new(StatusCode::CONFLICT, "session_online", error.to_string()))
        }
    }
}
