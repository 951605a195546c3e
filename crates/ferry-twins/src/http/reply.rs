//! Answers as Ditto's gateway gives them: JSON bodies, errors as Ditto's
//! error objects with their status, `Location` on a creation.

use crate::error::DittoError;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// What every handler returns: an answer, or Ditto's error as its answer.
pub type Reply = Result<Response, DittoError>;

impl IntoResponse for DittoError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json(status, &self.to_json())
    }
}

pub fn error_response(error: DittoError) -> Response {
    error.into_response()
}

/// A JSON body with `status`.
pub fn json(status: StatusCode, value: &Value) -> Response {
    let body = serde_json::to_vec(value).expect("a JSON value serialises");
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body)
        .into_response()
}

/// 201 with what was created and where: for a PUT, the request's own URL
/// without its query, as Ditto's gateway makes it (`UriForLocationHeaderSupplier`).
/// Aggregated acknowledgements with their combined `status`, as Ditto's
/// HTTP API answers them: one label's payload as it is, several as label
/// → `{status, payload, headers}`.
pub fn acknowledgements(status: u16, acks: &[crate::acks::Ack]) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match crate::acks::aggregated_body(acks) {
        Some(body) => json(status, &body),
        None => status.into_response(),
    }
}

pub fn created(headers: &HeaderMap, uri: &Uri, value: &Value) -> Response {
    let mut response = json(StatusCode::CREATED, value);
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok()).unwrap_or("localhost");
    if let Ok(location) = HeaderValue::from_str(&format!("http://{host}{}", uri.path())) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// A request body as JSON, or Ditto's `json.invalid`.
pub fn parse_body(body: &[u8]) -> Result<Value, DittoError> {
    serde_json::from_slice(body).map_err(DittoError::json_invalid)
}

/// Ditto's 405 (`GatewayMethodNotAllowedException`).
pub fn method_not_allowed(method: &Method) -> DittoError {
    DittoError::new(
        405,
        "gateway:method.notallowed",
        format!("The provided HTTP method '{method}' is not allowed on this resource."),
        "Check if you used the correct resource and method combination.".to_string(),
    )
}

/// A path under an entity that names no part of it.
pub fn not_found(method: &Method, rest: &str) -> DittoError {
    DittoError::new(
        404,
        "gateway:resource.notfound",
        format!("The requested resource '{rest}' could not be found ({method})."),
        "Check the path of the requested resource.".to_string(),
    )
}
