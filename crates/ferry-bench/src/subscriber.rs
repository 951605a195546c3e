//! The receiving side of a load connection: takes PUBLISH packets, answers
//! them at their QoS, and accounts for each one in a [`Tracker`] and a
//! latency histogram.

use crate::client::Conn;
use crate::histogram::SharedLatency;
use crate::payload::Header;
use crate::timeline::Progress;
use crate::tracker::{Arrival, Tracker};
use crate::upstream::{Return, Upstream};
use crate::{clock, BenchError};
use ferry_mqtt::{Packet, PubAck, QoS, ReasonCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

/// What one subscriber saw.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub tracker: Tracker,
    /// When the last message arrived, ns on the process clock; 0 if none did.
    pub last_receive_ns: u64,
    /// When a subscriber at an upstream last got back in after losing it.
    pub upstream_return: Option<Return>,
}

/// Subscribers that share one stream of messages (a `$share` group), each
/// receiving part of it: they count their first arrivals together, so each
/// stops as soon as the group as a whole has everything, instead of waiting
/// out the drain timeout for messages that went to another member.
#[derive(Debug, Default)]
pub struct Group {
    received: AtomicU64,
    complete: Notify,
}

impl Group {
    /// First arrivals over every member so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Acquire)
    }
}

/// How a subscriber listens, besides its connection and tracker.
#[derive(Debug, Clone)]
pub struct Listen {
    /// Subtracted from the publisher id in each payload before it is given
    /// to the tracker, so a subscriber that hears a few publishers out of
    /// many keeps a tracker of just those.
    pub publisher_base: u32,
    /// How long to wait for missing messages after the last arrival once
    /// the publishers are done; whatever is missing then is lost.
    pub drain_timeout: Duration,
    /// Where first arrivals are counted for the live view.
    pub progress: Arc<Progress>,
    /// Where the latency of each first arrival is recorded (duplicates are
    /// not timed twice).
    pub latency: Arc<SharedLatency>,
    /// The `$share` group this subscriber is a member of: `expected` is
    /// then what the whole group is to receive, and the member stops once
    /// the group has it.
    pub group: Option<Arc<Group>>,
    /// Set for a subscriber at an edge's upstream that resumes a
    /// persistent session: a lost connection is opened again, for as long
    /// as the drain timeout allows, instead of failing the run, since the
    /// upstream going away is what such a run is about.
    pub upstream: Option<Arc<Upstream>>,
}

/// Receives until `expected` distinct messages have arrived, where
/// `expected` is sent by the scenario once its publishers are done (so it
/// counts what was actually sent), or until nothing has arrived for the
/// drain timeout after that.
pub async fn run(
    conn: &mut Conn,
    mut tracker: Tracker,
    mut expected: oneshot::Receiver<u64>,
    listen: Listen,
) -> Result<Outcome, BenchError> {
    let group = listen.group.as_deref();
    let mut latency = listen.latency.recorder();
    let mut last_receive_ns = 0;
    let mut target: Option<u64> = None;
    let mut last_progress = Instant::now();
    let mut upstream_return = None;
    // Set from a lost connection to the upstream until it is back.
    let mut lost = false;
    let client_id = conn.client_id().to_owned();
    loop {
        // Taken before the completion check below, so a notification sent
        // after the check is not missed.
        let completed = group.map(|g| g.complete.notified());
        let received_before = tracker.received();
        while let Some(packet) = conn.next_packet()? {
            match packet {
                Packet::Publish(publish) => {
                    let now = clock::now_ns();
                    last_receive_ns = now;
                    match Header::read(&publish.payload) {
                        Ok(h) => {
                            let arrival = tracker
                                .record(h.publisher.wrapping_sub(listen.publisher_base), h.seq);
                            if matches!(arrival, Arrival::InOrder | Arrival::OutOfOrder) {
                                latency.record_ns(now.saturating_sub(h.sent_ns));
                                if let Some(g) = group {
                                    g.received.fetch_add(1, Ordering::AcqRel);
                                }
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
        listen.progress.add_received(tracker.received() - received_before);
        let received = group.map_or_else(|| tracker.received(), Group::received);
        if target.is_some_and(|n| received >= n) {
            if let Some(g) = group {
                g.complete.notify_waiters();
            }
            if !lost {
                conn.flush().await?;
            }
            return Ok(Outcome { tracker, last_receive_ns, upstream_return });
        }
        let deadline = last_progress + listen.drain_timeout;
        tokio::select! {
            pumped = conn.pump(), if !lost => match pumped {
                Ok(()) => last_progress = Instant::now(),
                Err(BenchError::Io { .. }) if listen.upstream.is_some() => lost = true,
                Err(e) => return Err(e),
            },
            back = resume(listen.upstream.as_deref(), &client_id), if lost => {
                if let Some(back) = back? {
                    *conn = back;
                    lost = false;
                    upstream_return =
                        Some(Return { at_ns: clock::now_ns(), received_before: tracker.received() });
                    last_progress = Instant::now();
                }
            }
            sent = &mut expected, if target.is_none() => {
                let sent = sent.map_err(|_| BenchError::Task("publishers stopped before reporting what they sent".into()))?;
                target = Some(sent);
                last_progress = Instant::now();
            }
            () = completion(completed) => {}
            () = tokio::time::sleep_until(deadline), if target.is_some() => {
                if !lost {
                    conn.flush().await?;
                }
                return Ok(Outcome { tracker, last_receive_ns, upstream_return });
            }
        }
    }
}

/// One attempt to get back in to the upstream; never without one.
async fn resume(upstream: Option<&Upstream>, client_id: &str) -> Result<Option<Conn>, BenchError> {
    match upstream {
        Some(upstream) => upstream.try_resume(client_id).await,
        None => std::future::pending().await,
    }
}

/// Resolves when the group is complete; never without a group.
async fn completion(completed: Option<tokio::sync::futures::Notified<'_>>) {
    match completed {
        Some(completed) => completed.await,
        None => std::future::pending().await,
    }
}

fn ack(packet_id: u16) -> PubAck {
    PubAck::new(packet_id, ReasonCode::Success)
}
