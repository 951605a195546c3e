//! The devices of `ferry bench twins live`, the seed's
//! DEVICE_LIVE_MESSAGES: the HTTP side sends
//! `POST /api/2/things/{id}/inbox/messages/bench?timeout=10s` and waits
//! for the device's answer; these devices, MQTT clients sharing one
//! subscription to every thing's live messages (so each message is
//! answered once), answer each with status 200 on `ditto/in`, as a device
//! of Ditto's benchmark answers through its connection.

use crate::client::Conn;
use crate::BenchError;
use bytes::Bytes;
use ferry_mqtt::{ByteStr, Packet, ProtocolVersion, Publish, QoS};
use std::net::SocketAddr;
use tokio::task::JoinHandle;

/// The live messages' subject.
pub(super) const SUBJECT: &str = "bench";

/// Connects `count` devices and returns their tasks, which answer until
/// aborted.
pub(super) async fn start(
    broker: SocketAddr,
    count: usize,
) -> Result<Vec<JoinHandle<Result<(), BenchError>>>, BenchError> {
    let mut devices = Vec::with_capacity(count);
    for n in 0..count {
        let (mut conn, _) =
            Conn::connect(broker, format!("bench-live-device-{n}"), ProtocolVersion::V5, 0).await?;
        conn.subscribe("$share/bench/ditto/things/+/live/messages/#", QoS::AtMostOnce).await?;
        devices.push(tokio::spawn(answer(conn)));
    }
    Ok(devices)
}

async fn answer(mut conn: Conn) -> Result<(), BenchError> {
    loop {
        let Packet::Publish(message) = conn.recv().await? else { continue };
        let Ok(command) = serde_json::from_slice::<serde_json::Value>(&message.payload) else {
            continue;
        };
        let response = serde_json::json!({
            "topic": command["topic"],
            "headers": {
                "correlation-id": command["headers"]["correlation-id"],
                "content-type": "application/json",
            },
            "path": command["path"],
            "status": 200,
            "value": { "pong": command["value"] },
        });
        conn.queue(&Packet::Publish(Publish {
            dup: false,
            qos: QoS::AtMostOnce,
            retain: false,
            topic: ByteStr::from("ditto/in"),
            packet_id: 0,
            properties: Default::default(),
            payload: Bytes::from(response.to_string()),
        }))?;
        conn.flush().await?;
    }
}
