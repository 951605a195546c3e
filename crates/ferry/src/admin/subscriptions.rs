//! `GET /api/v1/subscriptions`: every subscription, by client and filter.

use super::clients::subscription_json;
use super::params::{page_json, Params};
use super::{Admin, ApiError};
use axum::extract::State;
use axum::Json;
use serde_json::Value;
use std::sync::Arc;

/// `client_id` (exact) and `filter` (exactly as subscribed, `$share/…`
/// included) select; both may be given.
pub(super) async fn list(
    State(admin): State<Arc<Admin>>,
    mut params: Params,
) -> Result<Json<Value>, ApiError> {
    let paging = params.paging()?;
    let client_id = params.take("client_id");
    let filter = params.take("filter");
    params.finish()?;
    let page = admin.broker.subscriptions_page(client_id.as_deref(), filter.as_deref(), paging);
    Ok(Json(page_json(page, paging, subscription_json)))
}
