//! Ditto's HTTP API v2 over the twin service: the routes under `/api/2`,
//! served by the binary's HTTP listener.
//!
//! Authentication is the listener's business: it puts the caller's
//! subjects into each request as a [`Caller`] extension before these
//! routes see it, so this module only enforces.

mod policies;
mod reply;
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
        // ---- things (/api/2/things…) ----
        .route("/api/2/things", get(things::list).post(things::create))
        .route("/api/2/things/{thing_id}", any(things::thing))
        .route("/api/2/things/{thing_id}/{*rest}", any(things::part))
        // ---- end of things ----
        .with_state(twins)
}

/// The caller of a request, or Ditto's 401 if the listener's
/// authentication put none in (a route reached without it).
fn caller(caller: Option<axum::Extension<Caller>>) -> Result<Caller, crate::DittoError> {
    caller.map(|axum::Extension(caller)| caller).ok_or_else(reply::unauthorized)
}
