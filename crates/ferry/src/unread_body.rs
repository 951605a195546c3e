//! A request body its handler left unread is read away before the answer
//! goes out.
//!
//! Handlers often answer without reading the body: a GET that came with
//! one, a 401 or a 404 decided from the head alone. hyper then closes the
//! connection, since it cannot find where the next request starts. A
//! client that writes the body after the head, in a write of its own
//! (python-requests does), has it arrive at a socket that is closed; the
//! kernel answers with a reset, and a reset that reaches the client before
//! it has read the answer destroys the answer: the client sees "connection
//! reset" instead of the 404. Reading the body to its end first makes the
//! answer arrive, and keeps the connection for the next request.

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use hyper::body::{Frame, SizeHint};
use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Most bytes read away: what the HTTP API's handlers would have read of
/// a body (axum's default limit). Beyond it the connection closes as
/// before, rather than Ferry reading a large upload it has refused.
const UNREAD_LIMIT: usize = 2 * 1024 * 1024;

/// How long the answer waits for the rest of the body. A client that
/// announced a body and stalls gets its answer then, on a connection
/// that closes.
const UNREAD_WAIT: Duration = Duration::from_secs(10);

/// The layer: runs the handler, then reads away what it left of the body.
pub async fn read_away(request: Request, next: Next) -> Response {
    // A client that asked to be told before sending the body is told by
    // the answer itself, and sends nothing: reading would invite it to
    // send what was refused.
    if request.headers().contains_key(header::EXPECT) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let left = Arc::new(Mutex::new(None));
    let body = Body::new(Watched { body: Some(body), left: left.clone() });
    let response = next.run(Request::from_parts(parts, body)).await;
    // The handler has returned, so the request and its body are dropped,
    // and what was left of the body is in `left`.
    let unread = left.lock().take();
    if let Some(body) = unread {
        let _ = tokio::time::timeout(UNREAD_WAIT, drain(body)).await;
    }
    response
}

/// Reads `body` to its end or to the limit.
async fn drain(body: Body) {
    let mut read = 0;
    let mut chunks = body.into_data_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        read += chunk.len();
        if read > UNREAD_LIMIT {
            return;
        }
    }
}

/// The body as the handler sees it; when dropped before its end, it
/// hands what is left back to the layer.
struct Watched {
    body: Option<Body>,
    left: Arc<Mutex<Option<Body>>>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(body) = self.body.take().filter(|body| !body.is_end_stream()) {
            *self.left.lock() = Some(body);
        }
    }
}
