//! `$SYS/broker/...`: the broker's own figures as retained messages, in the
//! topic names Mosquitto uses, so existing dashboards keep working.

use crate::broker::Broker;
use crate::message::Message;
use ferry_mqtt::{ByteStr, Properties, QoS};
use std::sync::Arc;
use std::time::Duration;

/// Publishes the `$SYS` topics every `sys_interval_secs` until shutdown.
/// Also sweeps expired retained messages, which needs a clock of its own.
pub async fn run(broker: Arc<Broker>) {
    let interval_secs = broker.config.sys_interval_secs;
    if interval_secs == 0 {
        return;
    }
    let mut shutdown = broker.shutdown_signal();
    let mut ticker = tokio::time::interval(Duration::from_secs(interval_secs));
    loop {
        tokio::select! {
            _ = shutdown.wait_for(|&stopping| stopping) => return,
            _ = ticker.tick() => {}
        }
        broker.sweep_expired_retained();
        publish_all(&broker);
    }
}

/// Publishes `$SYS/broker/{name}` (retained, QoS 0): for the figures of
/// other crates (routes) in the same tree.
pub fn publish_figure(broker: &Broker, name: &str, value: String) {
    let topic = ByteStr::from(format!("$SYS/broker/{name}"));
    broker.publish(Message::new(
        topic,
        value.into(),
        QoS::AtMostOnce,
        true,
        Properties::default(),
        0,
    ));
}

fn publish_all(broker: &Broker) {
    let stats = &broker.stats;
    let mut figures: Vec<(&str, String)> = vec![
        ("version", format!("ferry {}", env!("CARGO_PKG_VERSION"))),
        ("uptime", format!("{} seconds", broker.started_at.elapsed().as_secs())),
        ("clients/connected", stats.clients_connected.get().to_string()),
        ("clients/total", broker.session_count().to_string()),
        ("clients/refused", stats.clients_refused.get().to_string()),
        ("connections/refused", stats.connections_refused.get().to_string()),
        ("connections/tls_failed", stats.tls_handshakes_failed.get().to_string()),
        ("publish/limited", stats.publishes_limited.get().to_string()),
        ("publish/throttled", stats.publishers_throttled.get().to_string()),
        ("subscriptions/refused", stats.subscriptions_refused.get().to_string()),
        ("acl/denied", stats.acl_denied.get().to_string()),
        ("clients/slow_disconnected", stats.slow_consumers_disconnected.get().to_string()),
        ("messages/received", stats.messages_received.get().to_string()),
        ("messages/sent", stats.messages_sent.get().to_string()),
        ("publish/messages/received", stats.publishes_received.sum().to_string()),
        ("publish/messages/sent", stats.publishes_sent.sum().to_string()),
        (
            "publish/messages/dropped",
            (stats.dropped_queue_full.get() + stats.dropped_too_large.get()).to_string(),
        ),
        ("bytes/received", stats.bytes_received.get().to_string()),
        ("bytes/sent", stats.bytes_sent.get().to_string()),
        ("subscriptions/count", broker.subscription_count().to_string()),
        ("publish/messages/dropped/queue full", stats.dropped_queue_full.get().to_string()),
        ("publish/messages/dropped/too large", stats.dropped_too_large.get().to_string()),
        ("publish/messages/dropped/expired", stats.dropped_expired.get().to_string()),
    ];
    if let Some(store) = broker.store_figures() {
        let micros = |quantile: Option<Duration>| quantile.map_or(0, |d| d.as_micros()).to_string();
        figures.extend([
            ("store/bytes", store.log_bytes.to_string()),
            ("store/segments", store.segments.to_string()),
            ("store/free disk bytes", store.free_disk_bytes.to_string()),
            ("store/full", u8::from(store.full).to_string()),
            ("store/queued messages", store.queued.to_string()),
            ("store/records", store.writer.appended.to_string()),
            ("store/fsync/count", store.writer.syncs.to_string()),
            ("store/fsync/p50 us", micros(store.writer.sync_quantile(0.5))),
            ("store/fsync/p99 us", micros(store.writer.sync_quantile(0.99))),
            ("store/fsync/max us", store.writer.max_sync.as_micros().to_string()),
            ("store/failures", stats.store_failures.get().to_string()),
            ("store/refused", stats.refused_disk_full.get().to_string()),
            ("routes/refused", stats.refused_endpoint_full.get().to_string()),
            ("routes/held", stats.held_endpoint_full.get().to_string()),
            ("store/recovery/records", store.recovery_records.to_string()),
            ("store/recovery/ms", store.recovery_time.as_millis().to_string()),
        ]);
    }
    for (name, value) in figures {
        publish_figure(broker, name, value);
    }
    let retained = broker.retained_count().to_string();
    let topic = ByteStr::from_static("$SYS/broker/retained messages/count");
    broker.publish(Message::new(
        topic,
        retained.into(),
        QoS::AtMostOnce,
        true,
        Properties::default(),
        0,
    ));
}
