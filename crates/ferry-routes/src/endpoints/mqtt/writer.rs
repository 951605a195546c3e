//! The writer task of a connection: the one owner of the socket's write
//! half. It writes the sink's groups of PUBLISHes as they come (one write
//! each), the reader's answers, the acknowledgements of commands once the
//! local durable log has them, and PINGREQ when the line is quiet.

use super::keep_alive::{ping_due, LastHeard};
use bytes::{Bytes, BytesMut};
use ferry_mqtt::{Disconnect, Packet, Properties, ProtocolVersion, PubAck, ReasonCode};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Commands (QoS 1) the remote may have unacknowledged at once, announced
/// as our Receive Maximum: each waits for the local durable log, and this
/// bounds how many the writer tracks while they do.
pub(crate) const INBOUND_WINDOW: u16 = 32;

/// What the reader asks the writer to send.
#[derive(Debug)]
pub(crate) enum Control {
    /// An answer to send as it is.
    Packet(Packet),
    /// The acknowledgement of a command, to send once the local broker has
    /// stored it (`stored` answers with the reason code).
    AckWhenStored { packet_id: u16, exactly_once: bool, stored: oneshot::Receiver<ReasonCode> },
}

/// A command's acknowledgement waiting for the local durable log. The log
/// answers in order, so only the oldest needs watching.
struct Waiting {
    packet_id: u16,
    exactly_once: bool,
    stored: oneshot::Receiver<ReasonCode>,
}

enum Event {
    Stored(ReasonCode),
    Control(Option<Control>),
    Data(Option<Bytes>),
    Ping,
}

/// Where the writer gets its work.
pub(crate) struct WriterInputs {
    pub data: mpsc::Receiver<Bytes>,
    pub control: mpsc::Receiver<Control>,
    pub keep_alive: Option<Duration>,
    pub last_heard: LastHeard,
    /// How long one write may block: a peer that stops reading must not
    /// hold the task (and the socket) for ever.
    pub write_timeout: Duration,
    /// For log lines.
    pub endpoint: std::sync::Arc<str>,
}

/// Writes until the sink drops the connection (then DISCONNECT, and
/// `Ok`) or a write fails (`Err` with why).
pub(crate) async fn write_loop(
    mut writing: impl AsyncWrite + Unpin,
    version: ProtocolVersion,
    inputs: WriterInputs,
) -> Result<(), String> {
    let WriterInputs { mut data, mut control, keep_alive, last_heard, write_timeout, endpoint } =
        inputs;
    // Bounded by the control branch's guard below.
    let mut waiting: VecDeque<Waiting> = VecDeque::with_capacity(usize::from(INBOUND_WINDOW));
    // Answers gathered in one turn of the loop, written together; a turn
    // adds at most one packet, so this stays a few bytes.
    let mut answers = BytesMut::new();
    let mut control_open = true;
    let mut last_write = Instant::now();
    let mut last_ping = None;
    loop {
        let ping_at =
            keep_alive.map(|every| ping_due(every, last_write, last_heard.at(), last_ping));
        let has_waiting = !waiting.is_empty();
        let has_room = waiting.len() < usize::from(INBOUND_WINDOW);
        let event = tokio::select! {
            biased;
            reason = oldest_stored(&mut waiting), if has_waiting => Event::Stored(reason),
            item = control.recv(), if control_open && has_room => Event::Control(item),
            group = data.recv() => Event::Data(group),
            () = sleep_until(ping_at), if ping_at.is_some() => Event::Ping,
        };
        match event {
            Event::Stored(reason) => {
                let Some(stored) = waiting.pop_front() else { continue };
                let reason = if version.is_v5() {
                    reason
                } else {
                    if reason.is_error() {
                        // Like the broker's own answer to a 3.1.1 client
                        // (`refuse_publish`): 3.1.1 has no negative ack.
                        tracing::warn!(
                            %endpoint,
                            ?reason,
                            "a command could not be stored locally; MQTT 3.1.1 cannot refuse \
                             it, so it is acknowledged and dropped"
                        );
                    }
                    ReasonCode::Success
                };
                let ack = PubAck::new(stored.packet_id, reason);
                let packet =
                    if stored.exactly_once { Packet::PubRec(ack) } else { Packet::PubAck(ack) };
                encode(&packet, version, &mut answers)?;
            }
            Event::Control(None) => control_open = false,
            Event::Control(Some(Control::Packet(packet))) => {
                encode(&packet, version, &mut answers)?
            }
            Event::Control(Some(Control::AckWhenStored { packet_id, exactly_once, stored })) => {
                waiting.push_back(Waiting { packet_id, exactly_once, stored });
            }
            Event::Data(None) => {
                let disconnect = Packet::Disconnect(Disconnect {
                    reason_code: ReasonCode::NORMAL_DISCONNECTION,
                    properties: Properties::default(),
                });
                encode(&disconnect, version, &mut answers)?;
                write(&mut writing, &answers, write_timeout).await?;
                // Best effort: the socket is dropped right after anyway.
                drop(tokio::time::timeout(write_timeout, writing.shutdown()).await);
                return Ok(());
            }
            Event::Data(Some(group)) => {
                if !answers.is_empty() {
                    write(&mut writing, &answers, write_timeout).await?;
                    answers.clear();
                }
                write(&mut writing, &group, write_timeout).await?;
                last_write = Instant::now();
            }
            Event::Ping => {
                let now = Instant::now();
                if ping_at.is_some_and(|due| due <= now) {
                    encode(&Packet::PingReq, version, &mut answers)?;
                    last_ping = Some(now);
                }
            }
        }
        if !answers.is_empty() {
            write(&mut writing, &answers, write_timeout).await?;
            answers.clear();
            last_write = Instant::now();
        }
    }
}

async fn oldest_stored(waiting: &mut VecDeque<Waiting>) -> ReasonCode {
    match waiting.front_mut() {
        // A dropped answer means the log writer stopped: not stored.
        Some(oldest) => (&mut oldest.stored).await.unwrap_or(ReasonCode::UnspecifiedError),
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

fn encode(packet: &Packet, version: ProtocolVersion, wire: &mut BytesMut) -> Result<(), String> {
    packet
        .encode(version, wire)
        .map_err(|error| format!("cannot encode {:?}: {error}", packet.packet_type()))
}

async fn write(
    writing: &mut (impl AsyncWrite + Unpin),
    bytes: &[u8],
    limit: Duration,
) -> Result<(), String> {
    let written = async {
        writing.write_all(bytes).await?;
        // TLS keeps what it encrypted until flushed; for TCP this is free.
        writing.flush().await
    };
    match tokio::time::timeout(limit, written).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(format!("write failed: {error}")),
        Err(_) => {
            Err(format!("a write blocked for {} s: the remote stopped reading", limit.as_secs()))
        }
    }
}
