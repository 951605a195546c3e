//! One connection to the remote broker: TCP (and TLS), CONNECT and
//! CONNACK, then two tasks that own the socket's halves while the sink
//! sends through channels.
//!
//! Why tasks and not one loop inside `send`: the connection must answer
//! while no `send` runs. The flow may sit idle for minutes between
//! batches, and in that time keep-alive must go out and the remote's
//! commands (the reverse direction) must be stored and acknowledged. So a
//! reader task decodes everything the remote sends and routes it (acks to
//! the sink, commands to the local broker), and a writer task owns the
//! write half: it writes the sink's groups of packets, the reader's
//! answers, and PINGREQ when the line has been quiet. Each is one task per
//! connection; both end when the connection is dropped or fails.
//!
//! Every channel between them is bounded, with the bound said where it is
//! made; none can hold more than the protocol lets be outstanding.

use super::keep_alive::LastHeard;
use super::reader::{read_loop, Ack, Inbound, ReaderOutputs, MAX_INBOUND_PACKET_BYTES};
use super::tls::TlsClient;
use super::writer::{write_loop, Control, WriterInputs, INBOUND_WINDOW};
use crate::Secret;
use bytes::{Bytes, BytesMut};
use ferry_mqtt::{ByteStr, ConnAck, Connect, Packet, Properties, ProtocolVersion, QoS, ReasonCode};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

/// How long each step of opening a connection may take: TCP connect,
/// TLS handshake, CONNACK, SUBACK. A remote slower than this is as good
/// as down; the flow backs off and tries again.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Groups of packets the sink may hand the writer before it waits for
/// the writer to write them: two, so one is written while the next is
/// encoded. A group is at most `GROUP_BYTES_MAX` (`super::MqttSink`).
const DATA_QUEUE: usize = 2;

/// The ack timeout when keep-alive is off: some bound is needed, or a
/// remote that stops answering holds a batch for ever.
const ACK_TIMEOUT_WITHOUT_KEEP_ALIVE: Duration = Duration::from_secs(60);

/// Anything the socket may be: TCP or TLS over TCP.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Why a connection could not be opened, or stopped working.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("cannot connect to {address}: {source}")]
    Connect { address: String, source: std::io::Error },
    #[error("TLS handshake with {address} failed: {source}")]
    Tls { address: String, source: std::io::Error },
    #[error("{what} took longer than {seconds} s")]
    Timeout { what: &'static str, seconds: u64 },
    #[error("the remote refused the connection: {0:?}")]
    Refused(ReasonCode),
    #[error("the remote refused the subscription to {filter}: {reason:?}")]
    SubscribeRefused { filter: String, reason: ReasonCode },
    #[error("the remote broke the protocol: {0}")]
    Protocol(String),
    #[error("connection lost: {0}")]
    Lost(Arc<str>),
    #[error("I/O error on the connection: {0}")]
    Io(#[from] std::io::Error),
}

impl From<ConnectionError> for crate::sink::SinkError {
    fn from(error: ConnectionError) -> Self {
        crate::sink::SinkError::new(error.to_string())
    }
}

/// What opening a connection needs, resolved from the endpoint's settings.
#[derive(Debug)]
pub(crate) struct ConnectOptions {
    pub host: String,
    pub port: u16,
    pub tls: Option<TlsClient>,
    pub version: ProtocolVersion,
    pub client_id: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub keep_alive_secs: u16,
    pub clean_start: bool,
    /// MQTT 5, with `clean_start` false.
    pub session_expiry_secs: u32,
    /// The largest window the sink will use, which bounds the acks queue.
    pub max_inflight: u16,
    pub inbound: Arc<Inbound>,
}

/// What the remote said in CONNACK about what it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RemoteLimits {
    /// QoS 1 and 2 messages it takes unacknowledged at once.
    pub receive_maximum: u16,
    pub maximum_packet_size: u32,
    pub maximum_qos: QoS,
    pub retain_available: bool,
    /// Remembered, not used: an alias saves bytes only on a topic that
    /// repeats, and would tie each PUBLISH to the ones before it.
    pub topic_alias_maximum: u16,
}

impl RemoteLimits {
    fn of(connack: &ConnAck) -> RemoteLimits {
        let properties = &connack.properties;
        RemoteLimits {
            receive_maximum: properties.receive_maximum.unwrap_or(u16::MAX),
            maximum_packet_size: properties.maximum_packet_size.unwrap_or(u32::MAX),
            maximum_qos: match properties.maximum_qos {
                Some(0) => QoS::AtMostOnce,
                Some(1) => QoS::AtLeastOnce,
                _ => QoS::ExactlyOnce,
            },
            retain_available: properties.retain_available != Some(0),
            topic_alias_maximum: properties.topic_alias_maximum.unwrap_or(0),
        }
    }
}

/// An open connection. Dropping it ends both tasks: the reader is
/// aborted, and the writer, its queue closed, sends DISCONNECT and shuts
/// the socket (within its write timeout, so a dead peer cannot hold it).
pub(crate) struct Connection {
    pub version: ProtocolVersion,
    pub session_present: bool,
    pub limits: RemoteLimits,
    /// How long the sink waits for an acknowledgement: twice the
    /// keep-alive, within which a live remote answers a PINGREQ.
    pub ack_timeout: Duration,
    data: mpsc::Sender<Bytes>,
    acks: mpsc::Receiver<Ack>,
    /// Set, with the reason, once either task has ended.
    closed: watch::Receiver<Option<Arc<str>>>,
    reader: AbortHandle,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    /// Connects, sends CONNECT and waits for a successful CONNACK, then
    /// starts the reader and the writer.
    pub(crate) async fn open(options: &ConnectOptions) -> Result<Connection, ConnectionError> {
        let address = format!("{}:{}", options.host, options.port);
        let tcp = within(HANDSHAKE_TIMEOUT, "TCP connect", TcpStream::connect(&address))
            .await?
            .map_err(|source| ConnectionError::Connect { address: address.clone(), source })?;
        // Acks and commands are small and must not wait for Nagle; groups
        // of PUBLISHes are written whole anyway.
        tcp.set_nodelay(true)?;
        let mut stream: Box<dyn Stream> = match &options.tls {
            None => Box::new(tcp),
            Some(tls) => Box::new(
                within(HANDSHAKE_TIMEOUT, "TLS handshake", tls.handshake(tcp))
                    .await?
                    .map_err(|source| ConnectionError::Tls { address: address.clone(), source })?,
            ),
        };
        let version = options.version;
        let mut wire = BytesMut::new();
        encode(&Packet::Connect(Box::new(connect_packet(options))), version, &mut wire)?;
        stream.write_all(&wire).await?;
        stream.flush().await?;
        let mut read = BytesMut::with_capacity(4096);
        let connack =
            within(HANDSHAKE_TIMEOUT, "CONNACK", read_packet(&mut stream, &mut read, version))
                .await??;
        let Packet::ConnAck(connack) = connack else {
            return Err(ConnectionError::Protocol(format!(
                "expected CONNACK, got {:?}",
                connack.packet_type()
            )));
        };
        if connack.reason_code.is_error() {
            return Err(ConnectionError::Refused(connack.reason_code));
        }
        let limits = RemoteLimits::of(&connack);
        // A remote may impose its own keep-alive (MQTT 5 Server Keep Alive).
        let keep_alive_secs =
            connack.properties.server_keep_alive.unwrap_or(options.keep_alive_secs);
        let keep_alive = (keep_alive_secs > 0).then(|| Duration::from_secs(keep_alive_secs.into()));
        let ack_timeout = keep_alive.map_or(ACK_TIMEOUT_WITHOUT_KEEP_ALIVE, |every| every * 2);

        let (reading, writing) = tokio::io::split(stream);
        let (data, data_queue) = mpsc::channel(DATA_QUEUE);
        // Each message in flight has at most one acknowledgement coming at
        // a time (PUBACK; or PUBREC, then PUBCOMP after our PUBREL); after
        // a reconnect, the PUBCOMPs of as many releases (`resume`) and a
        // SUBACK may come beside them. A remote that sends more broke the
        // protocol, and the reader says so rather than wait for room.
        // (Tokio allocates a channel's slots as they fill, not up front.)
        let (acks_out, acks) = mpsc::channel(2 * usize::from(options.max_inflight) + 1);
        // Answers to commands: at most `INBOUND_WINDOW` of them outstanding
        // under MQTT 5; a 3.1.1 remote that sends more waits for room.
        let (control, control_queue) = mpsc::channel::<Control>(usize::from(INBOUND_WINDOW));
        let (closing, closed) = watch::channel(None);
        let closing = Arc::new(closing);
        let last_heard = LastHeard::new();
        let outputs = ReaderOutputs {
            acks: acks_out,
            control,
            inbound: options.inbound.clone(),
            keep_alive,
            last_heard: last_heard.clone(),
        };
        let reader = tokio::spawn({
            let closing = closing.clone();
            async move {
                let ended = read_loop(reading, read, version, outputs).await;
                closing.send_if_modified(|closed| close_with(closed, ended));
            }
        });
        let inputs = WriterInputs {
            data: data_queue,
            control: control_queue,
            keep_alive,
            last_heard,
            write_timeout: ack_timeout,
            endpoint: options.inbound.endpoint.clone(),
        };
        tokio::spawn(async move {
            let ended = write_loop(writing, version, inputs).await;
            closing.send_if_modified(|closed| close_with(closed, ended));
        });
        Ok(Connection {
            version,
            session_present: connack.session_present,
            limits,
            ack_timeout,
            data,
            acks,
            closed,
            reader: reader.abort_handle(),
        })
    }

    /// Hands a group of encoded packets to the writer, which writes it in
    /// one go; waits while the writer is `DATA_QUEUE` groups behind.
    pub(crate) async fn write(&mut self, group: Bytes) -> Result<(), ConnectionError> {
        if self.data.send(group).await.is_err() {
            return Err(self.lost());
        }
        Ok(())
    }

    /// The next acknowledgement, within `timeout`.
    pub(crate) async fn next_ack(&mut self, timeout: Duration) -> Result<Ack, ConnectionError> {
        let ack = tokio::select! {
            // Acks the reader queued before it ended still count.
            biased;
            ack = self.acks.recv() => ack,
            _ = self.closed.wait_for(Option::is_some) => None,
            () = tokio::time::sleep(timeout) => {
                return Err(ConnectionError::Timeout {
                    what: "an acknowledgement",
                    seconds: timeout.as_secs(),
                })
            }
        };
        ack.ok_or_else(|| self.lost())
    }

    /// An acknowledgement already queued, if any: taken in a loop after
    /// `next_ack`, so that one wake-up handles every ack a read brought.
    pub(crate) fn try_ack(&mut self) -> Option<Ack> {
        self.acks.try_recv().ok()
    }

    /// Resolves once the connection has failed, with why.
    pub(crate) fn closed(
        &self,
    ) -> impl std::future::Future<Output = ConnectionError> + Send + 'static {
        let mut closed = self.closed.clone();
        async move {
            match closed.wait_for(Option::is_some).await {
                Ok(reason) => {
                    ConnectionError::Lost(reason.clone().unwrap_or_else(|| "closed".into()))
                }
                Err(_) => ConnectionError::Lost("closed".into()),
            }
        }
    }

    fn lost(&self) -> ConnectionError {
        let reason = self.closed.borrow().clone();
        ConnectionError::Lost(reason.unwrap_or_else(|| "the connection's tasks have ended".into()))
    }
}

/// Keeps the first reason a connection ended for: the other task's end
/// follows from it.
fn close_with(closed: &mut Option<Arc<str>>, reason: Result<(), String>) -> bool {
    if closed.is_some() {
        return false;
    }
    *closed = Some(match reason {
        Ok(()) => "closed by this side".into(),
        Err(reason) => reason.into(),
    });
    true
}

fn connect_packet(options: &ConnectOptions) -> Connect {
    let mut properties = Properties::default();
    if options.version.is_v5() {
        if !options.clean_start && options.session_expiry_secs > 0 {
            properties.session_expiry_interval = Some(options.session_expiry_secs);
        }
        properties.receive_maximum = Some(INBOUND_WINDOW);
        properties.maximum_packet_size = Some(MAX_INBOUND_PACKET_BYTES);
    }
    Connect {
        protocol: options.version,
        clean_start: options.clean_start,
        keep_alive: options.keep_alive_secs,
        properties,
        client_id: ByteStr::from(options.client_id.as_str()),
        will: None,
        username: options.username.as_deref().map(ByteStr::from),
        password: options
            .password
            .as_ref()
            .map(|password| Bytes::from(password.expose().to_owned())),
        bridge: false,
    }
}

pub(crate) fn encode(
    packet: &Packet,
    version: ProtocolVersion,
    wire: &mut BytesMut,
) -> Result<(), ConnectionError> {
    packet.encode(version, wire).map_err(|error| {
        ConnectionError::Protocol(format!("cannot encode {:?}: {error}", packet.packet_type()))
    })
}

/// Reads until one whole packet is in `read` and decodes it.
async fn read_packet(
    stream: &mut Box<dyn Stream>,
    read: &mut BytesMut,
    version: ProtocolVersion,
) -> Result<Packet, ConnectionError> {
    loop {
        match Packet::decode(read, version, MAX_INBOUND_PACKET_BYTES) {
            Ok(Some(packet)) => return Ok(packet),
            Ok(None) => {}
            Err(error) => return Err(ConnectionError::Protocol(error.to_string())),
        }
        if stream.read_buf(read).await? == 0 {
            return Err(ConnectionError::Lost("the remote closed the connection".into()));
        }
    }
}

async fn within<T>(
    limit: Duration,
    what: &'static str,
    future: impl std::future::Future<Output = T>,
) -> Result<T, ConnectionError> {
    tokio::time::timeout(limit, future)
        .await
        .map_err(|_| ConnectionError::Timeout { what, seconds: limit.as_secs() })
}
