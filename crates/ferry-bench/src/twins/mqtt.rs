//! `ferry bench twins modify-mqtt`: the seed's MODIFY_THINGS over MQTT.
//! Each connection is a device publishing Ditto protocol `modify`
//! commands at QoS 1 to `ditto/in`, one at a time (the next after the
//! PUBACK, which Ferry sends once the change is committed: Ditto's
//! `twin-persisted`), and one sink subscribes to every thing's
//! `modified` events, as the seed's HTTP event sink does.
//!
//! Two latencies: command sent → PUBACK (persisted), and command sent →
//! its event at the sink (end to end). The command's value is the time it
//! was sent, so the event carries its own start. Errors come back on the
//! device's replies topic and are counted by status; successes are not
//! answered (`response-required: false`), as a device would send them.

use super::{Done, Pace, Random, TwinsArgs};
use crate::client::Conn;
use crate::histogram::{Latency, LatencySummary};
use crate::BenchError;
use bytes::Bytes;
use ferry_mqtt::{ByteStr, Packet, ProtocolVersion, PubAck, Publish, QoS, ReasonCode};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// What the sink saw.
#[derive(Debug, Clone, Serialize)]
pub struct EventFigures {
    /// Events of this run's commands received.
    pub received: u64,
    /// Commands acknowledged, each of which should have made one event.
    pub expected: u64,
    /// Command sent → its event at the sink.
    pub latency: LatencySummary,
}

/// How long the sink waits for the last events after the devices stop.
pub(super) const DRAIN: Duration = Duration::from_secs(5);

pub(super) async fn run(
    args: &TwinsArgs,
    deadline: Instant,
    interval: Option<Duration>,
) -> Result<(Done, EventFigures), BenchError> {
    let broker = super::mqtt_address(args)?;
    let clock = Instant::now();
    let (sink, _) =
        Conn::connect(broker, "bench-event-sink".into(), ProtocolVersion::V5, 0).await?;
    let (stop_sink, stopped) = watch::channel(None);
    let sink = tokio::spawn(receive_events(sink, clock, stopped));
    let mut devices = Vec::with_capacity(args.connections);
    for worker in 0..args.connections {
        let args = args.clone();
        let pace = Pace::new(interval, worker, args.connections);
        devices.push(tokio::spawn(async move {
            device(broker, &args, worker as u64, pace, deadline, clock).await
        }));
    }
    let mut done = Done { latency: Latency::new(), statuses: BTreeMap::new() };
    for device in devices {
        let finished = device.await.map_err(|error| BenchError::Task(error.to_string()))??;
        done.merge(finished);
    }
    let expected = done.statuses.get(&204).copied().unwrap_or(0);
    let _ = stop_sink.send(Some((expected, Instant::now() + DRAIN)));
    let (received, latency) = sink.await.map_err(|error| BenchError::Task(error.to_string()))??;
    Ok((done, EventFigures { received, expected, latency: latency.summary() }))
}

async fn device(
    broker: SocketAddr,
    args: &TwinsArgs,
    worker: u64,
    mut pace: Pace,
    deadline: Instant,
    clock: Instant,
) -> Result<Done, BenchError> {
    let client_id = format!("bench-device-{worker}");
    let (mut conn, _) = Conn::connect(broker, client_id.clone(), ProtocolVersion::V5, 0).await?;
    conn.subscribe(&format!("ditto/replies/{client_id}"), QoS::AtMostOnce).await?;
    let mut done = Done { latency: Latency::new(), statuses: BTreeMap::new() };
    let mut random = Random::new(worker);
    while Instant::now() < deadline {
        let due = pace.next().await;
        let n = random.below(args.things);
        let sent_at = clock.elapsed().as_nanos() as u64;
        let command = serde_json::json!({
            "topic": format!("{}/{}{n}/things/twin/commands/modify", args.namespace, args.prefix),
            "headers": { "response-required": false },
            "path": "/features/coffee-brewer/properties/brewed-coffees",
            "value": sent_at,
        });
        let publish = Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain: false,
            topic: ByteStr::from("ditto/in"),
            packet_id: 1,
            properties: Default::default(),
            payload: Bytes::from(command.to_string()),
        };
        conn.queue(&Packet::Publish(publish))?;
        conn.flush().await?;
        let status = loop {
            match conn.recv().await? {
                Packet::PubAck(ack) if ack.reason_code.is_error() => break 0,
                Packet::PubAck(_) => break 204,
                // An error answered on the replies topic; its PUBACK follows.
                Packet::Publish(answer) => {
                    let status = serde_json::from_slice::<serde_json::Value>(&answer.payload)
                        .ok()
                        .and_then(|answer| answer.get("status")?.as_u64())
                        .unwrap_or(0);
                    *done.statuses.entry(status as u16).or_default() += 1;
                }
                other => return Err(conn.protocol(&other, "expected PUBACK")),
            }
        };
        done.latency.record_ns(due.elapsed().as_nanos() as u64);
        *done.statuses.entry(status).or_default() += 1;
    }
    conn.disconnect().await;
    Ok(done)
}

/// The sink: every thing's `modified` events, each one's latency from the
/// time its command carried, until the devices have stopped and either
/// every expected event arrived or `DRAIN` passed.
async fn receive_events(
    mut sink: Conn,
    clock: Instant,
    mut stopped: watch::Receiver<Option<(u64, Instant)>>,
) -> Result<(u64, Latency), BenchError> {
    sink.subscribe("ditto/things/+/twin/events/modified", QoS::AtLeastOnce).await?;
    let mut latency = Latency::new();
    let mut received = 0u64;
    loop {
        if let Some((expected, until)) = *stopped.borrow() {
            if received >= expected || Instant::now() >= until {
                break;
            }
        }
        let packet = tokio::select! {
            packet = sink.recv() => packet?,
            _ = stopped.changed() => continue,
            _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
        };
        let Packet::Publish(event) = packet else { continue };
        if event.qos != QoS::AtMostOnce {
            sink.queue(&Packet::PubAck(PubAck::new(event.packet_id, ReasonCode::Success)))?;
            sink.flush().await?;
        }
        let sent_at = serde_json::from_slice::<serde_json::Value>(&event.payload)
            .ok()
            .and_then(|event| event.get("value")?.as_u64());
        if let Some(sent_at) = sent_at {
            received += 1;
            latency.record_ns((clock.elapsed().as_nanos() as u64).saturating_sub(sent_at));
        }
    }
    sink.disconnect().await;
    Ok((received, latency))
}
