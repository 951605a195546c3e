//! A minimal MQTT client connection for load generation: CONNECT/CONNACK,
//! SUBSCRIBE/SUBACK, and a read buffer and a write buffer over one
//! `TcpStream` that the publisher and subscriber loops drive.
//!
//! It is deliberately not a general client. There is no background task, no
//! channel and no per-message allocation: the task that owns the connection
//! appends packets to its write buffer and calls [`Conn::pump`], which
//! writes whatever has accumulated in one `write` while also reading, so
//! many PUBLISH packets leave in one system call and the generator stays
//! much lighter than the broker it measures.

use crate::BenchError;
use bytes::BytesMut;
use ferry_mqtt::{
    ByteStr, ConnAck, Connect, Disconnect, Packet, Properties, ProtocolVersion, QoS, ReasonCode,
    Subscribe, SubscriptionOptions,
};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Largest packet accepted from the broker. Benchmark payloads are small;
/// this only bounds the read buffer against a misbehaving broker.
pub const MAX_PACKET_SIZE: u32 = 16 << 20;

/// How much is read per system call at most: enough for hundreds of small
/// packets from a broker streaming to a subscriber.
const READ_CHUNK: usize = 64 * 1024;

/// How much a connection reads per system call at first. A connection that
/// fills it doubles it, up to [`READ_CHUNK`]; one that only ever sees a few
/// acks keeps it small, so thousands of quiet connections cost little.
const FIRST_READ_CHUNK: usize = 2 * 1024;

/// How long CONNACK and SUBACK may take before the run is declared failed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Lets the kernel pick the local port of a socket bound to a source
/// address at `connect`, not at `bind` (IP_BIND_ADDRESS_NO_PORT). Chosen
/// at `bind`, a port must be free of every connection on that address,
/// including the thousands left in TIME_WAIT for a minute by the previous
/// run's closes, so back-to-back `conn` runs failed with EADDRINUSE; chosen
/// at `connect`, it need only make the four-tuple unique.
fn defer_port_choice(socket: &TcpSocket) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the open socket `socket` owns for the whole
    // call; `on` is a live c_int and the length passed is its size.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// One MQTT connection owned by one task.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    version: ProtocolVersion,
    client_id: String,
    read: BytesMut,
    /// Bytes reserved in `read` before each read; see [`FIRST_READ_CHUNK`].
    read_chunk: usize,
    /// Packets waiting to be written; callers cap how much they queue.
    pub write: BytesMut,
}

impl Conn {
    /// Opens a TCP connection, sends CONNECT with a fresh session and no
    /// keep-alive (a QoS 0 subscriber sends nothing for minutes, and pings
    /// would only add noise), and waits for a successful CONNACK. With a
    /// `session_expiry` the session is persistent (MQTT 5 Session Expiry
    /// Interval, or 3.1.1 clean session 0), so the broker must keep what
    /// is queued for it: with durability on, it stores each QoS ≥ 1
    /// message before acknowledging it.
    pub async fn connect(
        broker: SocketAddr,
        client_id: String,
        version: ProtocolVersion,
        session_expiry: u32,
    ) -> Result<(Conn, ConnAck), BenchError> {
        // A 3.1.1 session is persistent exactly when it is not clean.
        let clean_start = version.is_v5() || session_expiry == 0;
        Conn::open(broker, client_id, version, session_expiry, clean_start).await
    }

    /// Like [`Conn::connect`] with a `session_expiry`, but takes up the
    /// session `client_id` left at the broker instead of starting afresh
    /// (clean start 0), so that what the broker kept for it while it was
    /// away is delivered. CONNACK's session present says whether the
    /// broker still had the session, and so its subscriptions.
    pub async fn resume(
        broker: SocketAddr,
        client_id: String,
        version: ProtocolVersion,
        session_expiry: u32,
    ) -> Result<(Conn, ConnAck), BenchError> {
        Conn::open(broker, client_id, version, session_expiry, false).await
    }

    async fn open(
        broker: SocketAddr,
        client_id: String,
        version: ProtocolVersion,
        session_expiry: u32,
        clean_start: bool,
    ) -> Result<(Conn, ConnAck), BenchError> {
        let stream = TcpStream::connect(broker)
            .await
            .map_err(|source| BenchError::Connect { broker: broker.to_string(), source })?;
        Conn::handshake(stream, client_id, version, 0, session_expiry, clean_start).await
    }

    /// Like [`Conn::connect`], but from a chosen local address (port 0, so
    /// the kernel picks the port) and with a keep-alive in seconds. The TCP
    /// connect is bounded by [`HANDSHAKE_TIMEOUT`] as CONNACK is.
    pub async fn connect_from(
        broker: SocketAddr,
        source: Option<IpAddr>,
        client_id: String,
        version: ProtocolVersion,
        keep_alive: u16,
    ) -> Result<(Conn, ConnAck), BenchError> {
        let failed = |source| BenchError::Connect { broker: broker.to_string(), source };
        let socket = if broker.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }
            .map_err(failed)?;
        if let Some(source) = source {
            defer_port_choice(&socket).map_err(failed)?;
            socket.bind(SocketAddr::new(source, 0)).map_err(failed)?;
        }
        let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, socket.connect(broker)).await {
            Ok(stream) => stream.map_err(failed)?,
            Err(_) => {
                return Err(BenchError::Timeout {
                    client: client_id,
                    what: "TCP connect",
                    seconds: HANDSHAKE_TIMEOUT.as_secs(),
                })
            }
        };
        Conn::handshake(stream, client_id, version, keep_alive, 0, true).await
    }

    /// Sends CONNECT over an open stream and waits for a successful
    /// CONNACK; see [`Conn::connect`] for `session_expiry`.
    async fn handshake(
        stream: TcpStream,
        client_id: String,
        version: ProtocolVersion,
        keep_alive: u16,
        session_expiry: u32,
        clean_start: bool,
    ) -> Result<(Conn, ConnAck), BenchError> {
        // Acks and small open-loop publishes must not wait for Nagle.
        stream
            .set_nodelay(true)
            .map_err(|source| BenchError::Io { client: client_id.clone(), source })?;
        let mut conn = Conn {
            stream,
            version,
            client_id,
            read: BytesMut::with_capacity(FIRST_READ_CHUNK),
            read_chunk: FIRST_READ_CHUNK,
            write: BytesMut::new(),
        };
        let mut properties = Properties::default();
        if version.is_v5() && session_expiry > 0 {
            properties.session_expiry_interval = Some(session_expiry);
        }
        let connect = Connect {
            protocol: version,
            clean_start,
            keep_alive,
            properties,
            client_id: ByteStr::from(conn.client_id.as_str()),
            will: None,
            username: None,
            password: None,
            bridge: false,
        };
        conn.queue(&Packet::Connect(Box::new(connect)))?;
        conn.flush().await?;
        let connack = match conn.recv_within(HANDSHAKE_TIMEOUT, "CONNACK").await? {
            Packet::ConnAck(connack) => connack,
            other => return Err(conn.protocol(&other, "expected CONNACK")),
        };
        if connack.reason_code.is_error() {
            return Err(conn.refused("CONNECT", connack.reason_code));
        }
        Ok((conn, connack))
    }

    /// Subscribes to one filter and returns the QoS the broker granted.
    pub async fn subscribe(&mut self, filter: &str, qos: QoS) -> Result<QoS, BenchError> {
        let subscribe = Subscribe {
            packet_id: 1,
            properties: Properties::default(),
            filters: vec![(
                ByteStr::from(filter),
                SubscriptionOptions { qos, ..Default::default() },
            )],
        };
        self.queue(&Packet::Subscribe(subscribe))?;
        self.flush().await?;
        match self.recv_within(HANDSHAKE_TIMEOUT, "SUBACK").await? {
            Packet::SubAck(suback) => match suback.reason_codes.first() {
                Some(&code) if !code.is_error() => {
                    Ok(QoS::from_u8(code as u8).unwrap_or(QoS::AtMostOnce))
                }
                Some(&code) => Err(self.refused("SUBSCRIBE", code)),
                None => Err(self.protocol(&Packet::SubAck(suback), "SUBACK without a reason code")),
            },
            other => Err(self.protocol(&other, "expected SUBACK")),
        }
    }

    /// Frees the read and write buffers of a connection that is to sit
    /// idle, so that holding thousands costs the bench little memory. They
    /// grow again on the next read or write.
    pub fn release_buffers(&mut self) {
        if self.read.is_empty() {
            self.read = BytesMut::new();
        }
        if self.write.is_empty() {
            self.write = BytesMut::new();
        }
    }

    /// The protocol version of this connection.
    pub fn version(&self) -> ProtocolVersion {
        self.version
    }

    /// The client identifier, for error messages.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Appends a packet to the write buffer.
    pub fn queue(&mut self, packet: &Packet) -> Result<(), BenchError> {
        Ok(packet.encode(self.version, &mut self.write)?)
    }

    /// Takes the next complete packet out of the read buffer, if any.
    pub fn next_packet(&mut self) -> Result<Option<Packet>, BenchError> {
        Packet::decode(&mut self.read, self.version, MAX_PACKET_SIZE)
            .map_err(|source| BenchError::Decode { client: self.client_id.clone(), source })
    }

    /// Makes I/O progress: writes from the write buffer (if it holds
    /// anything) and reads into the read buffer, whichever the socket allows
    /// first. Returns after one read or one write.
    pub async fn pump(&mut self) -> Result<(), BenchError> {
        let Conn { stream, read, write, client_id, read_chunk, .. } = self;
        read.reserve(*read_chunk);
        let before = read.len();
        let (mut reader, mut writer) = stream.split();
        // Both futures are cancellation safe: a lost race reads or writes nothing.
        let result = if write.is_empty() {
            reader.read_buf(read).await
        } else {
            tokio::select! {
                written = writer.write_buf(write) => written,
                got = reader.read_buf(read) => got,
            }
        };
        if read.len() - before >= *read_chunk {
            *read_chunk = (*read_chunk * 2).min(READ_CHUNK);
        }
        match result {
            Ok(0) => Err(self.closed()),
            Ok(_) => Ok(()),
            Err(source) => Err(BenchError::Io { client: client_id.clone(), source }),
        }
    }

    /// Reads whatever has already arrived, without waiting.
    pub fn read_arrived(&mut self) -> Result<(), BenchError> {
        loop {
            self.read.reserve(self.read_chunk);
            match self.stream.try_read_buf(&mut self.read) {
                Ok(0) => return Err(self.closed()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(source) => {
                    return Err(BenchError::Io { client: self.client_id.clone(), source })
                }
            }
        }
    }

    fn closed(&self) -> BenchError {
        BenchError::Io {
            client: self.client_id.clone(),
            source: std::io::ErrorKind::UnexpectedEof.into(),
        }
    }

    /// Writes the whole write buffer.
    pub async fn flush(&mut self) -> Result<(), BenchError> {
        let Conn { stream, write, client_id, .. } = self;
        stream
            .write_all_buf(write)
            .await
            .map_err(|source| BenchError::Io { client: client_id.clone(), source })
    }

    /// The next packet, reading as needed.
    pub async fn recv(&mut self) -> Result<Packet, BenchError> {
        loop {
            if let Some(packet) = self.next_packet()? {
                return Ok(packet);
            }
            self.pump().await?;
        }
    }

    async fn recv_within(
        &mut self,
        limit: Duration,
        what: &'static str,
    ) -> Result<Packet, BenchError> {
        match tokio::time::timeout(limit, self.recv()).await {
            Ok(packet) => packet,
            Err(_) => Err(BenchError::Timeout {
                client: self.client_id.clone(),
                what,
                seconds: limit.as_secs(),
            }),
        }
    }

    /// Sends DISCONNECT and closes the socket. Errors are ignored: the
    /// measurements are complete and the broker may already have gone.
    pub async fn disconnect(mut self) {
        if self
            .queue(&Packet::Disconnect(Disconnect {
                reason_code: ReasonCode::NORMAL_DISCONNECTION,
                properties: Properties::default(),
            }))
            .is_ok()
        {
            let _ = self.flush().await;
        }
        let _ = self.stream.shutdown().await;
    }

    /// A protocol error naming this client.
    pub fn protocol(&self, packet: &Packet, why: &'static str) -> BenchError {
        BenchError::Protocol { client: self.client_id.clone(), packet: packet.packet_type(), why }
    }

    /// A refusal naming this client.
    pub fn refused(&self, what: &'static str, code: ReasonCode) -> BenchError {
        BenchError::Refused { client: self.client_id.clone(), what, code }
    }
}
