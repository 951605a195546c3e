//! The broker's tunables. Every limit has a default that is safe on a small
//! edge device and is documented in docs/configuration.md.

use serde::Deserialize;

/// What happens when a session's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum QueueOverflow {
    /// Drop the oldest queued message to make room: a subscriber that
    /// reconnects sees the newest data, which is what telemetry wants.
    #[default]
    DropOldest,
    /// Drop the incoming message and keep what is queued.
    DropNew,
}

/// A session's queue bound, read from the configuration once per use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueBound {
    pub messages: usize,
    /// 0: no limit in bytes.
    pub bytes: u64,
    pub overflow: QueueOverflow,
}

/// The `[broker]` section of the configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// A client asking for a longer keep-alive (or none, 0) is held to this;
    /// v5 clients are told in CONNACK's Server Keep Alive.
    pub max_keep_alive_secs: u16,
    /// The largest packet the broker accepts, announced to v5 clients.
    pub max_packet_size_bytes: u32,
    /// How many unacknowledged QoS 1/2 publishes a client may send us at once.
    pub receive_maximum: u16,
    /// Upper bound of the outbound in-flight window, whatever the client's
    /// receive maximum says: bounds the per-client retransmission state.
    pub max_inflight_messages: u16,
    /// Messages a session may hold beyond its in-flight window, online or
    /// offline. Generous because an offline session's messages wait in the
    /// durable log, not in memory (~4 bytes each): Mosquitto's 1,000 exists
    /// because it queues in RAM, and it drops the 1,001st message of a
    /// device that was offline for a few minutes.
    pub max_queued_messages: usize,
    /// Bytes (topic and payload) a session may hold queued; 0 for no limit
    /// but the message count. Bounds what one session can take of the
    /// disk, and of memory when durability is off.
    pub max_queued_bytes: u64,
    pub queue_overflow: QueueOverflow,
    /// Back-pressure's queue for an online subscriber: at half of it (or
    /// of `max_queued_messages`, if smaller) its publishers wait until it
    /// drains to a quarter. An online subscriber drains its queue, so a
    /// deeper one holds messages in memory longer and adds latency; the
    /// durable path, whose deliveries count from the moment they go to the
    /// log, runs faster with a deeper one (bench/durability.toml).
    pub online_queue_messages: usize,
    /// Topic aliases a client may use toward us (0 disables them).
    pub topic_alias_maximum: u16,
    /// Aliases the broker uses toward a client that allows them; the
    /// smaller of this and the client's maximum applies.
    pub outbound_topic_alias_maximum: u16,
    /// Session expiry intervals above this are reduced to it.
    pub max_session_expiry_secs: u32,
    pub retain_available: bool,
    /// Topic filters nobody may subscribe to (refused with 0x80 in SUBACK).
    pub deny_subscribe: Vec<String>,
    /// Period of the `$SYS/broker/...` publications; 0 disables them.
    pub sys_interval_secs: u64,
    /// A connection must send CONNECT within this time of being accepted,
    /// so idle sockets cannot pile up (slowloris).
    pub connect_timeout_secs: u64,
    /// Bytes of encoded packets a connection may hold waiting for the socket;
    /// beyond this the connection stops taking messages from its queue.
    pub write_buffer_bytes: usize,
    /// Connections open at once over every listener; 0 for no limit but
    /// the process's file descriptors. Beyond it a new socket is closed at
    /// once.
    pub max_connections: usize,
    /// New connections accepted per second over every listener (bursts of
    /// as many allowed); 0 for no limit.
    pub max_connection_rate: u32,
    /// PUBLISH packets per second a client may send (bursts of as many
    /// allowed); 0 for no limit. A v5 client's QoS 1/2 message beyond it
    /// gets 0x97; other clients and messages are slowed by not reading.
    pub max_publish_rate: u32,
    /// PUBLISH bytes (topic and payload) per second a client may send; 0
    /// for no limit. Beyond it, as with `max_publish_rate`.
    pub max_publish_bytes_rate: u64,
    /// Longest topic name or filter, in bytes.
    pub max_topic_bytes: usize,
    /// Most levels in a topic name or filter.
    pub max_topic_levels: usize,
    /// Subscriptions one session may hold.
    pub max_subscriptions_per_client: usize,
    /// Levels a wildcard filter must have before its first wildcard: 1
    /// refuses `#` and `+/...` (a subscription to everything), 0 allows them.
    pub min_wildcard_depth: usize,
    /// Resident memory above which new connections are refused and
    /// publishers are slowed, so the broker sheds load instead of being
    /// killed by the OOM killer; 0 disables the watermark.
    pub max_memory_bytes: u64,
    /// A client whose write buffer stays full, taking none of it, this
    /// long (checked once per period: one to two of them) is disconnected
    /// (0: never). Its queue is bounded anyway; this
    /// frees the session's place for a client that reads.
    pub slow_consumer_timeout_secs: u64,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            max_keep_alive_secs: u16::MAX,
            max_packet_size_bytes: 1024 * 1024,
            receive_maximum: 100,
            max_inflight_messages: 100,
            max_queued_messages: 100_000,
            max_queued_bytes: 256 * 1024 * 1024,
            queue_overflow: QueueOverflow::DropOldest,
            online_queue_messages: 1000,
            topic_alias_maximum: 64,
            outbound_topic_alias_maximum: 64,
            max_session_expiry_secs: u32::MAX,
            retain_available: true,
            deny_subscribe: Vec::new(),
            sys_interval_secs: 10,
            connect_timeout_secs: 10,
            write_buffer_bytes: 64 * 1024,
            max_connections: 0,
            max_connection_rate: 0,
            max_publish_rate: 0,
            max_publish_bytes_rate: 0,
            max_topic_bytes: 4096,
            max_topic_levels: 64,
            max_subscriptions_per_client: 1000,
            min_wildcard_depth: 0,
            max_memory_bytes: 0,
            slow_consumer_timeout_secs: 60,
        }
    }
}

/// A value that passed deserialization but makes no sense.
#[derive(Debug, thiserror::Error)]
#[error("{section}.{key}: {message}")]
pub struct ConfigError {
    pub section: &'static str,
    pub key: &'static str,
    pub message: String,
}

impl BrokerConfig {
    /// The queue length back-pressure works with (`online_queue_messages`).
    pub(crate) fn online_queue(&self) -> usize {
        self.online_queue_messages.min(self.max_queued_messages)
    }

    pub(crate) fn queue_bound(&self) -> QueueBound {
        QueueBound {
            messages: self.max_queued_messages,
            bytes: self.max_queued_bytes,
            overflow: self.queue_overflow,
        }
    }

    /// Checks ranges that serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |key, message: &str| {
            Err(ConfigError { section: "broker", key, message: message.to_string() })
        };
        if self.receive_maximum == 0 {
            return fail("receive_maximum", "must be at least 1");
        }
        if self.max_inflight_messages == 0 {
            return fail("max_inflight_messages", "must be at least 1");
        }
        if self.max_packet_size_bytes < 64 {
            return fail("max_packet_size_bytes", "must be at least 64");
        }
        if self.max_packet_size_bytes > 268_435_460 {
            return fail("max_packet_size_bytes", "must be at most 268435460 (the MQTT limit)");
        }
        if self.max_queued_messages == 0 {
            return fail("max_queued_messages", "must be at least 1");
        }
        if self.online_queue_messages < 2 {
            return fail("online_queue_messages", "must be at least 2");
        }
        if self.write_buffer_bytes < 1024 {
            return fail("write_buffer_bytes", "must be at least 1024");
        }
        if self.max_topic_bytes == 0 || self.max_topic_bytes > 65_535 {
            return fail("max_topic_bytes", "must be 1 to 65535 (the MQTT limit)");
        }
        if self.max_topic_levels == 0 {
            return fail("max_topic_levels", "must be at least 1");
        }
        if self.max_subscriptions_per_client == 0 {
            return fail("max_subscriptions_per_client", "must be at least 1");
        }
        for filter in &self.deny_subscribe {
            if !ferry_mqtt::topic::is_valid_topic_filter(filter) {
                return fail("deny_subscribe", &format!("{filter:?} is not a valid topic filter"));
            }
        }
        Ok(())
    }
}
