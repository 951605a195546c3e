//! `GET /api/v1/overview`: the broker's counters and sizes now; and
//! `/api/v1/overview/stream`, the same every second as Server-Sent
//! Events, from which the console draws its rates.

use super::{event_stream, now_ms, rfc3339, Admin, ApiError};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::Json;
use ferry_broker::Broker;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::MissedTickBehavior;

const TICK: Duration = Duration::from_secs(1);

fn overview(broker: &Broker) -> Value {
    let figures = broker.overview();
    json!({
        "time": rfc3339(now_ms()),
        "connections": figures.connections,
        "sessions_online": figures.sessions_online,
        "sessions_offline": figures.sessions_offline,
        "subscriptions": figures.subscriptions,
        "retained": figures.retained,
        "messages_in": figures.messages_in,
        "messages_out": figures.messages_out,
        "bytes_in": figures.bytes_in,
        "bytes_out": figures.bytes_out,
        "dropped": figures.dropped,
        "queued_messages": figures.queued_messages,
        "queued_bytes": figures.queued_bytes,
        // Filled in once the broker keeps a publish-to-deliver histogram.
        "latency": { "p50": null, "p90": null, "p99": null },
        "disk_free_bytes": figures.disk_free_bytes,
        "log_bytes": figures.log_bytes,
    })
}

pub(super) async fn snapshot(State(admin): State<Arc<Admin>>) -> Json<Value> {
    Json(overview(&admin.broker))
}

/// One `event: overview` a second. Each is made when the client can take
/// it (the body is pulled, not pushed), so a slow reader skips ticks
/// rather than buffering them.
pub(super) async fn stream(State(admin): State<Arc<Admin>>) -> Result<Response, ApiError> {
    let permit = admin.stream_permit()?;
    let broker = admin.broker.clone();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let shutdown = broker.shutdown_signal();
    let state = (broker, ticker, shutdown, permit);
    let body = futures_util::stream::unfold(
        state,
        |(broker, mut ticker, mut shutdown, permit)| async move {
            tokio::select! {
                _ = shutdown.wait_for(|&stopping| stopping) => return None,
                _ = ticker.tick() => {}
            }
            let frame = format!("event: overview\ndata: {}\n\n", overview(&broker));
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (broker, ticker, shutdown, permit)))
        },
    );
    Ok(event_stream(body))
}
