//! `/api/2/policies/{policyId}[/…]`: GET, PUT and DELETE on the policy and
//! each of its parts (`PolicyResource`).

use super::reply::{self, Reply};
use crate::error::DittoError;
use crate::policy::Written;
use crate::service::{Caller, PolicyResource, Twins};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::Extension;
use std::sync::Arc;

type Twin = State<Arc<Twins>>;
type Who = Option<Extension<Caller>>;

pub async fn retrieve(twins: Twin, caller: Who, Path(id): Path<String>) -> Reply {
    read(twins, caller, &id, "").await
}

pub async fn retrieve_part(
    twins: Twin,
    caller: Who,
    Path((id, rest)): Path<(String, String)>,
) -> Reply {
    read(twins, caller, &id, &rest).await
}

pub async fn modify(
    twins: Twin,
    caller: Who,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Reply {
    write(twins, caller, &id, "", &headers, &uri, &body).await
}

pub async fn modify_part(
    twins: Twin,
    caller: Who,
    Path((id, rest)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Reply {
    write(twins, caller, &id, &rest, &headers, &uri, &body).await
}

pub async fn delete(twins: Twin, caller: Who, Path(id): Path<String>) -> Reply {
    remove(twins, caller, &id, "").await
}

pub async fn delete_part(
    twins: Twin,
    caller: Who,
    Path((id, rest)): Path<(String, String)>,
) -> Reply {
    remove(twins, caller, &id, &rest).await
}

/// The resource at `rest`, or the error for a path that names none.
fn resource(rest: &str, method: &Method) -> Result<PolicyResource, DittoError> {
    PolicyResource::parse(rest).unwrap_or_else(|| Err(reply::not_found(method, rest)))
}

async fn read(State(twins): Twin, caller: Who, policy_id: &str, rest: &str) -> Reply {
    let caller = super::caller(caller)?;
    let resource = resource(rest, &Method::GET)?;
    let retrieved = twins.retrieve_policy(&caller, policy_id, &resource).await?;
    Ok(reply::json(StatusCode::OK, &retrieved.value))
}

async fn write(
    State(twins): Twin,
    caller: Who,
    policy_id: &str,
    rest: &str,
    headers: &HeaderMap,
    uri: &Uri,
    body: &[u8],
) -> Reply {
    let caller = super::caller(caller)?;
    let resource = resource(rest, &Method::PUT)?;
    let body = reply::parse_body(body)?;
    Ok(match twins.modify_policy(&caller, policy_id, &resource, &body).await? {
        (Written::Created, value) => reply::created(headers, uri, &value),
        (Written::Modified, _) => reply::no_content(),
    })
}

async fn remove(State(twins): Twin, caller: Who, policy_id: &str, rest: &str) -> Reply {
    let caller = super::caller(caller)?;
    let resource = resource(rest, &Method::DELETE)?;
    if matches!(
        resource,
        PolicyResource::Entries
            | PolicyResource::Subjects(_)
            | PolicyResource::Resources(_)
            | PolicyResource::ImportEntries(_)
    ) {
        return Err(reply::method_not_allowed(&Method::DELETE));
    }
    twins.delete_policy(&caller, policy_id, &resource).await?;
    Ok(reply::no_content())
}
