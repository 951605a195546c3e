//! What a connection runs over: any byte stream, plus the one thing TCP can
//! do that a generic stream cannot — say "readable" without being handed a
//! buffer — which is what lets an idle connection hold no read buffer.

use crate::websocket::WsByteStream;
use std::io;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Whether written bytes can wait inside the transport until flushed
    /// (a WebSocket sink does; a TCP socket does not).
    const BUFFERS_WRITES: bool = true;

    /// Ready when a read would make progress. Transports that cannot tell
    /// answer Ready at once and are read with a buffer in place.
    fn poll_read_ready(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Whether an idle connection over this transport can park
    /// (`park.rs`): only one whose state is the socket alone, so that
    /// readiness says all there is to know. TLS and WebSocket connections
    /// hold buffered state of their own and keep their task.
    const PARKS: bool = false;

    /// The TCP socket alone, which a parking connection hands to the lot.
    /// Transports that park give it; the others give themselves back.
    fn into_tcp(self) -> Result<TcpStream, Self>
    where
        Self: Sized,
    {
        Err(self)
    }
}

impl Transport for TcpStream {
    const BUFFERS_WRITES: bool = false;

    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }

    const PARKS: bool = true;

    fn into_tcp(self) -> Result<TcpStream, Self> {
        Ok(self)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Transport for WsByteStream<S> {}

/// rustls holds written records until they are flushed.
impl Transport for tokio_rustls::server::TlsStream<TcpStream> {}
