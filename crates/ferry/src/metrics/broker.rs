//! The broker's metrics: connections per listener, sessions, subscriptions,
//! retained messages, messages and bytes by QoS, drops and refusals, the
//! queues of offline sessions, the delivery latency histogram, the durable
//! log and authentication failures. Read once per scrape into a snapshot
//! (`BrokerMetrics::read`): the per-core counters summed, the sessions
//! visited once; nothing is added to the publish path for them.

use super::encode::{counter, counters, gauge, gauges, histogram_pow2_micros};
use crate::ready::Accepting;
use ferry_broker::{
    AuthMethod, Broker, HistogramFigures, SessionFigures, StoreFigures, DISCONNECT_REASONS,
};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::fmt::Error;
use std::sync::Arc;

/// One listener's figures.
#[derive(Debug)]
struct ListenerFigures {
    name: String,
    open: usize,
    accepted: u64,
    refused: Vec<(&'static str, u64)>,
}

/// Everything the broker's metrics show, read at one scrape.
#[derive(Debug)]
pub struct BrokerMetrics {
    listeners: Vec<ListenerFigures>,
    clients_connected: u64,
    clients_parked: u64,
    sessions: SessionFigures,
    subscriptions: usize,
    retained: usize,
    received: [(u8, u64); 3],
    sent: [(u8, u64); 3],
    payload_received: [(u8, u64); 3],
    payload_sent: [(u8, u64); 3],
    network_received: u64,
    network_sent: u64,
    dropped: [(&'static str, u64); 3],
    refused: [(&'static str, u64); 3],
    acl_denied: u64,
    subscriptions_refused: u64,
    publishers_throttled: u64,
    slow_consumers_disconnected: u64,
    authentication_failures: Vec<(&'static str, u64)>,
    disconnections: Vec<(&'static str, u64)>,
    latency: HistogramFigures,
    store: Option<StoreFigures>,
}

impl BrokerMetrics {
    pub fn read(broker: &Broker, listeners: &[Arc<Accepting>]) -> BrokerMetrics {
        let stats = &broker.stats;
        BrokerMetrics {
            listeners: listeners
                .iter()
                .map(|accepting| {
                    let listener = &accepting.listener;
                    ListenerFigures {
                        name: listener.name.clone(),
                        open: listener.open(),
                        accepted: listener.accepted(),
                        refused: listener
                            .refused()
                            .iter()
                            .map(|(reason, count)| (reason.name(), *count))
                            .collect(),
                    }
                })
                .collect(),
            clients_connected: stats.clients_connected.get(),
            clients_parked: stats.clients_parked.get(),
            sessions: broker.session_figures(),
            subscriptions: broker.subscription_count(),
            retained: broker.retained_count(),
            received: stats.publishes_received.get(),
            sent: stats.publishes_sent.get(),
            payload_received: stats.payload_bytes_received.get(),
            payload_sent: stats.payload_bytes_sent.get(),
            network_received: stats.bytes_received.get(),
            network_sent: stats.bytes_sent.get(),
            dropped: [
                ("queue_full", stats.dropped_queue_full.get()),
                ("too_large", stats.dropped_too_large.get()),
                ("expired", stats.dropped_expired.get()),
            ],
            refused: [
                ("disk_full", stats.refused_disk_full.get()),
                ("store_failure", stats.store_failures.get()),
                ("limited", stats.publishes_limited.get()),
            ],
            acl_denied: stats.acl_denied.get(),
            subscriptions_refused: stats.subscriptions_refused.get(),
            publishers_throttled: stats.publishers_throttled.get(),
            slow_consumers_disconnected: stats.slow_consumers_disconnected.get(),
            authentication_failures: AuthMethod::ALL
                .iter()
                .map(|method| (method.name(), stats.authentication_failure(*method).get()))
                .collect(),
            disconnections: DISCONNECT_REASONS
                .iter()
                .zip(&stats.disconnections)
                .map(|(reason, counter)| (*reason, counter.get()))
                .collect(),
            latency: stats.delivery_latency.get(),
            store: broker.store_figures(),
        }
    }
}

/// `(qos, value)` pairs as samples labelled `qos`.
fn by_qos(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    values: &[(u8, u64); 3],
) -> Result<(), Error> {
    let qos = ["0", "1", "2"];
    let labels: Vec<[(&'static str, &str); 1]> =
        values.iter().map(|(level, _)| [("qos", qos[usize::from(*level)])]).collect();
    let samples: Vec<_> =
        labels.iter().zip(values).map(|(labels, (_, value))| (&labels[..], *value)).collect();
    counters(encoder, name, help, &samples)
}

/// `(label value, count)` pairs as samples of one label.
fn by_label(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    label: &'static str,
    values: &[(&'static str, u64)],
) -> Result<(), Error> {
    let labels: Vec<[(&'static str, &str); 1]> =
        values.iter().map(|(value, _)| [(label, *value)]).collect();
    let samples: Vec<_> =
        labels.iter().zip(values).map(|(labels, (_, count))| (&labels[..], *count)).collect();
    counters(encoder, name, help, &samples)
}

impl Collector for BrokerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), Error> {
        let e = &mut encoder;
        let listener_labels: Vec<[(&'static str, &str); 1]> =
            self.listeners.iter().map(|l| [("listener", l.name.as_str())]).collect();
        let open: Vec<_> = listener_labels
            .iter()
            .zip(&self.listeners)
            .map(|(labels, l)| (&labels[..], l.open as f64))
            .collect();
        gauges(
            e,
            "ferry_connections",
            "Connections open now (admitted, CONNECT or not), by listener.",
            &open,
        )?;
        let accepted: Vec<_> = listener_labels
            .iter()
            .zip(&self.listeners)
            .map(|(labels, l)| (&labels[..], l.accepted))
            .collect();
        counters(
            e,
            "ferry_connections_accepted",
            "Connections admitted since the start, by listener.",
            &accepted,
        )?;
        let refused_labels: Vec<[(&'static str, &str); 2]> = self
            .listeners
            .iter()
            .flat_map(|l| {
                l.refused
                    .iter()
                    .map(|(reason, _)| [("listener", l.name.as_str()), ("reason", *reason)])
            })
            .collect();
        let refused_counts =
            self.listeners.iter().flat_map(|l| l.refused.iter().map(|(_, count)| *count));
        let refused: Vec<_> = refused_labels
            .iter()
            .zip(refused_counts)
            .map(|(labels, count)| (&labels[..], count))
            .collect();
        counters(
            e,
            "ferry_connections_refused",
            "Connections turned away, by listener and reason: max_connections, listener_max_connections, memory, rate, tls_handshake, connack (a CONNECT refused).",
            &refused,
        )?;
        gauge(
            e,
            "ferry_clients_connected",
            "MQTT clients connected now (CONNECT accepted).",
            self.clients_connected as f64,
        )?;
        gauge(
            e,
            "ferry_clients_parked",
            "Of the clients connected, those idle and parked without a task of their own (woken by their socket or their session).",
            self.clients_parked as f64,
        )?;
        gauges(
            e,
            "ferry_sessions",
            "Sessions, by state: online (a client connected), offline (persistent, waiting for its client).",
            &[
                (&[("state", "online")][..], self.sessions.online as f64),
                (&[("state", "offline")][..], self.sessions.offline as f64),
            ],
        )?;
        gauge(
            e,
            "ferry_subscriptions",
            "Subscriptions in the topic tree.",
            self.subscriptions as f64,
        )?;
        gauge(e, "ferry_retained_messages", "Retained messages held.", self.retained as f64)?;
        gauge(
            e,
            "ferry_queued_messages",
            "Messages queued for offline sessions, in memory and in the durable log.",
            self.sessions.offline_queued_messages as f64,
        )?;
        gauge(
            e,
            "ferry_queued_bytes",
            "Topic and payload bytes of the messages queued for offline sessions (what max_queued_bytes bounds).",
            self.sessions.offline_queued_bytes as f64,
        )?;
        by_qos(
            e,
            "ferry_messages_received",
            "PUBLISH packets received from clients, by QoS.",
            &self.received,
        )?;
        by_qos(
            e,
            "ferry_messages_sent",
            "PUBLISH packets sent to clients (retransmissions too), by the QoS delivered.",
            &self.sent,
        )?;
        by_qos(
            e,
            "ferry_payload_received_bytes",
            "Payload bytes of the PUBLISH packets received, by QoS.",
            &self.payload_received,
        )?;
        by_qos(
            e,
            "ferry_payload_sent_bytes",
            "Payload bytes of the PUBLISH packets sent, by the QoS delivered.",
            &self.payload_sent,
        )?;
        counter(
            e,
            "ferry_network_received_bytes",
            "Bytes read from MQTT connections (every packet).",
            self.network_received,
        )?;
        counter(
            e,
            "ferry_network_sent_bytes",
            "Bytes written to MQTT connections (every packet).",
            self.network_sent,
        )?;
        by_label(
            e,
            "ferry_messages_dropped",
            "Deliveries dropped, by reason: queue_full (a session's queue bound), too_large (over the client's maximum packet size), expired (message expiry).",
            "reason",
            &self.dropped,
        )?;
        by_label(
            e,
            "ferry_publishes_refused",
            "PUBLISH packets refused, by reason: disk_full (a durable log limit, 0x97), store_failure (the log could not store it), limited (a client's rate or bandwidth, or the topic limits).",
            "reason",
            &self.refused,
        )?;
        counter(
            e,
            "ferry_acl_denied",
            "PUBLISH, SUBSCRIBE filters and wills refused by the ACL.",
            self.acl_denied,
        )?;
        counter(
            e,
            "ferry_subscriptions_refused",
            "SUBSCRIBE filters refused for the topic limits, the wildcard depth or the subscriptions per client.",
            self.subscriptions_refused,
        )?;
        counter(
            e,
            "ferry_publishers_throttled",
            "Times a publisher was slowed by not reading its socket.",
            self.publishers_throttled,
        )?;
        counter(
            e,
            "ferry_slow_consumers_disconnected",
            "Clients disconnected for not reading their messages (slow_consumer_timeout).",
            self.slow_consumers_disconnected,
        )?;
        by_label(
            e,
            "ferry_authentication_failures",
            "CONNECTs refused by authentication, by the method that judged them: password, jwt, certificate, anonymous (nothing to check where anonymous clients are not allowed), enhanced (an MQTT 5 authentication method).",
            "method",
            &self.authentication_failures,
        )?;
        by_label(
            e,
            "ferry_disconnections",
            "Connected clients' connections ended, by reason: client_disconnect (DISCONNECT), client_gone (closed without one), truncated_packet, connection_lost (a socket error), malformed_packet, protocol_error, keep_alive_timeout, credentials_expired, taken_over, server_shutdown, administrative_action.",
            "reason",
            &self.disconnections,
        )?;
        histogram_pow2_micros(
            e,
            "ferry_delivery_latency_seconds",
            "From the broker's receipt of a PUBLISH to the write of each of its deliveries to a subscriber (for a message read back from the durable log after a restart, from the read).",
            &self.latency.buckets,
            self.latency.sum,
        )?;
        if let Some(store) = &self.store {
            gauge(
                e,
                "ferry_store_log_bytes",
                "Bytes of the durable log's segments on disk.",
                store.log_bytes as f64,
            )?;
            gauge(
                e,
                "ferry_store_segments",
                "Segments of the durable log.",
                store.segments as f64,
            )?;
            gauge(
                e,
                "ferry_store_disk_free_bytes",
                "Free space on the file system of the data directory.",
                store.free_disk_bytes as f64,
            )?;
            gauge(
                e,
                "ferry_store_full",
                "1 while the durable log is over max_disk_bytes or under min_free_disk_bytes (messages that must be stored are refused).",
                f64::from(u8::from(store.full)),
            )?;
            counter(
                e,
                "ferry_store_records",
                "Records the durable log stored.",
                store.writer.appended,
            )?;
            counter(
                e,
                "ferry_store_write_failures",
                "Records the durable log failed to store.",
                store.writer.failed,
            )?;
            histogram_pow2_micros(
                e,
                "ferry_store_fsync_seconds",
                "Time of each fdatasync of the durable log.",
                &store.writer.sync_histogram,
                store.writer.total_sync,
            )?;
        }
        Ok(())
    }
}
