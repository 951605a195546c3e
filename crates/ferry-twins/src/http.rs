//! Ditto's HTTP API v2 over the twin service: the routes under `/api/2`,
//! served by the binary's HTTP listener.
//!
//! Authentication is the listener's business: it puts the caller's
//! subjects into each request as a [`Caller`] extension before these
//! routes see it, so this module only enforces.

mod connections;
mod live;
mod messages;
mod openapi;
pub(crate) mod params;
mod policies;
mod reply;
mod search;
mod sse;
mod things;

pub use reply::error_response;

use crate::service::{Caller, Twins};
use axum::routing::{any, get};
use axum::Router;
use std::sync::Arc;

/// The twin API's routes, to merge into the listener's router.
pub fn router(twins: Arc<Twins>) -> Router {
    Router::new()
        .route(
            "/api/2/policies/{policy_id}",
            get(policies::retrieve).put(policies::modify).delete(policies::delete),
        )
        .route(
            "/api/2/policies/{policy_id}/{*rest}",
            get(policies::retrieve_part).put(policies::modify_part).delete(policies::delete_part),
        )
        .route("/api/2/things", get(things::list).post(things::create))
        .route("/api/2/things/{thing_id}", any(things::thing))
        .route("/api/2/things/{thing_id}/{*rest}", any(things::part))
        .route("/api/2/things/{thing_id}/inbox/messages/{*subject}", any(messages::thing))
        .route("/api/2/things/{thing_id}/outbox/messages/{*subject}", any(messages::thing))
        .route("/api/2/things/{thing_id}/inbox/claim", any(messages::claim))
        .route(
            "/api/2/things/{thing_id}/features/{feature_id}/inbox/messages/{*subject}",
            any(messages::feature),
        )
        .route(
            "/api/2/things/{thing_id}/features/{feature_id}/outbox/messages/{*subject}",
            any(messages::feature),
        )
        .route("/ws/2", get(crate::ws::upgrade))
        .route("/api/2/search/things", get(search::search_get).post(search::search_post))
        .route("/api/2/search/things/", get(search::search_get).post(search::search_post))
        .route("/api/2/search/things/count", get(search::count_get).post(search::count_post))
        .with_state(twins)
}

/// Ditto's connectivity API, for the subjects `connections` names; to
/// merge behind the same authentication as `router`.
pub fn connections_router(connections: Arc<crate::connections::Connections>) -> Router {
    use axum::routing::post;
    Router::new()
        .route("/api/2/connections", get(connections::list).post(connections::create))
        .route(
            "/api/2/connections/{connection_id}",
            get(connections::retrieve).put(connections::modify).delete(connections::delete),
        )
        .route("/api/2/connections/{connection_id}/status", get(connections::status))
        .route("/api/2/connections/{connection_id}/metrics", get(connections::metrics))
        .route("/api/2/connections/{connection_id}/command", post(connections::command))
        .with_state(connections)
}

/// The routes anyone may call, without the listener's authentication:
/// the API's own description.
pub fn public_router() -> Router {
    Router::new().route("/api/2/openapi.json", get(|| async { axum::Json(openapi::document()) }))
}

/// The caller of a request, or Ditto's 401 if the listener's
/// authentication put none in (a route reached without it).
pub(crate) fn caller(caller: Option<axum::Extension<Caller>>) -> Result<Caller, crate::DittoError> {
    caller.map(|axum::Extension(caller)| caller).ok_or_else(crate::DittoError::unauthenticated)
}
