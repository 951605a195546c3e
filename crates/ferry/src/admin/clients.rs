//! `/api/v1/clients`: connected clients with their figures, one client
//! with its subscriptions, and disconnecting one.

use super::params::{page_json, Params};
use super::{rfc3339, Admin, AdminUser, ApiError};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use ferry_broker::inspect::{ClientQuery, ClientView, SubscriptionView};
use serde_json::{json, Value};
use std::sync::Arc;

/// The longest disconnect reason passed on: it goes into a DISCONNECT's
/// reason string and a log line.
const MAX_REASON_BYTES: usize = 256;

/// A client as JSON, with `subscriptions` as given (a count or a list).
fn client_json(client: ClientView, subscriptions: Value) -> Value {
    json!({
        "client_id": client.client_id,
        "username": client.username,
        "address": client.address.to_string(),
        "protocol": client.protocol,
        "keep_alive": client.keep_alive_secs,
        "clean_start": client.clean_start,
        "connected_at": rfc3339(client.connected_at_ms),
        "subscriptions": subscriptions,
        "inflight": client.inflight,
        "queued": client.queued,
        "bytes_in": client.bytes_in,
        "bytes_out": client.bytes_out,
        "messages_in": client.messages_in,
        "messages_out": client.messages_out,
        "listener": client.listener,
    })
}

pub(super) fn subscription_json(subscription: SubscriptionView) -> Value {
    json!({
        "client_id": subscription.client_id,
        "filter": subscription.filter,
        "qos": subscription.qos,
        "no_local": subscription.no_local,
        "retain_as_published": subscription.retain_as_published,
        "retain_handling": subscription.retain_handling,
    })
}

pub(super) async fn list(
    State(admin): State<Arc<Admin>>,
    mut params: Params,
) -> Result<Json<Value>, ApiError> {
    let paging = params.paging()?;
    let query = ClientQuery {
        client_id_prefix: params.take("client_id_prefix"),
        username: params.take("username"),
        address: params.take("address"),
        protocol: params.take("protocol"),
    };
    params.finish()?;
    if let Some(protocol) = &query.protocol {
        if !["3.1", "3.1.1", "5"].contains(&protocol.as_str()) {
            return Err(ApiError::bad_request(format!(
                "protocol is 3.1, 3.1.1 or 5, not {protocol:?}"
            )));
        }
    }
    let page = admin.broker.clients(&query, paging);
    Ok(Json(page_json(page, paging, |client| {
        let count = client.subscriptions;
        client_json(client, count.into())
    })))
}

fn not_connected(client_id: &str) -> ApiError {
    ApiError::not_found("client_not_found", format!("no client {client_id:?} is connected"))
}

pub(super) async fn one(
    State(admin): State<Arc<Admin>>,
    Path(client_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (client, subscriptions) =
        admin.broker.client(&client_id).ok_or_else(|| not_connected(&client_id))?;
    let subscriptions = subscriptions.into_iter().map(subscription_json).collect();
    Ok(Json(client_json(client, Value::Array(subscriptions))))
}

pub(super) async fn disconnect(
    State(admin): State<Arc<Admin>>,
    Extension(AdminUser(user)): Extension<AdminUser>,
    Path(client_id): Path<String>,
    mut params: Params,
) -> Result<StatusCode, ApiError> {
    let reason = params.take("reason").unwrap_or_else(|| format!("disconnected by {user}"));
    params.finish()?;
    if reason.len() > MAX_REASON_BYTES {
        return Err(ApiError::bad_request(format!("the reason is over {MAX_REASON_BYTES} bytes")));
    }
    if !admin.broker.disconnect_client(&client_id, &reason) {
        return Err(not_connected(&client_id));
    }
    tracing::info!(client_id, admin = user, reason, "client disconnected by an administrator");
    Ok(StatusCode::NO_CONTENT)
}
