//! The reader task of a connection: decodes what the remote sends and
//! routes it wherever it must go, whether or not the sink is sending —
//! acknowledgements to the sink, commands (the reverse direction) into
//! the local broker, answers to the writer.

use super::keep_alive::LastHeard;
use super::topic_map::InboundMap;
use super::writer::Control;
use bytes::BytesMut;
use ferry_broker::{Broker, Message};
use ferry_mqtt::{ByteStr, Packet, ProtocolVersion, PubAck, Publish, QoS, ReasonCode, SubAck};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, oneshot};

/// Largest packet accepted from the remote, announced to it (MQTT 5
/// Maximum Packet Size). Commands are small; this bounds the read buffer,
/// which never holds more than one partial packet and one read.
pub(crate) const MAX_INBOUND_PACKET_BYTES: u32 = 1 << 20;

/// An acknowledgement for the sink, as the reader decoded it.
#[derive(Debug)]
pub(crate) enum Ack {
    PubAck(PubAck),
    PubRec(PubAck),
    PubComp(PubAck),
    SubAck(SubAck),
}

/// How much is read per system call at most: a burst of acks for a whole
/// window of 100 is about 600 bytes (MQTT 5: 4 to 6 bytes each), so this
/// takes many windows' worth at once and bounds the buffer beyond the one
/// partial packet it may hold.
const READ_CHUNK: usize = 16 * 1024;

/// Where the messages of the subscriptions go.
pub(crate) struct Inbound {
    pub deliver: Deliver,
    /// For log lines.
    pub endpoint: Arc<str>,
}

pub(crate) enum Deliver {
    /// An edge's reverse direction: into the local broker, under the local
    /// topic of the first map whose remote filter matches.
    Local { broker: Arc<Broker>, maps: Vec<InboundMap> },
    /// To whoever opened the connection (a twin connection's sources).
    To(Arc<dyn Receive>),
}

/// Takes the messages of a connection's subscriptions in place of the
/// local broker.
pub trait Receive: Send + Sync {
    /// A message came on one of the subscriptions. For QoS 1, the answer
    /// is the reason code of its PUBACK, sent once it resolves; the
    /// remote keeps the message, and sends it again after a reconnect,
    /// until then. `None`, or a QoS 0 message, is not waited for.
    /// Called on the connection's reader: it must not block.
    fn receive(&self, publish: Publish) -> Option<oneshot::Receiver<ReasonCode>>;
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = formatter.debug_struct("Inbound");
        if let Deliver::Local { maps, .. } = &self.deliver {
            debug.field("maps", maps);
        }
        debug.finish_non_exhaustive()
    }
}

/// Where the reader sends what it decodes.
pub(crate) struct ReaderOutputs {
    pub acks: mpsc::Sender<Ack>,
    pub control: mpsc::Sender<Control>,
    pub inbound: Arc<Inbound>,
    pub keep_alive: Option<Duration>,
    pub last_heard: LastHeard,
}

/// Reads and routes until the connection ends; returns why. An error in
/// what the remote sends ends this connection only: the sink sees it
/// closed, and the flow reconnects.
pub(crate) async fn read_loop(
    mut reading: impl AsyncRead + Unpin,
    mut read: BytesMut,
    version: ProtocolVersion,
    outputs: ReaderOutputs,
) -> Result<(), String> {
    let ReaderOutputs { acks, control, inbound, keep_alive, last_heard } = outputs;
    // The writer pings after `keep_alive` without a read (`keep_alive.rs`),
    // so a live remote is heard from well within twice that.
    let silence_max = keep_alive.map(|every| every * 2);
    loop {
        loop {
            let packet = match Packet::decode(&mut read, version, MAX_INBOUND_PACKET_BYTES) {
                Ok(Some(packet)) => packet,
                Ok(None) => break,
                Err(error) => return Err(format!("undecodable packet from the remote: {error}")),
            };
            route(packet, &acks, &control, &inbound).await?;
        }
        read.reserve(READ_CHUNK);
        let reading = reading.read_buf(&mut read);
        let count = match silence_max {
            None => reading.await,
            Some(limit) => match tokio::time::timeout(limit, reading).await {
                Ok(count) => count,
                Err(_) => {
                    return Err(format!(
                        "nothing heard from the remote for {} s (twice the keep-alive)",
                        limit.as_secs()
                    ))
                }
            },
        }
        .map_err(|error| format!("read failed: {error}"))?;
        if count == 0 {
            return Err("the remote closed the connection".into());
        }
        last_heard.heard();
    }
}

async fn route(
    packet: Packet,
    acks: &mpsc::Sender<Ack>,
    control: &mpsc::Sender<Control>,
    inbound: &Inbound,
) -> Result<(), String> {
    let ack = match packet {
        Packet::PubAck(ack) => Ack::PubAck(ack),
        Packet::PubRec(ack) => Ack::PubRec(ack),
        Packet::PubComp(ack) => Ack::PubComp(ack),
        Packet::SubAck(ack) => Ack::SubAck(ack),
        Packet::PingResp => return Ok(()),
        Packet::Publish(publish) => {
            return match receive(publish, inbound)? {
                Some(answer) => answer_with(control, answer).await,
                None => Ok(()),
            }
        }
        Packet::PubRel(release) => {
            // We hold no QoS 2 state for commands (see `receive`): the
            // message was stored before PUBREC, so completing is all
            // that is left.
            let complete = Packet::PubComp(PubAck::new(release.packet_id, ReasonCode::Success));
            return answer_with(control, Control::Packet(complete)).await;
        }
        Packet::Disconnect(disconnect) => {
            return Err(format!("the remote disconnected: {:?}", disconnect.reason_code))
        }
        other => return Err(format!("unexpected {:?} from the remote", other.packet_type())),
    };
    acks.try_send(ack).map_err(|error| match error {
        mpsc::error::TrySendError::Full(_) => {
            "the remote acknowledged more than was in flight".to_string()
        }
        mpsc::error::TrySendError::Closed(_) => "the connection was dropped".to_string(),
    })
}

async fn answer_with(control: &mpsc::Sender<Control>, answer: Control) -> Result<(), String> {
    control.send(answer).await.map_err(|_| "the writer has ended".to_string())
}

/// A message the remote sent on one of our subscriptions: published
/// locally under its mapped topic. Its acknowledgement waits until the
/// local durable log has it, so a crash between the two loses nothing:
/// the remote still holds the message and sends it again. QoS 2 is never
/// subscribed to (validation refuses it); should a remote send it all the
/// same, it is taken like QoS 1, with PUBREC once stored.
fn receive(publish: Publish, inbound: &Inbound) -> Result<Option<Control>, String> {
    if publish.properties.topic_alias.is_some() {
        return Err("the remote used a topic alias; we allow none".into());
    }
    let (broker, maps) = match &inbound.deliver {
        Deliver::Local { broker, maps } => (broker, maps),
        Deliver::To(receive) => {
            let exactly_once = publish.qos == QoS::ExactlyOnce;
            let packet_id = publish.packet_id;
            let qos = publish.qos;
            return Ok(match (receive.receive(publish), qos) {
                (_, QoS::AtMostOnce) => None,
                (Some(stored), _) => {
                    Some(Control::AckWhenStored { packet_id, exactly_once, stored })
                }
                (None, _) => acknowledge(packet_id, qos),
            });
        }
    };
    let local = maps.iter().find_map(|map| map.local_topic(&publish.topic));
    let Some(local) = local else {
        // A subscription of an earlier configuration that the persistent
        // session still holds: acknowledged, or it would come back at
        // every reconnect.
        tracing::warn!(
            endpoint = %inbound.endpoint,
            topic = %publish.topic,
            "message from the remote matches no `subscribe` entry: dropped"
        );
        return Ok(acknowledge(publish.packet_id, publish.qos));
    };
    let message = Message::new(
        ByteStr::from(local),
        publish.payload,
        publish.qos,
        publish.retain,
        publish.properties,
        0,
    );
    if publish.qos == QoS::AtMostOnce {
        // Nobody to acknowledge: the answer is not waited for.
        drop(broker.publish_stored(message, &inbound.endpoint));
        return Ok(None);
    }
    let stored = broker.publish_stored(message, &inbound.endpoint);
    Ok(Some(Control::AckWhenStored {
        packet_id: publish.packet_id,
        exactly_once: publish.qos == QoS::ExactlyOnce,
        stored,
    }))
}

fn acknowledge(packet_id: u16, qos: QoS) -> Option<Control> {
    let ack = PubAck::new(packet_id, ReasonCode::Success);
    match qos {
        QoS::AtMostOnce => None,
        QoS::AtLeastOnce => Some(Control::Packet(Packet::PubAck(ack))),
        QoS::ExactlyOnce => Some(Control::Packet(Packet::PubRec(ack))),
    }
}
