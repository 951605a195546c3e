//! Listeners: one accept loop per configured address, each with its own
//! transport (TCP or WebSocket, either with TLS), authentication policy and
//! connection limit; one task per accepted connection, on the core
//! (`cores.rs`) that serves it for its life.

use crate::broker::Broker;
use crate::connection;
use crate::cores::{Cores, Seat};
use crate::tls::Tls;
use crate::websocket::{check_handshake, WsByteStream};
use ferry_auth::ListenerAuth;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

/// Pause after a failed accept (typically EMFILE), so a full file table
/// does not turn the accept loop into a busy loop.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// What a listener speaks on top of TCP (or TLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Mqtt,
    WebSocket,
}

/// One listener's settings and its count of open connections.
#[derive(Debug)]
pub struct Listener {
    /// For logs and metrics: the configured name, or protocol and address.
    pub name: String,
    pub protocol: Protocol,
    pub tls: Option<Arc<Tls>>,
    pub auth: ListenerAuth,
    /// Connections open at once through this listener; 0 for no limit
    /// beyond the broker's.
    pub max_connections: usize,
    open: AtomicUsize,
}

impl Listener {
    pub fn new(
        name: String,
        protocol: Protocol,
        tls: Option<Arc<Tls>>,
        auth: ListenerAuth,
        max_connections: usize,
    ) -> Listener {
        Listener { name, protocol, tls, auth, max_connections, open: AtomicUsize::new(0) }
    }
}

/// Where a connection came from (what authentication looks at) and its
/// place in the limits. Boxed, so that it costs an idle connection's task
/// one pointer.
pub(crate) struct Origin {
    pub peer: SocketAddr,
    pub listener: Arc<Listener>,
    /// The identity in the client's verified certificate (mutual TLS).
    pub certificate: Option<Arc<str>>,
    /// Held, not read: its drop gives the place back.
    pub _admission: Admission,
}

/// A place held in the connection limits of the broker and of one
/// listener; given back when the connection ends, however it ends.
pub(crate) struct Admission {
    broker: Arc<Broker>,
    listener: Arc<Listener>,
    /// The connection's place on the core that serves it.
    seat: Option<Seat>,
}

impl Admission {
    fn seated(mut self, seat: Seat) -> Admission {
        self.seat = Some(seat);
        self
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.listener.open.fetch_sub(1, Ordering::Relaxed);
        self.broker.open_connections.fetch_sub(1, Ordering::Relaxed);
    }
}

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
            _ = shutdown.changed() => return,
            accepted = accept(&tcp) => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let Some(admission) = admit(&broker, &listener, peer) else {
                    continue;
                };
                // MQTT packets are small and latency matters more than
                // segment count; coalescing happens in our write buffer.
                let _ = stream.set_nodelay(true);
                if let Err(error) = stream.set_nonblocking(true) {
                    tracing::warn!(listener = %listener.name, %peer, %error, "cannot hand the connection to a core");
                    continue;
                }
                let (core, seat) = cores.least_busy();
                let origin = Box::new(Origin {
                    peer,
                    listener: listener.clone(),
                    certificate: None,
                    _admission: admission.seated(seat),
                });
                core.spawn(broker.connections.track_future(start_on_core(
                    stream,
                    origin,
                    broker.clone(),
                )));
            }
            Err(error) => {
                tracing::warn!(listener = %listener.name, %error, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
            }
        }
    }
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

/// Takes a place for a new connection, or refuses it: the broker's and
/// the listener's connection limits and the broker's rate of new
/// connections. A refused socket is closed at once, before it costs a
/// task or a handshake.
pub(crate) fn admit(
    broker: &Arc<Broker>,
    listener: &Arc<Listener>,
    peer: SocketAddr,
) -> Option<Admission> {
    let broker_open = broker.open_connections.fetch_add(1, Ordering::Relaxed);
    let listener_open = listener.open.fetch_add(1, Ordering::Relaxed);
    let admission = Admission { broker: broker.clone(), listener: listener.clone(), seat: None };
    let limit = broker.config.max_connections;
    let refusal = if limit != 0 && broker_open >= limit {
        Some("the broker's max_connections")
    } else if listener.max_connections != 0 && listener_open >= listener.max_connections {
        Some("the listener's max_connections")
    } else if broker.memory_high.load(Ordering::Relaxed) {
        Some("the memory watermark (max_memory_bytes)")
    } else if broker.config.max_connection_rate != 0
        && !broker.connection_rate.lock().try_take(1.0, Instant::now())
    {
        Some("max_connection_rate")
    } else {
        None
    };
    match refusal {
        None => Some(admission),
        Some(limit) => {
            broker.stats.connections_refused.inc();
            broker.shed_log.connection_refused(&listener.name, peer, limit);
            None
        }
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
