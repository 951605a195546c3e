//! Accept loops: one task per listener, one task per accepted connection.

use crate::broker::Broker;
use crate::connection;
use crate::websocket::{check_handshake, WsByteStream};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Pause after a failed accept (typically EMFILE), so a full file table
/// does not turn the accept loop into a busy loop.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Serves MQTT over TCP until the broker shuts down.
pub async fn serve_tcp(listener: TcpListener, broker: Arc<Broker>) {
    accept_loop(listener, broker, connection::serve).await;
}

/// Serves MQTT over WebSocket on path `/mqtt` until the broker shuts down.
pub async fn serve_ws(listener: TcpListener, broker: Arc<Broker>) {
    accept_loop(listener, broker, |stream, peer, broker| async move {
        let timeout = Duration::from_secs(broker.config.connect_timeout_secs);
        match tokio::time::timeout(
            timeout,
            tokio_tungstenite::accept_hdr_async(stream, check_handshake),
        )
        .await
        {
            Ok(Ok(ws)) => connection::serve(WsByteStream::new(ws), peer, broker).await,
            Ok(Err(error)) => tracing::info!(%peer, %error, "WebSocket handshake failed"),
            Err(_) => tracing::info!(%peer, "WebSocket handshake timed out"),
        }
    })
    .await;
}

/// Accepts until shutdown and runs `serve` for each connection as a task
/// the broker tracks.
async fn accept_loop<F, Fut>(listener: TcpListener, broker: Arc<Broker>, serve: F)
where
    F: Fn(TcpStream, SocketAddr, Arc<Broker>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
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
                broker.connections.spawn(serve(stream, peer, broker.clone()));
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
            }
        }
    }
}
