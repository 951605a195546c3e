//! `/api/2/policies/{policyId}[/…]`: GET, PUT and DELETE on the policy and
//! each of its parts (`PolicyResource`).

use super::reply::{self, error_response};
use crate::service::{Caller, PolicyResource, Twins};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::Extension;
use std::sync::Arc;

type Twin = State<Arc<Twins>>;

pub async fn retrieve(
    twins: Twin,
    caller: Option<Extension<Caller>>,
    Path(policy_id): Path<String>,
) -> Response {
    read(twins, caller, &policy_id, "").await
}

pub async fn retrieve_part(
    twins: Twin,
    caller: Option<Extension<Caller>>,
    Path((policy_id, rest)): Path<(String, String)>,
) -> Response {
    read(twins, caller, &policy_id, &rest).await
}

pub async fn modify(
    twins: Twin,
    caller: Option<Extension<Caller>>,
    Path(policy_id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    write(twins, caller, &policy_id, "", &headers, &uri, &body).await
}

pub async fn modify_part(
    twins: Twin,
    caller: Option<Extension<Caller>>,
    Path((policy_id, rest)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    write(twins, caller, &policy_id, &rest, &headers, &uri, &body).await
}

pub async fn delete(
    twins: Twin,
    caller: Option<Extension<Caller>>,
    Path(policy_id): Path<String>,
) -> Response {
    remove(twins, caller, &policy_id, "").await
}

pub async fn delete_part(
    twins: Twin,
    caller: Option<Extension<Caller>>,
    Path((policy_id, rest)): Path<(String, String)>,
) -> Response {
    remove(twins, caller, &policy_id, &rest).await
}

/// The resource at `rest`, or the answer for a path that names none.
fn resource(rest: &str, method: &Method) -> Result<PolicyResource, Response> {
    match PolicyResource::parse(rest) {
        Some(Ok(resource)) => Ok(resource),
        Some(Err(error)) => Err(error_response(error)),
        None => Err(reply::not_found(method, rest)),
    }
}

async fn read(
    State(twins): Twin,
    caller: Option<Extension<Caller>>,
    policy_id: &str,
    rest: &str,
) -> Response {
    let caller = match super::caller(caller) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let resource = match resource(rest, &Method::GET) {
        Ok(resource) => resource,
        Err(response) => return response,
    };
    match twins.retrieve_policy(&caller, policy_id, &resource).await {
        Ok(retrieved) => reply::json(axum::http::StatusCode::OK, &retrieved.value),
        Err(error) => error_response(error),
    }
}

async fn write(
    State(twins): Twin,
    caller: Option<Extension<Caller>>,
    policy_id: &str,
    rest: &str,
    headers: &HeaderMap,
    uri: &Uri,
    body: &[u8],
) -> Response {
    let caller = match super::caller(caller) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let resource = match resource(rest, &Method::PUT) {
        Ok(resource) => resource,
        Err(response) => return response,
    };
    let body = match reply::parse_body(body) {
        Ok(body) => body,
        Err(response) => return response,
    };
    match twins.modify_policy(&caller, policy_id, &resource, &body).await {
        Ok((crate::policy::Written::Created, value)) => reply::created(headers, uri, &value),
        Ok((crate::policy::Written::Modified, _)) => reply::no_content(),
        Err(error) => error_response(error),
    }
}

async fn remove(
    State(twins): Twin,
    caller: Option<Extension<Caller>>,
    policy_id: &str,
    rest: &str,
) -> Response {
    let caller = match super::caller(caller) {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let resource = match resource(rest, &Method::DELETE) {
        Ok(resource) => resource,
        Err(response) => return response,
    };
    if matches!(
        resource,
        PolicyResource::Entries | PolicyResource::Subjects(_) | PolicyResource::Resources(_)
    ) {
        return reply::method_not_allowed(&Method::DELETE);
    }
    match twins.delete_policy(&caller, policy_id, &resource).await {
        Ok(()) => reply::no_content(),
        Err(error) => error_response(error),
    }
}
