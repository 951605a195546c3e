//! HTTPS: a listener for axum that hands over connections once their TLS
//! handshake is done. Handshakes run in tasks of their own, so a client
//! that stalls in one does not hold up the others.

use ferry_broker::Tls;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;

/// Handshakes in progress at once: each holds a socket and rustls state,
/// and a flood of connections that never finish one must not hold more.
const MAX_HANDSHAKES: usize = 256;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Finished handshakes waiting for axum to take them.
const ACCEPTED_BACKLOG: usize = 64;

pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, tls: Arc<Tls>) -> std::io::Result<TlsListener> {
        let local_addr = tcp.local_addr()?;
        let (sender, accepted) = mpsc::channel(ACCEPTED_BACKLOG);
        tokio::spawn(accept_loop(tcp, tls, sender));
        Ok(TlsListener { accepted, local_addr })
    }
}

async fn accept_loop(
    tcp: TcpListener,
    tls: Arc<Tls>,
    sender: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = handshakes.clone().acquire_owned().await else { return };
        let (stream, peer) = tokio::select! {
            _ = sender.closed() => return,
            accepted = tcp.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "HTTPS accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (tls, sender) = (tls.clone(), sender.clone());
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                Ok(Ok(stream)) => {
                    let _ = sender.send((stream, peer)).await;
                }
                Ok(Err(error)) => tracing::info!(%peer, %error, "HTTPS handshake failed"),
                Err(_) => tracing::info!(%peer, "HTTPS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accept loop ended: nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local_addr)
    }
}
