//! MQTT over WebSocket (MQTT 5 §6): each binary frame carries a slice of
//! the MQTT byte stream. `WsByteStream` turns a WebSocket back into a byte
//! stream so that `connection.rs` serves it exactly like TCP.

use bytes::{Buf, Bytes};
use futures_util::{Sink, Stream};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// The path MQTT clients connect to, as in Mosquitto, EMQX and HiveMQ.
pub const MQTT_PATH: &str = "/mqtt";

pub struct WsByteStream<S> {
    ws: WebSocketStream<S>,
    /// The unread rest of the last binary frame.
    pending: Bytes,
}

impl<S> WsByteStream<S> {
    pub fn new(ws: WebSocketStream<S>) -> Self {
        WsByteStream { ws, pending: Bytes::new() }
    }
}

/// Handshake check: only `/mqtt`, and answer with the `mqtt` subprotocol
/// when the client offers it (clients such as paho require the echo).
#[allow(clippy::result_large_err)] // the signature is tungstenite's
pub fn check_handshake(
    request: &Request,
    mut response: Response,
) -> Result<Response, ErrorResponse> {
    if request.uri().path() != MQTT_PATH {
        let mut refusal = ErrorResponse::new(Some(format!("MQTT is served on {MQTT_PATH}")));
        *refusal.status_mut() = StatusCode::NOT_FOUND;
        return Err(refusal);
    }
    let offers_mqtt = request
        .headers()
        .get_all("Sec-WebSocket-Protocol")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|protocol| protocol.trim().eq_ignore_ascii_case("mqtt"));
    if offers_mqtt {
        response.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static("mqtt"));
    }
    Ok(response)
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for WsByteStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                buf.put_slice(&self.pending[..n]);
                self.pending.advance(n);
                return Poll::Ready(Ok(()));
            }
            match ready!(Pin::new(&mut self.ws).poll_next(cx)) {
                Some(Ok(Message::Binary(data))) => self.pending = data,
                // Ping is answered by tungstenite itself; text frames are not
                // MQTT (§6: "MUST close") but ignoring them is harmless.
                Some(Ok(
                    Message::Ping(_) | Message::Pong(_) | Message::Text(_) | Message::Frame(_),
                )) => {}
                Some(Ok(Message::Close(_))) | None => return Poll::Ready(Ok(())),
                Some(Err(error)) => return Poll::Ready(Err(io::Error::other(error))),
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for WsByteStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let ws = Pin::new(&mut self.ws);
        ready!(ws.poll_ready(cx)).map_err(io::Error::other)?;
        Pin::new(&mut self.ws)
            .start_send(Message::Binary(Bytes::copy_from_slice(buf)))
            .map_err(io::Error::other)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.ws).poll_flush(cx).map_err(io::Error::other)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.ws).poll_close(cx).map_err(io::Error::other)
    }
}
