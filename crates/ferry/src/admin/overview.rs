//! `GET /api/v1/overview`: the broker's counters and sizes now; and
//! `/api/v1/overview/stream`, the same every second as Server-Sent
//! Events, from which the console draws its rates.

use super::{event_stream, now_ms, rfc3339, Admin, ApiError};
use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::Json;
use ferry_broker::{Broker, HistogramFigures};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::MissedTickBehavior;

const TICK: Duration = Duration::from_secs(1);

/// The overview now, with the latency of the deliveries made since
/// `since` (a reading of the broker's histogram), or since the start.
fn overview(broker: &Broker, since: Option<&HistogramFigures>) -> (Value, HistogramFigures) {
    let figures = broker.overview();
    let window = match since {
        Some(earlier) => figures.latency.since(earlier),
        None => figures.latency.clone(),
    };
    let seconds = |q| window.quantile(q).map(|took| took.as_secs_f64());
    let body = json!({
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
        // Seconds, null when nothing was delivered in the window.
        "latency": { "p50": seconds(0.5), "p90": seconds(0.9), "p99": seconds(0.99) },
        "disk_free_bytes": figures.disk_free_bytes,
        "log_bytes": figures.log_bytes,
    });
    (body, figures.latency)
}

/// The latency here is over every delivery since the start.
pub(super) async fn snapshot(State(admin): State<Arc<Admin>>) -> Json<Value> {
    Json(overview(&admin.broker, None).0)
}

/// One `event: overview` a second. Each is made when the client can take
/// it (the body is pulled, not pushed), so a slow reader skips ticks
/// rather than buffering them. The latency of each is over the deliveries
/// since the one before (since the start for the first).
pub(super) async fn stream(State(admin): State<Arc<Admin>>) -> Result<Response, ApiError> {
    let permit = admin.stream_permit()?;
    let broker = admin.broker.clone();
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let shutdown = broker.shutdown_signal();
    let state = (broker, ticker, shutdown, permit, None);
    let body = futures_util::stream::unfold(
        state,
        |(broker, mut ticker, mut shutdown, permit, previous)| async move {
            tokio::select! {
                _ = shutdown.wait_for(|&stopping| stopping) => return None,
                _ = ticker.tick() => {}
            }
            let (now, latency) = overview(&broker, previous.as_ref());
            let frame = format!("event: overview\ndata: {now}\n\n");
            let state = (broker, ticker, shutdown, permit, Some(latency));
            Some((Ok::<_, Infallible>(Bytes::from(frame)), state))
        },
    );
    Ok(event_stream(body))
}
