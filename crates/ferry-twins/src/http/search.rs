//! `/api/2/search/things` and `/api/2/search/things/count`: GET with the
//! parameters in the query, POST with the same parameters as an
//! `application/x-www-form-urlencoded` body, as Ditto's `ThingSearchRoute`.
//!
//! The gateway's part is here: a parameter may come several times;
//! filters are joined as `and(f1,f2,…)` (one filter too: Ditto always
//! wraps, which its error messages show), options and fields with `,`,
//! namespaces split at `,` with empty ones dropped. The rest is
//! `service/search.rs`.

use super::params::{Parameters, Plus};
use super::reply::{self, Reply};
use crate::error::DittoError;
use crate::service::search::SearchParams;
use crate::service::{Caller, Twins};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::Extension;
use serde_json::Value;
use std::sync::Arc;

type Twin = State<Arc<Twins>>;
type Who = Option<Extension<Caller>>;

const FORM: &str = "application/x-www-form-urlencoded";

pub async fn search_get(State(twins): Twin, caller: Who, RawQuery(query): RawQuery) -> Reply {
    let caller = super::caller(caller)?;
    search(
        &twins,
        &caller,
        &Parameters::parse(query.as_deref().unwrap_or("").as_bytes(), Plus::Literal),
    )
    .await
}

pub async fn search_post(
    State(twins): Twin,
    caller: Who,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    let caller = super::caller(caller)?;
    search(&twins, &caller, &form(&headers, &body)?).await
}

pub async fn count_get(State(twins): Twin, caller: Who, RawQuery(query): RawQuery) -> Reply {
    let caller = super::caller(caller)?;
    count(
        &twins,
        &caller,
        &Parameters::parse(query.as_deref().unwrap_or("").as_bytes(), Plus::Literal),
    )
    .await
}

pub async fn count_post(State(twins): Twin, caller: Who, headers: HeaderMap, body: Bytes) -> Reply {
    let caller = super::caller(caller)?;
    count(&twins, &caller, &form(&headers, &body)?).await
}

async fn search(twins: &Twins, caller: &Caller, parameters: &Parameters) -> Reply {
    let filter = parameters.filter();
    let option = parameters.joined("option");
    let fields = parameters.joined("fields");
    let params = SearchParams {
        filter: filter.as_deref(),
        option: option.as_deref(),
        fields: fields.as_deref(),
        namespaces: parameters.namespaces(),
    };
    let result = twins.search_things(caller, params).await?;
    Ok(reply::json(StatusCode::OK, &result))
}

async fn count(twins: &Twins, caller: &Caller, parameters: &Parameters) -> Reply {
    let filter = parameters.filter();
    let count = twins.count_things(caller, filter.as_deref(), parameters.namespaces()).await?;
    Ok(reply::json(StatusCode::OK, &Value::from(count)))
}

/// A POST's form, or Ditto's 415 for any other body type.
fn form(headers: &HeaderMap, body: &[u8]) -> Result<Parameters, DittoError> {
    let media_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("application/octet-stream");
    let essence = media_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case(FORM) {
        return Err(DittoError::new(
            415,
            "mediatype.unsupported",
            format!("The Media-Type <{media_type}> is not supported for this resource."),
            format!("Allowed Media-Types are: <[{FORM}]>."),
        ));
    }
    Ok(Parameters::parse(body, Plus::Space))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_parameters_as_dittos_gateway() {
        let p = Parameters::parse(
            b"filter=eq(attributes/a,%22x+y%22)&filter=exists(thingId)&option=size(2)&option=sort(%2BthingId)&namespaces=a,,b&namespaces=c&fields=thingId",
            Plus::Space,
        );
        assert_eq!(p.filter().as_deref(), Some(r#"and(eq(attributes/a,"x y"),exists(thingId))"#));
        assert_eq!(p.joined("option").as_deref(), Some("size(2),sort(+thingId)"));
        assert_eq!(p.namespaces(), Some(vec!["a".into(), "b".into(), "c".into()]));
        assert_eq!(p.joined("fields").as_deref(), Some("thingId"));
        assert_eq!(Parameters::parse(b"namespaces=", Plus::Literal).namespaces(), Some(vec![]));
        assert_eq!(Parameters::parse(b"", Plus::Literal).filter(), None);
    }
}
