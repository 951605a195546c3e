//! Accept loops: one per configured listener, each handing its admitted
//! sockets to the core (`cores.rs`) that serves them for their life, after
//! the TLS and WebSocket handshakes the listener needs.

use crate::admission::{admit, refuse, Admission};
use crate::broker::Broker;
use crate::connection;
use crate::cores::Cores;
use crate::listener::{Listener, Protocol};
use crate::origin::Origin;
use crate::websocket::{check_handshake, WsByteStream};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

/// Pause after a failed accept (typically EMFILE), so a full file table
/// does not turn the accept loop into a busy loop.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Serves the listener until the broker shuts down: accepts here, and
/// hands each admitted socket to one of the `cores`, which serves it for
/// its whole life.
pub async fn serve(
    tcp: TcpListener,
    listener: Arc<Listener>,
    broker: Arc<Broker>,
    cores: Arc<Cores>,
) {
    // Accepted sockets are registered by the core that serves them, not
    // here: registering each with this thread's reactor first cost an
    // allocation and two epoll_ctl calls per connection, and left idle
    // connections larger.
    let tcp = match tcp.into_std().and_then(readiness) {
        Ok(tcp) => tcp,
        Err(error) => {
            tracing::error!(listener = %listener.name, %error, "cannot accept connections");
            return;
        }
    };
    let mut shutdown = broker.shutdown_signal();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.wait_for(|&stopping| stopping) => return,
            accepted = accept(&tcp) => accepted,
        };
        match accepted {
            // A connection that finds every place taken waits a moment for
            // one (`places.rs`), on a task of its own so that others are
            // still accepted meanwhile.
            Ok((stream, peer)) => match admit(&broker, &listener) {
                Ok(admission) => seat(stream, peer, admission, &listener, &broker, &cores),
                Err(refusal) if refusal.is_full() => {
                    let (listener, broker, cores) =
                        (listener.clone(), broker.clone(), cores.clone());
                    tokio::spawn(async move {
                        let Some(turn) = broker.places.wait_turn() else {
                            return refuse(&broker, &listener, peer, refusal);
                        };
                        let admitted =
                            turn.retry(|| admit(&broker, &listener), |refusal| refusal.is_full());
                        match admitted.await {
                            // The accept loop has ended: so does the socket.
                            Ok(_) if broker.is_shutting_down() => {}
                            Ok(admission) => {
                                seat(stream, peer, admission, &listener, &broker, &cores);
                            }
                            Err(refusal) => refuse(&broker, &listener, peer, refusal),
                        }
                    });
                }
                Err(refusal) => refuse(&broker, &listener, peer, refusal),
            },
            Err(error) => {
                tracing::warn!(listener = %listener.name, %error, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
            }
        }
    }
}

/// Hands an admitted socket to the core with the fewest connections,
/// which serves it for its whole life.
fn seat(
    stream: std::net::TcpStream,
    peer: SocketAddr,
    admission: Admission,
    listener: &Arc<Listener>,
    broker: &Arc<Broker>,
    cores: &Cores,
) {
    // MQTT packets are small and latency matters more than segment count;
    // coalescing happens in our write buffer.
    let _ = stream.set_nodelay(true);
    if let Err(error) = stream.set_nonblocking(true) {
        tracing::warn!(listener = %listener.name, %peer, %error, "cannot hand the connection to a core");
        return;
    }
    let (core, seat) = cores.least_busy();
    let origin = Box::new(Origin {
        peer,
        listener: listener.clone(),
        certificate: None,
        _admission: admission.seated(seat),
    });
    core.spawn(broker.connections.track_future(start_on_core(stream, origin, broker.clone())));
}

/// The listening socket, registered with this thread's reactor for
/// readiness only, so that accepting does not register the new socket.
fn readiness(tcp: std::net::TcpListener) -> std::io::Result<AsyncFd<std::net::TcpListener>> {
    // SAFETY: `register_with_interest` needs the descriptor to stay open
    // and the same for as long as the AsyncFd owns `tcp`. A TcpListener
    // owns its descriptor (an OwnedFd) and closes it only when dropped,
    // which the AsyncFd does after deregistering; `as_raw_fd` always
    // returns that one descriptor. Every accepted connection of the test
    // suite passes through here.
    unsafe { AsyncFd::register_with_interest(tcp, Interest::READABLE) }
        .map_err(std::io::Error::from)
}

/// The next connection, as a socket no reactor knows yet.
async fn accept(
    tcp: &AsyncFd<std::net::TcpListener>,
) -> std::io::Result<(std::net::TcpStream, SocketAddr)> {
    loop {
        let mut ready = tcp.readable().await?;
        if let Ok(accepted) = ready.try_io(|tcp| tcp.get_ref().accept()) {
            return accepted;
        }
    }
}

/// On the core that will serve it: registers the socket with the core's
/// reactor and spawns the connection's task there.
///
/// A short-lived task of its own rather than the connection's first step:
/// the connection's task is then allocated by the core's thread, which
/// keeps an idle connection ~300 bytes smaller than a task allocated by the
/// accepting thread (measured), and a future that registered and then
/// served would store the connection's arguments twice (an async block
/// keeps its moved-from captures), a cost every idle connection would pay.
async fn start_on_core(stream: std::net::TcpStream, origin: Box<Origin>, broker: Arc<Broker>) {
    let stream = match TcpStream::from_std(stream) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(listener = %origin.listener.name, peer = %origin.peer, %error, "cannot register the connection");
            return;
        }
    };
    let tracked = &broker.connections;
    if origin.listener.tls.is_none() && origin.listener.protocol == Protocol::Mqtt {
        // Straight to MQTT: no handshake state in the task of every plain
        // connection.
        tokio::spawn(tracked.track_future(connection::serve(stream, origin, broker.clone())));
    } else {
        tokio::spawn(tracked.track_future(open(stream, origin, broker.clone())));
    }
}

/// Runs the TLS and WebSocket handshakes the listener needs, bounded by
/// the CONNECT timeout, then serves MQTT.
async fn open(stream: TcpStream, mut origin: Box<Origin>, broker: Arc<Broker>) {
    let timeout = Duration::from_secs(broker.config.connect_timeout_secs);
    let peer = origin.peer;
    let listener = origin.listener.clone();
    let Some(tls) = &listener.tls else {
        return upgrade(stream, origin, broker).await;
    };
    match tokio::time::timeout(timeout, tls.accept(stream)).await {
        Ok(Ok(stream)) => {
            origin.certificate = tls.identity(&stream);
            upgrade(stream, origin, broker).await
        }
        Ok(Err(error)) => {
            broker.stats.tls_handshakes_failed.inc();
            listener.count_refusal(crate::listener::Refusal::TlsHandshake);
            tracing::info!(listener = %listener.name, %peer, %error, "TLS handshake failed");
        }
        Err(_) => tracing::info!(listener = %listener.name, %peer, "TLS handshake timed out"),
    }
}

async fn upgrade<S>(stream: S, origin: Box<Origin>, broker: Arc<Broker>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: crate::transport::Transport,
    WsByteStream<S>: crate::transport::Transport,
{
    if origin.listener.protocol == Protocol::Mqtt {
        return connection::serve(stream, origin, broker).await;
    }
    let timeout = Duration::from_secs(broker.config.connect_timeout_secs);
    let handshake = tokio_tungstenite::accept_hdr_async(stream, check_handshake);
    let peer = origin.peer;
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(ws)) => connection::serve(WsByteStream::new(ws), origin, broker).await,
        Ok(Err(error)) => tracing::info!(%peer, %error, "WebSocket handshake failed"),
        Err(_) => tracing::info!(%peer, "WebSocket handshake timed out"),
    }
}
