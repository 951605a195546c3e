//! One client connection: reads and decodes packets, applies them to the
//! broker, and writes what the session has for the client.
//!
//! One task per connection owns both directions of the socket, so all of a
//! client's state is touched by one thread at a time and needs no lock of
//! its own. The task reads, writes and wakes for new messages in a single
//! `select!`; it stops reading while its write buffer is full, which pushes
//! back on a client that publishes faster than it consumes.

use crate::broker::Broker;
use crate::client::Client;
use crate::close::Close;
use bytes::BytesMut;
use ferry_mqtt::{Disconnect, Packet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Smallest read buffer: an idle connection holds no more than this, which
/// keeps memory per idle client small; it grows while reads fill it.
const READ_CHUNK_MIN_BYTES: usize = 256;
const READ_CHUNK_MAX_BYTES: usize = 64 * 1024;
/// How long a closing connection may spend flushing its last packets.
const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Serves one accepted connection until it closes. Never panics on input:
/// every malformed packet ends in `Close` for this connection only.
pub async fn serve<S>(stream: S, peer: SocketAddr, broker: Arc<Broker>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    broker.stats.connections_total.inc();
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut rbuf = BytesMut::new();
    let mut wbuf = BytesMut::new();

    let connect_timeout = Duration::from_secs(broker.config.connect_timeout_secs);
    let accepted = tokio::time::timeout(
        connect_timeout,
        Client::accept(&broker, peer, &mut reader, &mut rbuf, &mut wbuf),
    )
    .await;
    let mut client = match accepted {
        Ok(Ok(client)) => client,
        Ok(Err(close)) => {
            close.log(peer, None);
            flush(&mut writer, &mut wbuf).await;
            linger(&mut reader, &mut writer, &mut rbuf).await;
            return;
        }
        Err(_) => {
            tracing::info!(%peer, "closing connection: no CONNECT within {connect_timeout:?}");
            return;
        }
    };
    flush(&mut writer, &mut wbuf).await;
    // Most connections then sit idle: hold no write buffer while they do.
    wbuf = BytesMut::new();
    broker.stats.clients_connected.inc();
    let close = run(&mut client, &broker, &mut reader, &mut writer, &mut rbuf, &mut wbuf).await;
    broker.stats.clients_connected.sub(1);

    if let Some(reason) = close.reason_code() {
        if client.version.is_v5() {
            let disconnect = Packet::Disconnect(Disconnect { reason_code: reason, properties: client.problem_properties(close.explanation()) });
            client.encode(&disconnect, &mut wbuf);
        }
    }
    close.log(peer, Some(&client.client_id));
    let server_closed = close.reason_code().is_some();
    let _ = tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, flush(&mut writer, &mut wbuf)).await;
    client.finish(&broker, close);
    if server_closed {
        linger(&mut reader, &mut writer, &mut rbuf).await;
    }
}

async fn run<R, W>(
    client: &mut Client,
    broker: &Arc<Broker>,
    reader: &mut R,
    writer: &mut W,
    rbuf: &mut BytesMut,
    wbuf: &mut BytesMut,
) -> Close
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let write_cap = broker.config.write_buffer_bytes;
    let mut read_chunk = READ_CHUNK_MIN_BYTES;
    let mut last_read = Instant::now();
    let keep_alive = client.keep_alive_timeout();
    let keep_alive_timer = tokio::time::sleep(keep_alive.unwrap_or(Duration::from_secs(86_400)));
    tokio::pin!(keep_alive_timer);
    // Transports that buffer inside (WebSocket) need a flush after a write;
    // for TCP the flush completes at once.
    let mut unflushed = false;

    // Messages that waited for this session while it was offline, and
    // exchanges left in flight by the previous connection, go out first.
    if let Err(close) = client.resend_inflight(broker, wbuf).and_then(|()| client.drain(broker, wbuf)) {
        return close;
    }

    loop {
        if rbuf.capacity() - rbuf.len() < READ_CHUNK_MIN_BYTES {
            rbuf.reserve(read_chunk);
        }
        tokio::select! {
            biased;
            result = send(writer, wbuf), if !wbuf.is_empty() || unflushed => match result {
                Err(_) | Ok(Sent::Wrote(0)) => return Close::Io,
                Ok(Sent::Flushed) => unflushed = false,
                Ok(Sent::Wrote(written)) => {
                    unflushed = true;
                    broker.stats.bytes_sent.add(written as u64);
                    let _ = wbuf.split_to(written);
                    if wbuf.is_empty() && wbuf.capacity() > write_cap {
                        *wbuf = BytesMut::new();
                    }
                    if let Err(close) = client.drain(broker, wbuf) {
                        return close;
                    }
                }
            },
            result = reader.read_buf(rbuf), if wbuf.len() < write_cap => match result {
                Ok(0) if !rbuf.is_empty() => return Close::Truncated(rbuf.len()),
                Ok(0) => return Close::PeerClosed,
                Err(_) => return Close::Io,
                Ok(read) => {
                    last_read = Instant::now();
                    broker.stats.bytes_received.add(read as u64);
                    read_chunk = if rbuf.len() == rbuf.capacity() {
                        (read_chunk * 2).min(READ_CHUNK_MAX_BYTES)
                    } else {
                        READ_CHUNK_MIN_BYTES
                    };
                    loop {
                        match Packet::decode(rbuf, client.version, broker.config.max_packet_size_bytes) {
                            Ok(Some(packet)) => {
                                broker.stats.messages_received.inc();
                                if let Err(close) = client.handle(broker, packet, wbuf) {
                                    return close;
                                }
                            }
                            Ok(None) => break,
                            Err(error) => return Close::Malformed(error),
                        }
                    }
                    if rbuf.is_empty() && rbuf.capacity() > READ_CHUNK_MAX_BYTES {
                        *rbuf = BytesMut::new();
                    }
                    if let Err(close) = client.drain(broker, wbuf) {
                        return close;
                    }
                }
            },
            () = client.session.wake.notified() => {
                if let Err(close) = client.drain(broker, wbuf) {
                    return close;
                }
            },
            () = &mut keep_alive_timer, if keep_alive.is_some() => {
                let Some(timeout) = keep_alive else { continue };
                let deadline = last_read + timeout;
                if Instant::now() >= deadline {
                    return Close::KeepAliveTimeout;
                }
                keep_alive_timer.as_mut().reset(deadline.into());
            },
        }
    }
}

enum Sent {
    Wrote(usize),
    Flushed,
}

/// One step of output: write what is buffered, or, once it is all
/// written, flush. Cancel-safe, as `select!` needs: a dropped write wrote
/// nothing, and a dropped flush leaves the bytes to the next flush.
async fn send<W: AsyncWrite + Unpin>(writer: &mut W, wbuf: &[u8]) -> std::io::Result<Sent> {
    if wbuf.is_empty() {
        writer.flush().await?;
        Ok(Sent::Flushed)
    } else {
        writer.write(wbuf).await.map(Sent::Wrote)
    }
}

/// Closes our side and discards what the client still sends until it
/// closes too (or a short timeout). Closing a socket with unread input makes
/// the kernel send RST, and a client still writing would then fail with
/// "broken pipe" before reading the DISCONNECT that explains why.
async fn linger<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(reader: &mut R, writer: &mut W, rbuf: &mut BytesMut) {
    let _ = writer.shutdown().await;
    let drain = async {
        loop {
            rbuf.clear();
            rbuf.reserve(READ_CHUNK_MIN_BYTES);
            match reader.read_buf(rbuf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, drain).await;
}

/// Writes everything in `wbuf`, ignoring errors: used when the connection
/// is ending anyway.
async fn flush<W: AsyncWrite + Unpin>(writer: &mut W, wbuf: &mut BytesMut) {
    if !wbuf.is_empty() {
        let _ = writer.write_all(wbuf).await;
        wbuf.clear();
    }
    let _ = writer.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory per idle connection is a product requirement (under 2 KB;
    /// Mosquitto needs about 0.7 KB). The task's future, the client and the
    /// session are most of it, so their sizes are held to a budget here and
    /// a field that bloats them (an unboxed message, say) fails this test.
    #[tokio::test]
    async fn idle_connection_state_fits_its_budget() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let broker = Broker::new(Default::default());
        let future = serve(stream, "127.0.0.1:1".parse().unwrap(), broker);
        assert!(std::mem::size_of_val(&future) <= 1280, "serve future is {} bytes", std::mem::size_of_val(&future));
        assert!(std::mem::size_of::<Client>() <= 192, "Client is {} bytes", std::mem::size_of::<Client>());
        let session = std::mem::size_of::<crate::session::Session>();
        assert!(session <= 320, "Session is {session} bytes");
    }
}
