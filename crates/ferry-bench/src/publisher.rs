//! The publishing side of a load connection: a fixed number of messages at
//! one QoS, closed loop (as fast as acknowledged) or open loop (on a fixed
//! schedule), with a bounded in-flight window, timing each acknowledgement.

use crate::client::Conn;
use crate::histogram::SharedLatency;
use crate::pacer::Pacer;
use crate::payload::Header;
use crate::timeline::Progress;
use crate::{clock, BenchError};
use bytes::{Bytes, BytesMut};
use ferry_mqtt::{
    publish_packet_id_offset, ByteStr, Packet, Properties, ProtocolVersion, PubAck, Publish, QoS,
    ReasonCode,
};
use std::sync::Arc;
use tokio::sync::{watch, Barrier};

/// How many bytes of packets may wait in the write buffer. Large enough for
/// hundreds of small PUBLISH packets per `write`, small enough that a slow
/// broker pushes back through TCP instead of through our memory.
pub const WRITE_BUFFER_CAP: usize = 64 * 1024;

/// When messages are sent, relative to the start the [`Gate`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Each message as soon as the in-flight window and the socket allow,
    /// from `offset_ns` after the start on (a ramp-up staggers the
    /// publishers); its timestamp is the moment it is queued.
    ClosedLoop { offset_ns: u64 },
    /// Message `k` is due at `start + offset_ns + k * interval_ns` on the
    /// process clock and carries that due time, even when sent late, so a
    /// stall shows in the latency of every message it delayed (no
    /// coordinated omission).
    OpenLoop { offset_ns: u64, interval_ns: u64 },
}

/// Holds the publishers of a run back until every one is set up (timer,
/// template, buffers), then tells them all when the schedule starts.
/// Setting up a thousand publishers takes longer than the first gaps of an
/// open-loop schedule, and a publisher that began late would charge its
/// own setup to the broker as latency.
#[derive(Debug, Clone)]
pub struct Gate {
    ready: Arc<Barrier>,
    start: watch::Receiver<u64>,
}

/// The scenario's side of a [`Gate`].
#[derive(Debug)]
pub struct GateKeeper {
    ready: Arc<Barrier>,
    start: watch::Sender<u64>,
}

/// A gate for `publishers` publishers.
pub fn gate(publishers: usize) -> (GateKeeper, Gate) {
    let ready = Arc::new(Barrier::new(publishers + 1));
    let (start, receiver) = watch::channel(0);
    (GateKeeper { ready: Arc::clone(&ready), start }, Gate { ready, start: receiver })
}

impl GateKeeper {
    /// Waits until every publisher is ready and starts them `margin_ns`
    /// from now (time for them all to wake); returns the start.
    pub async fn open(&self, margin_ns: u64) -> u64 {
        self.ready.wait().await;
        let start = clock::now_ns().max(1) + margin_ns;
        // Publishers that failed have stopped listening; the rest start.
        let _ = self.start.send(start);
        start
    }
}

impl Gate {
    /// Reports ready and waits for the start.
    async fn pass(mut self) -> Result<u64, BenchError> {
        self.ready.wait().await;
        let start = self.start.wait_for(|&start| start != 0).await.map_err(|_| {
            BenchError::Task("the run was abandoned before publishing started".into())
        })?;
        Ok(*start)
    }
}

/// What one publisher is to do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Written into every payload; the subscriber's tracker index.
    pub id: u32,
    pub topic: String,
    pub qos: QoS,
    /// Payload bytes, at least [`crate::payload::HEADER_LEN`].
    pub payload_size: usize,
    pub count: u32,
    /// Most QoS 1/2 messages awaiting their acknowledgement at once.
    pub inflight: u16,
    pub schedule: Schedule,
    /// Where the messages written are counted for the live view.
    pub progress: Arc<Progress>,
    /// Where the acknowledgement latency of each QoS 1/2 message is
    /// recorded: from its send time to its PUBACK or PUBREC, what the
    /// broker makes a publisher wait (a durable one, for its fsync).
    pub ack_latency: Arc<SharedLatency>,
    /// Where the publisher waits for the others and the start.
    pub gate: Gate,
}

/// What one publisher did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// Messages written to the socket.
    pub sent: u32,
    /// When the last message was sent and, for QoS 1/2, acknowledged.
    pub done_ns: u64,
    /// When the last message was handed to the socket's write buffer.
    pub last_queued_ns: u64,
    /// The send time stamped in the last message: when it was queued
    /// (closed loop) or due (open loop).
    pub last_stamp_ns: u64,
}

/// Where a packet identifier stands in the QoS 1/2 exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdState {
    Free,
    /// PUBLISH sent; PUBACK (QoS 1) or PUBREC (QoS 2) expected.
    Published,
    /// PUBREL sent; PUBCOMP expected.
    Released,
}

/// Sends the plan's messages on `conn` and waits for every acknowledgement.
///
/// `receive_maximum` is the broker's limit from CONNACK (MQTT 5); the window
/// is the smaller of it and the plan's.
pub async fn run(
    conn: &mut Conn,
    plan: &Plan,
    receive_maximum: Option<u16>,
) -> Result<Outcome, BenchError> {
    let window = match plan.qos {
        QoS::AtMostOnce => u32::MAX,
        _ => u32::from(plan.inflight.min(receive_maximum.unwrap_or(u16::MAX)).max(1)),
    };
    // Set up first, and report ready even if that failed, so that the
    // others are not held at the gate by a publisher that is gone.
    let setup = Template::new(conn.version(), plan).and_then(|template| {
        let pacer = match plan.schedule {
            Schedule::OpenLoop { .. } => Some(Pacer::new().map_err(BenchError::Timer)?),
            Schedule::ClosedLoop { .. } => None,
        };
        Ok((template, pacer))
    });
    // At most `window` ids are taken at once; cycling through twice as
    // many finds a free one within a few steps.
    let id_space = if plan.qos == QoS::AtMostOnce { 0 } else { (window * 2).min(0xFFFF) as u16 };
    let mut ids = vec![IdState::Free; usize::from(id_space) + 1];
    // What the ack of each id is timed from: the send time of the message
    // published with it, as stamped in its payload.
    let mut sent_at = vec![0u64; ids.len()];
    let mut ack_latency = plan.ack_latency.recorder();
    let start_ns = plan.gate.clone().pass().await?;
    let (template, mut pacer) = setup?;
    let mut next_id: u16 = 0;
    let mut inflight: u32 = 0;
    let mut sent: u32 = 0;
    let (mut last_queued_ns, mut last_stamp_ns) = (0, 0);
    if let Schedule::ClosedLoop { offset_ns } = plan.schedule {
        let begin = start_ns + offset_ns;
        if begin > clock::now_ns() {
            tokio::time::sleep_until(clock::instant_of(begin).into()).await;
        }
    }

    loop {
        // The packets of one pass were read together: the clock is read
        // once, at the first ack, rather than once per ack.
        let mut arrived_ns = None;
        let mut record_ack = |id: u16| {
            let now = *arrived_ns.get_or_insert_with(clock::now_ns);
            ack_latency.record_ns(now.saturating_sub(sent_at[usize::from(id)]));
        };
        while let Some(packet) = conn.next_packet()? {
            match (&packet, plan.qos) {
                (Packet::PubAck(ack), QoS::AtLeastOnce) => {
                    let published = state(&ids, ack.packet_id) == Some(IdState::Published);
                    check_ack(conn, &packet, ack, published)?;
                    record_ack(ack.packet_id);
                    ids[usize::from(ack.packet_id)] = IdState::Free;
                    inflight -= 1;
                }
                (Packet::PubComp(ack), QoS::ExactlyOnce) => {
                    let released = state(&ids, ack.packet_id) == Some(IdState::Released);
                    check_ack(conn, &packet, ack, released)?;
                    ids[usize::from(ack.packet_id)] = IdState::Free;
                    inflight -= 1;
                }
                (Packet::PubRec(ack), QoS::ExactlyOnce) => {
                    let published = state(&ids, ack.packet_id) == Some(IdState::Published);
                    check_ack(conn, &packet, ack, published)?;
                    record_ack(ack.packet_id);
                    ids[usize::from(ack.packet_id)] = IdState::Released;
                    conn.queue(&Packet::PubRel(PubAck::new(ack.packet_id, ReasonCode::Success)))?;
                }
                (Packet::PingResp, _) => {}
                _ => {
                    return Err(conn.protocol(&packet, "a publisher expects only acknowledgements"))
                }
            }
        }

        // In closed loop, wait until a quarter of the window is free before
        // refilling: a broker that acks one message per segment would
        // otherwise cost us one write per message.
        let refill = match plan.schedule {
            Schedule::ClosedLoop { .. } => {
                inflight == 0 || window - inflight >= (window / 4).max(1)
            }
            Schedule::OpenLoop { .. } => true,
        };
        let mut next_due = None;
        let sent_before = sent;
        while refill
            && sent < plan.count
            && inflight < window
            && conn.write.len() < WRITE_BUFFER_CAP
        {
            let sent_ns = match plan.schedule {
                Schedule::ClosedLoop { .. } => clock::now_ns(),
                Schedule::OpenLoop { offset_ns, interval_ns } => {
                    let due = start_ns + offset_ns + u64::from(sent) * interval_ns;
                    if due > clock::now_ns() {
                        next_due = Some(due);
                        break;
                    }
                    due
                }
            };
            let packet_id = if plan.qos == QoS::AtMostOnce {
                0
            } else {
                loop {
                    next_id = if next_id >= id_space { 1 } else { next_id + 1 };
                    if ids[usize::from(next_id)] == IdState::Free {
                        break;
                    }
                }
                ids[usize::from(next_id)] = IdState::Published;
                sent_at[usize::from(next_id)] = sent_ns;
                inflight += 1;
                next_id
            };
            template.append_to(
                &mut conn.write,
                Header { publisher: plan.id, seq: sent, sent_ns },
                packet_id,
            );
            sent += 1;
            last_stamp_ns = sent_ns;
        }
        if sent > sent_before {
            last_queued_ns = clock::now_ns();
        }
        plan.progress.add_sent(u64::from(sent - sent_before));

        if sent == plan.count && inflight == 0 && conn.write.is_empty() {
            let done_ns = clock::now_ns();
            return Ok(Outcome { sent, done_ns, last_queued_ns, last_stamp_ns });
        }
        match (next_due, pacer.as_mut()) {
            // Nothing to write, the next message is not due yet (so the
            // window has room) and no ack is awaited: sleep until it is due.
            // Waking for nothing else keeps a paced publisher light, and the
            // generator shares the machine with the broker it measures.
            (Some(due), Some(pacer)) if conn.write.is_empty() && inflight == 0 => {
                pacer.sleep_until(due).await.map_err(BenchError::Timer)?;
                conn.read_arrived()?;
            }
            // The same with acks awaited: wake for them too, or an ack would
            // be timed at the next due time, up to a whole publisher interval
            // late (10 ms for 100 pairs at 10,000 msg/s). That costs a few
            // percent more bench CPU in p2p.
            (Some(due), Some(pacer)) if conn.write.is_empty() => {
                tokio::select! {
                    slept = pacer.sleep_until(due) => slept.map_err(BenchError::Timer)?,
                    pumped = conn.pump() => pumped?,
                }
            }
            _ => conn.pump().await?,
        }
    }
}

/// Where packet identifier `id` stands; `None` if it is outside the ids
/// this publisher uses.
fn state(ids: &[IdState], id: u16) -> Option<IdState> {
    ids.get(usize::from(id)).copied()
}

fn check_ack(conn: &Conn, packet: &Packet, ack: &PubAck, expected: bool) -> Result<(), BenchError> {
    if !expected {
        return Err(conn.protocol(packet, "acknowledges a packet identifier not awaiting it"));
    }
    if ack.reason_code.is_error() {
        return Err(conn.refused("PUBLISH", ack.reason_code));
    }
    Ok(())
}

/// The PUBLISH packet encoded once by the codec; each message copies it and
/// patches the packet identifier and the payload header in place.
struct Template {
    bytes: Bytes,
    id_offset: Option<usize>,
    payload_offset: usize,
}

impl Template {
    fn new(version: ProtocolVersion, plan: &Plan) -> Result<Template, BenchError> {
        let publish = Publish {
            dup: false,
            qos: plan.qos,
            retain: false,
            topic: ByteStr::from(plan.topic.as_str()),
            packet_id: 0,
            properties: Properties::default(),
            payload: Bytes::from(vec![0u8; plan.payload_size]),
        };
        let mut encoded = BytesMut::new();
        Packet::Publish(publish).encode(version, &mut encoded)?;
        let bytes = encoded.freeze();
        Ok(Template {
            id_offset: publish_packet_id_offset(&bytes),
            payload_offset: bytes.len() - plan.payload_size,
            bytes,
        })
    }

    fn append_to(&self, buf: &mut BytesMut, header: Header, packet_id: u16) {
        let start = buf.len();
        buf.extend_from_slice(&self.bytes);
        let packet = &mut buf[start..];
        if let Some(offset) = self.id_offset {
            packet[offset..offset + 2].copy_from_slice(&packet_id.to_be_bytes());
        }
        header.write(&mut packet[self.payload_offset..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Latency;
    use ferry_mqtt::ConnAck;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// The patched template must be exactly what the codec would encode.
    #[test]
    fn template_matches_the_codec() {
        for version in [ProtocolVersion::V311, ProtocolVersion::V5] {
            for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
                let plan = Plan {
                    id: 3,
                    topic: "bench/3".into(),
                    qos,
                    payload_size: 20,
                    count: 1,
                    inflight: 1,
                    schedule: Schedule::ClosedLoop { offset_ns: 0 },
                    progress: Progress::new(),
                    ack_latency: SharedLatency::new(),
                    gate: gate(1).1,
                };
                let template = Template::new(version, &plan).unwrap();
                let header = Header { publisher: 3, seq: 9, sent_ns: 12345 };
                let packet_id = if qos == QoS::AtMostOnce { 0 } else { 0x0102 };
                let mut wire = bytes::BytesMut::new();
                template.append_to(&mut wire, header, packet_id);

                let mut payload = vec![0u8; 20];
                header.write(&mut payload);
                let expected = Packet::Publish(Publish {
                    dup: false,
                    qos,
                    retain: false,
                    topic: ByteStr::from("bench/3"),
                    packet_id,
                    properties: Properties::default(),
                    payload: payload.into(),
                });
                let mut want = bytes::BytesMut::new();
                expected.encode(version, &mut want).unwrap();
                assert_eq!(wire, want, "{version:?} {qos:?}");
            }
        }
    }

    /// Accepts one connection and answers it as a broker answers a
    /// publisher, each PUBACK or PUBREC `delay` after its PUBLISH is read.
    async fn acking_broker(listener: TcpListener, version: ProtocolVersion, delay: Duration) {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut read = BytesMut::new();
        loop {
            while let Some(packet) = Packet::decode(&mut read, version, u32::MAX).unwrap() {
                let ok = |id| PubAck::new(id, ReasonCode::Success);
                let reply = match packet {
                    Packet::Connect(_) => Packet::ConnAck(ConnAck {
                        session_present: false,
                        reason_code: ReasonCode::Success,
                        properties: Properties::default(),
                    }),
                    Packet::Publish(publish) if publish.qos == QoS::AtMostOnce => continue,
                    Packet::Publish(publish) => {
                        tokio::time::sleep(delay).await;
                        match publish.qos {
                            QoS::AtLeastOnce => Packet::PubAck(ok(publish.packet_id)),
                            _ => Packet::PubRec(ok(publish.packet_id)),
                        }
                    }
                    Packet::PubRel(rel) => Packet::PubComp(ok(rel.packet_id)),
                    other => panic!("a publisher sent {other:?}"),
                };
                let mut wire = BytesMut::new();
                reply.encode(version, &mut wire).unwrap();
                stream.write_all(&wire).await.unwrap();
            }
            if stream.read_buf(&mut read).await.unwrap() == 0 {
                return;
            }
        }
    }

    /// Runs one publisher against [`acking_broker`] and returns the
    /// latencies of the acks it received.
    async fn acks_of(qos: QoS, count: u32, schedule: Schedule, delay: Duration) -> Latency {
        let version = ProtocolVersion::V5;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let broker = listener.local_addr().unwrap();
        let broker_task = tokio::spawn(acking_broker(listener, version, delay));
        let (mut conn, _) = Conn::connect(broker, "acks".into(), version, 0).await.unwrap();
        let (keeper, gate) = gate(1);
        let ack_latency = SharedLatency::new();
        let plan = Plan {
            id: 0,
            topic: "bench/0".into(),
            qos,
            payload_size: 16,
            count,
            inflight: 4,
            schedule,
            progress: Progress::new(),
            ack_latency: Arc::clone(&ack_latency),
            gate,
        };
        let (outcome, _) = tokio::join!(run(&mut conn, &plan, None), keeper.open(0));
        assert_eq!(outcome.unwrap().sent, count);
        drop(conn);
        broker_task.await.unwrap();
        ack_latency.snapshot()
    }

    #[tokio::test]
    async fn each_puback_or_pubrec_is_timed_once_from_the_send_time() {
        let delay = Duration::from_millis(5);
        let closed = Schedule::ClosedLoop { offset_ns: 0 };
        for qos in [QoS::AtLeastOnce, QoS::ExactlyOnce] {
            let acks = acks_of(qos, 20, closed, delay).await.summary();
            assert_eq!(acks.count, 20, "{qos:?}: PUBCOMP is not timed");
            assert!(acks.min_us >= 5_000.0, "{qos:?}: no ack before the broker sent it: {acks:?}");
        }
        assert!(acks_of(QoS::AtMostOnce, 20, closed, delay).await.is_empty(), "nothing acked");
    }

    /// An open-loop publisher sleeps between due times; the acks that come
    /// meanwhile must be timed when they arrive, not at the next due time.
    #[tokio::test]
    async fn open_loop_acks_are_timed_on_arrival() {
        let schedule = Schedule::OpenLoop { offset_ns: 0, interval_ns: 200_000_000 };
        let acks = acks_of(QoS::AtLeastOnce, 3, schedule, Duration::ZERO).await.summary();
        assert_eq!(acks.count, 3);
        assert!(acks.max_us < 100_000.0, "well within the 200 ms interval: {acks:?}");
    }
}
