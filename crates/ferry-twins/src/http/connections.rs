//! `/api/2/connections[/{id}[/status|/metrics|/command]]`: Ditto's
//! connectivity API over `Connections`, for the subjects that may manage
//! connections (`Connections::check_manager`).

use super::reply::{self, Reply};
use crate::connections::{Connections, Put};
use crate::service::Caller;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::Extension;
use serde_json::Value;
use std::sync::Arc;

type Managed = State<Arc<Connections>>;
type Who = Option<Extension<Caller>>;

fn check(connections: &Connections, caller: &Who) -> Result<(), crate::DittoError> {
    connections.check_manager(caller.as_ref().map(|Extension(caller)| caller))
}

/// All connections, or with `ids-only=true` their ids.
pub async fn list(State(connections): Managed, caller: Who, RawQuery(query): RawQuery) -> Reply {
    check(&connections, &caller)?;
    let ids_only =
        super::params::pairs(query.unwrap_or_default().as_bytes(), super::params::Plus::Literal)
            .iter()
            .any(|(name, value)| name == "ids-only" && value == "true");
    let body = if ids_only {
        Value::from(connections.ids().await)
    } else {
        Value::from(connections.list().await)
    };
    Ok(reply::json(StatusCode::OK, &body))
}

pub async fn create(
    State(connections): Managed,
    caller: Who,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    check(&connections, &caller)?;
    let created = connections.create(reply::parse_body(&body)?).await?;
    let mut response = reply::json(StatusCode::CREATED, &created);
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok()).unwrap_or("localhost");
    let id = created["id"].as_str().unwrap_or_default();
    if let Ok(location) = HeaderValue::from_str(&format!("http://{host}/api/2/connections/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

pub async fn retrieve(State(connections): Managed, caller: Who, Path(id): Path<String>) -> Reply {
    check(&connections, &caller)?;
    Ok(reply::json(StatusCode::OK, &connections.retrieve(&id).await?))
}

pub async fn modify(
    State(connections): Managed,
    caller: Who,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Reply {
    check(&connections, &caller)?;
    Ok(match connections.put(&id, reply::parse_body(&body)?).await? {
        Put::Created(json) => reply::created(&headers, &uri, &json),
        Put::Modified => reply::no_content(),
    })
}

pub async fn delete(State(connections): Managed, caller: Who, Path(id): Path<String>) -> Reply {
    check(&connections, &caller)?;
    connections.delete(&id).await?;
    Ok(reply::no_content())
}

pub async fn status(State(connections): Managed, caller: Who, Path(id): Path<String>) -> Reply {
    check(&connections, &caller)?;
    Ok(reply::json(StatusCode::OK, &connections.status(&id).await?))
}

pub async fn metrics(State(connections): Managed, caller: Who, Path(id): Path<String>) -> Reply {
    check(&connections, &caller)?;
    Ok(reply::json(StatusCode::OK, &connections.metrics(&id).await?))
}

/// `connectivity.commands:openConnection` and the like, as plain text.
pub async fn command(
    State(connections): Managed,
    caller: Who,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    check(&connections, &caller)?;
    connections.command(&id, &String::from_utf8_lossy(&body)).await?;
    Ok(reply::no_content())
}
