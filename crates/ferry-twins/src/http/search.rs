//! `/api/2/search/things` and `/api/2/search/things/count`: GET with the
//! parameters in the query, POST with the same parameters as an
//! `application/x-www-form-urlencoded` body, as Ditto's `ThingSearchRoute`.
//!
//! The gateway's part is here: a parameter may come several times;
//! filters are joined as `and(f1,f2,…)` (one filter too: Ditto always
//! wraps, which its error messages show), options and fields with `,`,
//! namespaces split at `,` with empty ones dropped. The rest is
//! `service/search.rs`.

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
    search(&twins, &caller, &Parameters::parse(query.as_deref().unwrap_or("").as_bytes())).await
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
    count(&twins, &caller, &Parameters::parse(query.as_deref().unwrap_or("").as_bytes())).await
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
    Ok(Parameters::parse(body))
}

/// A query string or form body, each name with its values in order.
struct Parameters(Vec<(String, String)>);

impl Parameters {
    fn parse(text: &[u8]) -> Parameters {
        Parameters(
            text.split(|&b| b == b'&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let mut parts = pair.splitn(2, |&b| b == b'=');
                    let name = decode(parts.next().unwrap_or_default());
                    let value = decode(parts.next().unwrap_or_default());
                    (name, value)
                })
                .collect(),
        )
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.0.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
    }

    /// Ditto's `calculateFilter`: `and(…)` of every `filter` given.
    fn filter(&self) -> Option<String> {
        let filters = self.all("filter");
        (!filters.is_empty()).then(|| format!("and({})", filters.join(",")))
    }

    /// `option` and `fields`: every value given, joined with `,`.
    fn joined(&self, name: &str) -> Option<String> {
        let values = self.all(name);
        (!values.is_empty()).then(|| values.join(","))
    }

    /// Ditto's `calculateNamespaces`: `None` when none is given.
    fn namespaces(&self) -> Option<Vec<String>> {
        let given = self.all("namespaces");
        (!given.is_empty()).then(|| {
            given
                .iter()
                .flat_map(|text| text.split(','))
                .filter(|namespace| !namespace.is_empty())
                .map(str::to_owned)
                .collect()
        })
    }
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a
/// byte; a `%` not followed by two hex digits stays as it is, and bytes
/// that are not UTF-8 become U+FFFD.
fn decode(text: &[u8]) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < text.len()
                && hex(text[i + 1]).is_some()
                && hex(text[i + 2]).is_some() =>
            {
                out.push(hex(text[i + 1]).unwrap() << 4 | hex(text[i + 2]).unwrap());
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_parameters_as_dittos_gateway() {
        let p = Parameters::parse(
            b"filter=eq(attributes/a,%22x+y%22)&filter=exists(thingId)&option=size(2)&option=sort(%2BthingId)&namespaces=a,,b&namespaces=c&fields=thingId",
        );
        assert_eq!(p.filter().as_deref(), Some(r#"and(eq(attributes/a,"x y"),exists(thingId))"#));
        assert_eq!(p.joined("option").as_deref(), Some("size(2),sort(+thingId)"));
        assert_eq!(p.namespaces(), Some(vec!["a".into(), "b".into(), "c".into()]));
        assert_eq!(p.joined("fields").as_deref(), Some("thingId"));
        assert_eq!(Parameters::parse(b"namespaces=").namespaces(), Some(vec![]));
        assert_eq!(Parameters::parse(b"").filter(), None);
        assert_eq!(decode(b"%zz%4"), "%zz%4");
        assert_eq!(decode(b"%C3%A9"), "é");
    }
}
