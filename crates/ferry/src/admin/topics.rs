//! `GET /api/v1/topics/stream?filter=…`: the messages a filter matches,
//! as they are published, as Server-Sent Events (`event: message`),
//! through a subscription inside the broker that ends with the stream
//! (`ferry_broker::inspect::TopicStream`). The ACL does not apply.
//!
//! A reader slower than the publishers loses messages rather than slowing
//! them: what does not fit in the stream's buffer is dropped and counted,
//! and the count is sent as `event: dropped` `{"count": N}` before the
//! next message.

use super::message::to_json;
use super::params::Params;
use super::{event_stream, now_ms, rfc3339, Admin, AdminUser, ApiError};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::Extension;
use ferry_broker::inspect::TopicStream;
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// Messages a stream holds for its reader: a browser that stalls for a
/// moment (a tab in the background) catches up without loss, and a stream
/// of large messages still holds a bounded amount (1,024 × the packet
/// size limit at worst).
const BUFFER_MESSAGES: usize = 1024;

/// How long a stream may be silent: a comment line keeps proxies from
/// closing it, and reports drops while no message comes.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What the body's generator carries from one frame to the next.
struct Open {
    stream: TopicStream,
    shutdown: tokio::sync::watch::Receiver<bool>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Open {
    /// The next frame; `None` once the stream is over (shutdown).
    async fn next_frame(&mut self) -> Option<String> {
        let message = tokio::select! {
            _ = self.shutdown.wait_for(|&stopping| stopping) => return None,
            message = self.stream.next() => Some(message?),
            () = tokio::time::sleep(KEEP_ALIVE) => None,
        };
        let mut frame = String::new();
        let dropped = self.stream.take_dropped();
        if dropped > 0 {
            frame.push_str(&format!("event: dropped\ndata: {}\n\n", json!({ "count": dropped })));
        }
        match message {
            Some(message) => {
                let mut data = to_json(&message);
                data["time"] = rfc3339(now_ms()).into();
                frame.push_str(&format!("event: message\ndata: {data}\n\n"));
            }
            None if frame.is_empty() => frame.push_str(": keep-alive\n\n"),
            None => {}
        }
        Some(frame)
    }
}

pub(super) async fn stream(
    State(admin): State<Arc<Admin>>,
    Extension(AdminUser(user)): Extension<AdminUser>,
    mut params: Params,
) -> Result<Response, ApiError> {
    let filter = params.take("filter");
    params.finish()?;
    let filter = filter
        .ok_or_else(|| ApiError::bad_request("filter is required, e.g. filter=sensors/%23"))?;
    let permit = admin.stream_permit()?;
    let stream = admin.broker.stream_topic(&filter, BUFFER_MESSAGES).ok_or_else(|| {
        ApiError::bad_request(format!(
            "{filter:?} is not a topic filter (shared ones are not streamed)"
        ))
    })?;
    tracing::debug!(filter, admin = user, "topic stream opened");
    let open = Open { stream, shutdown: admin.broker.shutdown_signal(), _permit: permit };
    // The first frame says the subscription is in place: what is published
    // from then on is streamed.
    let first = futures_util::stream::once(async move {
        Ok::<_, Infallible>(Bytes::from(format!(": subscribed to {filter:?}\n\n")))
    });
    let rest = futures_util::stream::unfold(open, |mut open| async move {
        let frame = open.next_frame().await?;
        Some((Ok::<_, Infallible>(Bytes::from(frame)), open))
    });
    Ok(event_stream(futures_util::StreamExt::chain(first, rest)))
}
