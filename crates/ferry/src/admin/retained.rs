//! `/api/v1/retained`: retained messages by filter, one by topic, and
//! deleting one.

use super::message::to_json;
use super::params::{page_json, Params};
use super::{Admin, AdminUser, ApiError};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::Value;
use std::sync::Arc;

fn not_found(topic: &str) -> ApiError {
    ApiError::not_found("retained_not_found", format!("no retained message on {topic:?}"))
}

/// `filter` (default `#`) selects the topics, wildcards and all.
pub(super) async fn list(
    State(admin): State<Arc<Admin>>,
    mut params: Params,
) -> Result<Json<Value>, ApiError> {
    let paging = params.paging()?;
    let filter = params.take("filter").unwrap_or_else(|| "#".to_owned());
    params.finish()?;
    if !ferry_mqtt::topic::is_valid_topic_filter(&filter) {
        return Err(ApiError::bad_request(format!("{filter:?} is not a topic filter")));
    }
    let page = admin.broker.retained_page(&filter, paging);
    Ok(Json(page_json(page, paging, |message| to_json(&message))))
}

pub(super) async fn one(
    State(admin): State<Arc<Admin>>,
    Path(topic): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let message = admin.broker.retained_message(&topic).ok_or_else(|| not_found(&topic))?;
    Ok(Json(to_json(&message)))
}

pub(super) async fn delete(
    State(admin): State<Arc<Admin>>,
    Extension(AdminUser(user)): Extension<AdminUser>,
    Path(topic): Path<String>,
) -> Result<StatusCode, ApiError> {
    if !admin.broker.delete_retained(&topic).await {
        return Err(not_found(&topic));
    }
    tracing::info!(topic, admin = user, "retained message deleted by an administrator");
    Ok(StatusCode::NO_CONTENT)
}
