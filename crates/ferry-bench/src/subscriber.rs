//! The receiving side of a load connection: takes PUBLISH packets, answers
//! them at their QoS, and accounts for each one in a [`Tracker`] and a
//! latency histogram.

use crate::client::Conn;
use crate::histogram::Latency;
use crate::payload::Header;
use crate::tracker::{Arrival, Tracker};
use crate::{clock, BenchError};
use ferry_mqtt::{Packet, PubAck, QoS, ReasonCode};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// What one subscriber saw.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub tracker: Tracker,
    /// Latency of each first arrival (duplicates are not timed twice).
    pub latency: Latency,
    /// When the last message arrived, ns on the process clock; 0 if none did.
    pub last_receive_ns: u64,
}

/// Receives until `expected` distinct messages have arrived, where
/// `expected` is sent by the scenario once its publishers are done (so it
/// counts what was actually sent), or until nothing has arrived for
/// `drain_timeout` after that: whatever is missing then is lost.
///
/// `publisher_base` is subtracted from the publisher id in each payload
/// before it is given to the tracker, so a subscriber that hears a few
/// publishers out of many keeps a tracker of just those.
pub async fn run(
    conn: &mut Conn,
    mut tracker: Tracker,
    publisher_base: u32,
    mut expected: oneshot::Receiver<u64>,
    drain_timeout: Duration,
) -> Result<Outcome, BenchError> {
    let mut latency = Latency::new();
    let mut last_receive_ns = 0;
    let mut target: Option<u64> = None;
    let mut last_progress = Instant::now();
    loop {
        while let Some(packet) = conn.next_packet()? {
            match packet {
                Packet::Publish(publish) => {
                    let now = clock::now_ns();
                    last_receive_ns = now;
                    match Header::read(&publish.payload) {
                        Ok(h) => {
                            let arrival =
                                tracker.record(h.publisher.wrapping_sub(publisher_base), h.seq);
                            if matches!(arrival, Arrival::InOrder | Arrival::OutOfOrder) {
                                latency.record_ns(now.saturating_sub(h.sent_ns));
                            }
                        }
                        // Someone else's message on our topics.
                        Err(_) => tracker.record_stranger(),
                    }
                    match publish.qos {
                        QoS::AtMostOnce => {}
                        QoS::AtLeastOnce => conn.queue(&Packet::PubAck(ack(publish.packet_id)))?,
                        QoS::ExactlyOnce => conn.queue(&Packet::PubRec(ack(publish.packet_id)))?,
                    }
                }
                Packet::PubRel(rel) => conn.queue(&Packet::PubComp(ack(rel.packet_id)))?,
                Packet::PingResp => {}
                other => {
                    return Err(
                        conn.protocol(&other, "a subscriber expects only PUBLISH and PUBREL")
                    )
                }
            }
        }
        if target.is_some_and(|n| tracker.received() >= n) {
            conn.flush().await?;
            return Ok(Outcome { tracker, latency, last_receive_ns });
        }
        let deadline = last_progress + drain_timeout;
        tokio::select! {
            pumped = conn.pump() => {
                pumped?;
                last_progress = Instant::now();
            }
            sent = &mut expected, if target.is_none() => {
                let sent = sent.map_err(|_| BenchError::Task("publishers stopped before reporting what they sent".into()))?;
                target = Some(sent);
                last_progress = Instant::now();
            }
            () = tokio::time::sleep_until(deadline), if target.is_some() => {
                conn.flush().await?;
                return Ok(Outcome { tracker, latency, last_receive_ns });
            }
        }
    }
}

fn ack(packet_id: u16) -> PubAck {
    PubAck::new(packet_id, ReasonCode::Success)
}
