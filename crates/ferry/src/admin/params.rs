//! Query parameters of the admin API: each read once, unknown ones
//! refused (a misspelt filter would otherwise list everything), paging
//! checked against its bounds.

use super::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use ferry_broker::inspect::{Page, Paging};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Items per page when the request does not say.
const DEFAULT_LIMIT: usize = 100;

/// Items per page at most: a page is built in memory and sent in one
/// response; a thousand clients' figures are about 400 KB of JSON.
pub const MAX_LIMIT: usize = 1000;

/// A request's query parameters, taken one by one; extracted from the
/// request as they are (it cannot fail).
pub struct Params(HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Params, Self::Rejection> {
        Ok(Params::new(parts.uri.query().map(str::to_owned)))
    }
}

impl Params {
    /// The parameters of a query string, decoded as a browser's
    /// `URLSearchParams` writes them (`+` is a space, `%2B` a plus); of a
    /// name given twice, the last.
    pub fn new(query: Option<String>) -> Params {
        let decode = |text: &str| {
            percent_encoding::percent_decode_str(&text.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        let pairs =
            query.as_deref().unwrap_or_default().split('&').filter(|pair| !pair.is_empty()).map(
                |pair| {
                    let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(name), decode(value))
                },
            );
        Params(pairs.collect())
    }

    /// The parameter, if given and not empty.
    pub fn take(&mut self, name: &str) -> Option<String> {
        self.0.remove(name).filter(|value| !value.is_empty())
    }

    /// `page` and `limit`.
    pub fn paging(&mut self) -> Result<Paging, ApiError> {
        let number = |name: &str, value: Option<String>, default: usize, max: usize| match value {
            None => Ok(default),
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(ApiError::bad_request(format!(
                    "{name} must be a whole number from 1 to {max}, not {text:?}"
                ))),
            },
        };
        let page = number("page", self.take("page"), 1, usize::MAX)?;
        let limit = number("limit", self.take("limit"), DEFAULT_LIMIT, MAX_LIMIT)?;
        Ok(Paging { page, limit })
    }

    /// Refuses what was given and not taken.
    pub fn finish(self) -> Result<(), ApiError> {
        let mut unknown: Vec<String> = self.0.into_keys().collect();
        if unknown.is_empty() {
            return Ok(());
        }
        unknown.sort();
        Err(ApiError::bad_request(format!("unknown query parameters: {}", unknown.join(", "))))
    }
}

/// `{"data": [...], "meta": {"page", "limit", "count"}}`.
pub fn page_json<T, V: Serialize>(page: Page<T>, paging: Paging, view: impl Fn(T) -> V) -> Value {
    let data: Vec<V> = page.items.into_iter().map(view).collect();
    json!({
        "data": data,
        "meta": { "page": paging.page, "limit": paging.limit, "count": page.count },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_decoded_as_browsers_encode_them() {
        let mut params = Params::new(Some("filter=a%2F%23&name=x+y&plus=%2B&empty=".into()));
        assert_eq!(params.take("filter").as_deref(), Some("a/#"));
        assert_eq!(params.take("name").as_deref(), Some("x y"));
        assert_eq!(params.take("plus").as_deref(), Some("+"));
        assert_eq!(params.take("empty"), None);
        assert!(params.finish().is_ok());
    }

    #[test]
    fn paging_is_bounded_and_unknown_names_are_refused() {
        let mut params = Params::new(Some("page=2&limit=1000".into()));
        let paging = params.paging().ok().unwrap();
        assert_eq!((paging.page, paging.limit), (2, 1000));
        for bad in ["limit=1001", "limit=0", "page=0", "page=x"] {
            assert!(Params::new(Some(bad.into())).paging().is_err(), "{bad}");
        }
        let mut params = Params::new(Some("client_id_prefx=a".into()));
        assert!(params.paging().is_ok());
        assert!(params.finish().is_err());
    }
}
