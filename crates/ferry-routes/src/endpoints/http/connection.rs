//! The http endpoint's connection: one HTTP/1.1 connection, over TCP or
//! TLS, kept alive from batch to batch. Batches go one at a time (the
//! flow waits for each answer), so one connection is all an endpoint
//! needs, and keeping it spares a TCP and TLS handshake per batch.

use super::config::Tls;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use std::io;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

pub type Body = Full<Bytes>;

/// Why an exchange failed before an answer was read.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("cannot connect: {0}")]
    Connect(io::Error),
    #[error("TLS handshake failed: {0}")]
    Tls(io::Error),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// The first bytes of an answer's body kept for the log line of a
/// rejected batch: enough for a JSON error message, not a page.
pub const BODY_HEAD_BYTES: usize = 200;

/// How much of an answer's body is read (and thrown away past its head)
/// so that the connection can carry the next batch: hyper reuses a
/// connection only once the last answer has been read to its end. Past
/// this a receiver is sending far more than any acknowledgement needs; the
/// connection is dropped instead, which bounds the time and bandwidth one
/// batch can cost. The bytes kept stay at `BODY_HEAD_BYTES` either way.
pub const BODY_READ_BYTES_MAX: usize = 64 << 10;

/// The most an answer's status line and headers may take: hyper's read
/// buffer, which defaults to ~400 KiB.
const HEAD_BYTES_MAX: usize = 64 << 10;

/// An answer read to its end (or as far as `BODY_READ_BYTES_MAX`).
pub struct Answer {
    pub status: StatusCode,
    /// The body's first bytes, as many as the exchange asked to keep.
    pub body_head: Vec<u8>,
    /// Its `Content-Type`, when it had one that is text.
    pub content_type: Option<String>,
}

pub struct Connector {
    host: String,
    port: u16,
    tls: Option<(TlsConnector, rustls::pki_types::ServerName<'static>)>,
}

impl Connector {
    pub fn new(host: String, port: u16, tls: Option<Tls>) -> Connector {
        let tls = tls.map(|tls| (TlsConnector::from(tls.config), tls.server_name));
        Connector { host, port, tls }
    }

    pub async fn open(&self) -> Result<SendRequest<Body>, Failure> {
        let tcp =
            TcpStream::connect((self.host.as_str(), self.port)).await.map_err(Failure::Connect)?;
        // A request is written whole and then waited on: Nagle's algorithm
        // would only delay its last segment.
        tcp.set_nodelay(true).map_err(Failure::Connect)?;
        match &self.tls {
            None => handshake(TokioIo::new(tcp)).await,
            Some((connector, name)) => {
                let tls = connector.connect(name.clone(), tcp).await.map_err(Failure::Tls)?;
                handshake(TokioIo::new(tls)).await
            }
        }
    }
}

async fn handshake<T>(io: T) -> Result<SendRequest<Body>, Failure>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, connection) =
        http1::Builder::new().max_buf_size(HEAD_BYTES_MAX).handshake(io).await?;
    // hyper's connection does the socket I/O in its own task; the task
    // ends when the sink drops its sender or the server closes.
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "http endpoint connection ended");
        }
    });
    Ok(sender)
}

/// One kept-alive connection, opened on first use and again whenever the
/// last one was closed or left mid-answer.
pub struct Connection {
    connector: Connector,
    sender: Option<SendRequest<Body>>,
}

impl Connection {
    pub fn new(connector: Connector) -> Connection {
        Connection { connector, sender: None }
    }

    /// Opens a connection unless one is up and idle.
    pub async fn ensure_open(&mut self) -> Result<(), Failure> {
        let sender = self.ready().await?;
        self.sender = Some(sender);
        Ok(())
    }

    /// The idle connection, or a new one. Taken out of `self` so that
    /// whatever fails (an error, the caller's timeout dropping the future)
    /// leaves no half-used connection behind to be reused.
    async fn ready(&mut self) -> Result<SendRequest<Body>, Failure> {
        if let Some(mut sender) = self.sender.take() {
            if sender.ready().await.is_ok() {
                return Ok(sender);
            }
        }
        self.connector.open().await
    }

    /// Sends `request` and reads the answer, keeping its body's first
    /// `BODY_HEAD_BYTES`.
    pub async fn exchange(&mut self, request: Request<Body>) -> Result<Answer, Failure> {
        self.exchange_keeping(request, BODY_HEAD_BYTES).await
    }

    /// [`Connection::exchange`], keeping the body's first `keep` bytes (at
    /// most `BODY_READ_BYTES_MAX`): for an answer that is itself the
    /// payload, such as a device's reply to a message.
    pub async fn exchange_keeping(
        &mut self,
        request: Request<Body>,
        keep: usize,
    ) -> Result<Answer, Failure> {
        let mut sender = self.ready().await?;
        let response = match sender.try_send_request(request).await {
            Ok(response) => response,
            Err(mut error) => match error.take_message() {
                // The request was never written: the kept-alive connection
                // closed just before (a server's idle timeout racing the
                // next batch). Nothing reached the server, so a new
                // connection can carry it with no risk of a duplicate,
                // and the flow need not back off for a routine close.
                Some(request) => {
                    sender = self.connector.open().await?;
                    sender.send_request(request).await?
                }
                None => return Err(error.into_error().into()),
            },
        };
        let status = response.status();
        let content_type = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let (body_head, complete) = read_bounded(response.into_body(), keep).await?;
        if complete {
            self.sender = Some(sender);
        }
        Ok(Answer { status, body_head, content_type })
    }
}

/// Reads a body to its end, keeping its first `keep` bytes; false if it
/// stopped at `BODY_READ_BYTES_MAX` instead.
async fn read_bounded(mut body: Incoming, keep: usize) -> Result<(Vec<u8>, bool), Failure> {
    let mut head = Vec::new();
    let mut read = 0usize;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref() {
            read += data.len();
            let room = keep.saturating_sub(head.len()).min(data.len());
            head.extend_from_slice(&data[..room]);
            if read > BODY_READ_BYTES_MAX {
                return Ok((head, false));
            }
        }
    }
    Ok((head, true))
}
