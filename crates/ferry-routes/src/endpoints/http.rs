//! The `http` endpoint: each batch is one POST of its messages to a URL,
//! as a JSON array or NDJSON (`encode.rs` has the shape, docs/routes.md
//! the contract), on one kept-alive connection (`connection.rs`).
//!
//! What an answer means for the batch:
//! - 2xx: delivered.
//! - 408, 429, 5xx, a 3xx (redirects are not followed: the bearer token
//!   would go wherever the server points), a connection error or no answer
//!   within `timeout`: failed; the flow backs off and sends the batch
//!   again, so nothing is lost while the receiver is down or overloaded.
//! - any other 4xx: the receiver refuses this data and would refuse it
//!   again; every message of the batch is dropped and counted under
//!   under `http_<status>` (`http_4xx` for an unusual one), with one
//!   warning naming the status.

mod config;
mod connection;
mod encode;

pub use config::{HttpConfigError, HttpEndpointConfig, Tls};
// The kept-alive client, for the twins' HTTP push connections too.
pub use connection::{
    Answer, Body, Connection, Connector, Failure, BODY_HEAD_BYTES, BODY_READ_BYTES_MAX,
};
pub use encode::Format;

use crate::sink::{Sent, Sink, SinkError};
use ferry_broker::endpoint::RoutedMessage;
use http_body_util::Full;
use hyper::header::HeaderMap;
use hyper::{Method, Request, StatusCode, Uri};
use std::future::Future;
use std::time::Duration;

pub struct HttpSink {
    name: String,
    /// The URL without its query, for logs and errors.
    target: String,
    path: Uri,
    headers: HeaderMap,
    format: Format,
    timeout: Duration,
    connection: Connection,
}

impl HttpSink {
    /// Checks `config` (reading `ca_file` or the system's CA certificates
    /// for https); the error names the key at fault. Connects on the
    /// flow's first `connect`, not here.
    pub fn new(name: &str, config: &HttpEndpointConfig) -> Result<HttpSink, HttpConfigError> {
        let checked = config.check()?;
        Ok(HttpSink {
            name: name.to_owned(),
            target: checked.target,
            path: checked.path,
            headers: checked.headers,
            format: checked.format,
            timeout: checked.timeout,
            connection: Connection::new(Connector::new(checked.host, checked.port, checked.tls)),
        })
    }

    fn request(&self, body: Vec<u8>) -> Request<Full<hyper::body::Bytes>> {
        let mut request = Request::new(Full::new(body.into()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.path.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// `operation` cut off at `timeout`; the error names the URL, never a
/// header.
async fn within<T>(
    timeout: Duration,
    target: &str,
    operation: impl Future<Output = Result<T, Failure>>,
) -> Result<T, SinkError> {
    let failure = match tokio::time::timeout(timeout, operation).await {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(failure)) => failure,
        Err(_) => Failure::Timeout(timeout),
    };
    Err(SinkError::new(format!("POST {target}: {failure}")))
}

/// What an answer's status means for the batch.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Delivered,
    Retry,
    Rejected,
}

fn verdict(status: StatusCode) -> Verdict {
    match status.as_u16() {
        200..=299 => Verdict::Delivered,
        // Request Timeout and Too Many Requests are about now, not about
        // the data: the same batch can succeed later.
        408 | 429 => Verdict::Retry,
        400..=499 => Verdict::Rejected,
        // 5xx, and 1xx/3xx, which a POST endpoint should never answer.
        _ => Verdict::Retry,
    }
}

/// What the messages of a refused batch are counted under: the status, so
/// that a 401 (a token to renew) is told from a 400 (a body to fix), from a
/// fixed set so the metric's labels stay few.
fn rejected_reason(status: u16) -> &'static str {
    match status {
        400 => "http_400",
        401 => "http_401",
        402 => "http_402",
        403 => "http_403",
        404 => "http_404",
        405 => "http_405",
        406 => "http_406",
        407 => "http_407",
        409 => "http_409",
        410 => "http_410",
        411 => "http_411",
        412 => "http_412",
        413 => "http_413",
        414 => "http_414",
        415 => "http_415",
        416 => "http_416",
        417 => "http_417",
        418 => "http_418",
        421 => "http_421",
        422 => "http_422",
        423 => "http_423",
        424 => "http_424",
        425 => "http_425",
        426 => "http_426",
        428 => "http_428",
        431 => "http_431",
        451 => "http_451",
        _ => "http_4xx",
    }
}

impl Sink for HttpSink {
    async fn connect(&mut self) -> Result<(), SinkError> {
        within(self.timeout, &self.target, self.connection.ensure_open()).await
    }

    async fn send(&mut self, batch: &[RoutedMessage]) -> Result<Sent, SinkError> {
        let body = encode::batch(batch, self.format, encode::Clock::now())
            .map_err(|error| SinkError::new(error.to_string()))?;
        let request = self.request(body);
        let Answer { status, body_head, .. } =
            within(self.timeout, &self.target, self.connection.exchange(request)).await?;
        match verdict(status) {
            Verdict::Delivered => Ok(Sent::default()),
            Verdict::Retry => {
                Err(SinkError::new(format!("POST {}: answered {status}", self.target)))
            }
            Verdict::Rejected => {
                // Debug-formatted so that a body with line breaks or
                // control characters stays one log line.
                let body =
                    String::from_utf8_lossy(&body_head[..body_head.len().min(BODY_HEAD_BYTES)]);
                tracing::warn!(
                    endpoint = %self.name,
                    url = %self.target,
                    status = status.as_u16(),
                    body = ?body,
                    messages = batch.len(),
                    "http endpoint refused a batch; its messages are dropped"
                );
                Ok(Sent {
                    rejected: batch
                        .iter()
                        .map(|routed| (routed.offset, rejected_reason(status.as_u16())))
                        .collect(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_deliver_retry_or_reject() {
        for (status, expected) in [
            (200, Verdict::Delivered),
            (202, Verdict::Delivered),
            (204, Verdict::Delivered),
            (301, Verdict::Retry),
            (400, Verdict::Rejected),
            (401, Verdict::Rejected),
            (404, Verdict::Rejected),
            (408, Verdict::Retry),
            (413, Verdict::Rejected),
            (429, Verdict::Retry),
            (500, Verdict::Retry),
            (503, Verdict::Retry),
        ] {
            assert_eq!(verdict(StatusCode::from_u16(status).unwrap()), expected, "{status}");
        }
    }
}
