//! Accept loops: one task per listener, one task per accepted connection.

use crate::broker::Broker;
use crate::connection;
use crate::websocket::{check_handshake, WsByteStream};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Pause after a failed accept (typically EMFILE), so a full file table
/// does not turn the accept loop into a busy loop.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Serves MQTT over TCP until the broker shuts down.
pub async fn serve_tcp(listener: TcpListener, broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                // MQTT packets are small and latency matters more than
                // segment count; coalescing happens in our write buffer.
                let _ = stream.set_nodelay(true);
                broker.connections.spawn(connection::serve(stream, peer, broker.clone()));
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
            }
        }
    }
}

/// Serves MQTT over WebSocket on path `/mqtt` until the broker shuts down.
pub async fn serve_ws(listener: TcpListener, broker: Arc<Broker>) {
    let mut shutdown = broker.shutdown_signal();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.changed() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let task_broker = broker.clone();
                broker.connections.spawn(async move {
                    let broker = task_broker;
                    let timeout = Duration::from_secs(broker.config.connect_timeout_secs);
                    match tokio::time::timeout(timeout, tokio_tungstenite::accept_hdr_async(stream, check_handshake)).await {
                        Ok(Ok(ws)) => connection::serve(WsByteStream::new(ws), peer, broker).await,
                        Ok(Err(error)) => tracing::info!(%peer, %error, "WebSocket handshake failed"),
                        Err(_) => tracing::info!(%peer, "WebSocket handshake timed out"),
                    }
                });
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
            }
        }
    }
}
