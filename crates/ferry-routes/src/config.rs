//! The `[routes]` and `[endpoints.NAME]` sections of Ferry's configuration
//! file. docs/routes.md and docs/configuration.md describe every key.
//!
//! ```toml
//! [routes]
//! default_ttl = "2h"
//!
//! [routes.telemetry]
//! route    = "FROM telemetry/# WHERE $body.temp > 50 INTO cloud"
//! priority = 0
//! ttl      = "1h"
//!
//! [endpoints.cloud]
//! type = "topic"
//! topic = "archive/{topic}"
//! ```

use crate::endpoints::http::HttpEndpointConfig;
#[cfg(feature = "kafka")]
use crate::endpoints::kafka::KafkaEndpointConfig;
use crate::endpoints::mqtt::MqttEndpointConfig;
use crate::endpoints::topic::TopicEndpointConfig;
use crate::units::{Size, Span};
use crate::Route;
use ferry_broker::routing::{WhenFull, LOWEST_PRIORITY};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// `[routes]`: its settings, and one table per route.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutesConfig {
    /// How long a routed message may wait for its endpoint when its route
    /// does not say; `None` for ever.
    pub default_ttl: Option<Duration>,
    /// Whether to count the messages no route takes (`no_route`): off by
    /// default, since on a broker that routes a few topics that is most.
    pub count_unrouted: bool,
    /// The routes by name, parsed.
    pub routes: BTreeMap<String, RouteConfig>,
}

impl Default for RoutesConfig {
    fn default() -> Self {
        RoutesConfig {
            default_ttl: Some(DEFAULT_TTL),
            count_unrouted: false,
            routes: BTreeMap::new(),
        }
    }
}

/// edgeHub's default time to live for stored messages.
const DEFAULT_TTL: Duration = Duration::from_secs(2 * 3600);

/// One `[routes.NAME]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteConfig {
    pub route: Route,
    /// 0 (highest) ..= 9, the default.
    pub priority: u8,
    /// `None`: `default_ttl`; `Some(None)`: no expiry (`ttl = "0"`).
    pub ttl: Option<Option<Duration>>,
}

impl RoutesConfig {
    /// The expiry of a route's messages: its own TTL, else the default.
    pub fn ttl_of(&self, route: &RouteConfig) -> Option<Duration> {
        route.ttl.unwrap_or(self.default_ttl)
    }
}

/// `"0"` means no expiry.
fn ttl(span: Span) -> Option<Duration> {
    (!span.0.is_zero()).then_some(span.0)
}

impl<'de> Deserialize<'de> for RoutesConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RoutesConfig, D::Error> {
        deserializer.deserialize_map(RoutesVisitor)
    }
}

/// Settings and routes share the `[routes]` table, as in the issue's
/// examples: a scalar key is a setting, a table is a route named by its key.
struct RoutesVisitor;

impl<'de> Visitor<'de> for RoutesVisitor {
    type Value = RoutesConfig;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("route settings and [routes.NAME] tables")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RoutesConfig, A::Error> {
        let mut config = RoutesConfig::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "default_ttl" => config.default_ttl = ttl(map.next_value()?),
                "count_unrouted" => config.count_unrouted = map.next_value()?,
                _ => {
                    let route = map.next_value_seed(RouteSeed { name: &key })?;
                    config.routes.insert(key, route);
                }
            }
        }
        Ok(config)
    }
}

/// Deserializes one route table knowing its name, so that a syntax error
/// in its `route` names the route and is reported at that line.
struct RouteSeed<'n> {
    name: &'n str,
}

impl<'de> de::DeserializeSeed<'de> for RouteSeed<'_> {
    type Value = RouteConfig;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<RouteConfig, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RouteSeed<'_> {
    type Value = RouteConfig;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        write!(
            formatter,
            "a route table with `route = \"FROM … INTO …\"` (or a setting: default_ttl)"
        )
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RouteConfig, A::Error> {
        let (mut route, mut priority, mut ttl_setting) = (None, LOWEST_PRIORITY, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "route" => {
                    route = Some(map.next_value_seed(RouteText { name: self.name })?);
                }
                "priority" => priority = map.next_value::<Priority>()?.0,
                "ttl" => ttl_setting = Some(ttl(map.next_value()?)),
                other => {
                    return Err(de::Error::unknown_field(other, &["route", "priority", "ttl"]))
                }
            }
        }
        let route = route.ok_or_else(|| de::Error::missing_field("route"))?;
        Ok(RouteConfig { route, priority, ttl: ttl_setting })
    }
}

/// A priority, checked while it is read so that an error points at it.
struct Priority(u8);

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Priority, D::Error> {
        let priority = u64::deserialize(deserializer)?;
        match u8::try_from(priority) {
            Ok(priority) if priority <= LOWEST_PRIORITY => Ok(Priority(priority)),
            _ => Err(de::Error::custom(format!(
                "priority {priority}: must be 0 (highest) to {LOWEST_PRIORITY}"
            ))),
        }
    }
}

struct RouteText<'n> {
    name: &'n str,
}

impl<'de> de::DeserializeSeed<'de> for RouteText<'_> {
    type Value = Route;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Route, D::Error> {
        let text = String::deserialize(deserializer)?;
        Route::parse(self.name, &text).map_err(de::Error::custom)
    }
}

/// One `[endpoints.NAME]` table: its type's settings and how messages flow
/// to it.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointConfig {
    pub kind: EndpointKind,
    pub flow: FlowConfig,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EndpointKind {
    Mqtt(Box<MqttEndpointConfig>),
    Topic(TopicEndpointConfig),
    Http(HttpEndpointConfig),
    #[cfg(feature = "kafka")]
    Kafka(Box<KafkaEndpointConfig>),
}

impl EndpointKind {
    /// The `type` the configuration gives it.
    pub fn type_name(&self) -> &'static str {
        match self {
            EndpointKind::Mqtt(_) => "mqtt",
            EndpointKind::Topic(_) => "topic",
            EndpointKind::Http(_) => "http",
            #[cfg(feature = "kafka")]
            EndpointKind::Kafka(_) => "kafka",
        }
    }
}

/// How messages flow to an endpoint, whatever its type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlowConfig {
    /// The log bytes the endpoint's queue may hold (its disk cap); 0 for
    /// no cap but the disk's own watermark.
    pub max_bytes: Size,
    /// What a full queue does with more: `reject` (0x97 to the publisher),
    /// `block` (the publisher's acknowledgement waits for room, up to
    /// `block_timeout`, then 0x97) or `drop_oldest` (drops its oldest
    /// messages, counted under `cap`).
    pub when_full: WhenFull,
    pub block_timeout: Span,
    pub batch: BatchConfig,
    pub backoff: BackoffConfig,
    /// Messages per second at most, a backlog's drain included; 0 for the
    /// link's speed.
    pub max_rate: u32,
    /// The share of batches given to lower priorities while a higher one
    /// has messages waiting, so that they are not starved: 0 for strict
    /// priority, at most 50.
    pub starvation_share_percent: u8,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            max_bytes: Size(0),
            when_full: WhenFull::Reject,
            block_timeout: Span(Duration::from_secs(10)),
            batch: BatchConfig::default(),
            backoff: BackoffConfig::default(),
            max_rate: 0,
            starvation_share_percent: 10,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchConfig {
    pub max_messages: usize,
    pub max_bytes: Size,
    /// How long a batch that is not full waits for more messages.
    pub linger: Span,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            max_messages: 500,
            max_bytes: Size(256 << 10),
            linger: Span(Duration::from_millis(0)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackoffConfig {
    /// The first wait after a failure; doubled (with jitter) after each
    /// further one up to `max`.
    pub initial: Span,
    pub max: Span,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Span(Duration::from_millis(100)),
            max: Span(Duration::from_secs(60)),
        }
    }
}

/// Bounds that keep a batch sendable and a bad setting from exhausting
/// memory: a batch is read into memory whole.
const MAX_BATCH_MESSAGES: usize = 10_000;
const MAX_BATCH_BYTES: u64 = 16 << 20;
/// A blocked publisher stops reading, PINGREQs included: beyond a few
/// minutes its client has long given up on the connection.
const MAX_BLOCK_TIMEOUT: Duration = Duration::from_secs(300);

impl FlowConfig {
    fn validate(&self) -> Result<(), String> {
        let batch = &self.batch;
        if batch.max_messages == 0 || batch.max_messages > MAX_BATCH_MESSAGES {
            return Err(format!("batch.max_messages must be 1 to {MAX_BATCH_MESSAGES}"));
        }
        if batch.max_bytes.0 == 0 || batch.max_bytes.0 > MAX_BATCH_BYTES {
            return Err(format!("batch.max_bytes must be 1 byte to {MAX_BATCH_BYTES} bytes"));
        }
        if self.backoff.initial.0.is_zero() || self.backoff.initial.0 > self.backoff.max.0 {
            return Err("backoff.initial must be above 0 and at most backoff.max".into());
        }
        if self.block_timeout.0.is_zero() || self.block_timeout.0 > MAX_BLOCK_TIMEOUT {
            return Err(format!(
                "block_timeout must be above 0 and at most {}s",
                MAX_BLOCK_TIMEOUT.as_secs()
            ));
        }
        if self.starvation_share_percent > 50 {
            return Err("starvation_share_percent must be 0 to 50".into());
        }
        Ok(())
    }
}

/// Keys of the flow, the same for every type; the rest of the table is
/// the type's.
const FLOW_KEYS: [&str; 7] = [
    "max_bytes",
    "when_full",
    "block_timeout",
    "batch",
    "backoff",
    "max_rate",
    "starvation_share_percent",
];
const TYPES: &[&str] = &["http", "kafka", "mqtt", "topic"];
/// Why `type = "kafka"` fails in a build without the kafka endpoint.
#[cfg(not(feature = "kafka"))]
const MISSING_KAFKA: &str = "the kafka endpoint is not in this build of Ferry: it needs the `kafka` cargo feature (on by default; left out of the edge build, `--no-default-features`)";

impl<'de> Deserialize<'de> for EndpointConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<EndpointConfig, D::Error> {
        // Buffered as JSON values so each part can be read with its own
        // strict struct (an internally tagged enum cannot both share the
        // flow keys and refuse unknown ones).
        let mut table = serde_json::Map::deserialize(deserializer)?;
        let kind = match table.remove("type") {
            Some(serde_json::Value::String(kind)) => kind,
            Some(_) => return Err(de::Error::custom("`type` must be a string")),
            None => return Err(de::Error::missing_field("type")),
        };
        let mut flow = serde_json::Map::new();
        for key in FLOW_KEYS {
            if let Some(value) = table.remove(key) {
                flow.insert(key.to_owned(), value);
            }
        }
        let flow: FlowConfig = serde_json::from_value(flow.into()).map_err(de::Error::custom)?;
        flow.validate().map_err(de::Error::custom)?;
        let settings = serde_json::Value::Object(table);
        let strict =
            |error: serde_json::Error| de::Error::custom(format!("{kind} endpoint: {error}"));
        let kind = match kind.as_str() {
            "mqtt" => {
                let mqtt: MqttEndpointConfig = serde_json::from_value(settings).map_err(strict)?;
                mqtt.validate()
                    .map_err(|error| de::Error::custom(format!("mqtt endpoint: {error}")))?;
                EndpointKind::Mqtt(Box::new(mqtt))
            }
            "topic" => EndpointKind::Topic(serde_json::from_value(settings).map_err(strict)?),
            "http" => EndpointKind::Http(serde_json::from_value(settings).map_err(strict)?),
            #[cfg(feature = "kafka")]
            "kafka" => {
                let kafka: KafkaEndpointConfig =
                    serde_json::from_value(settings).map_err(strict)?;
                kafka
                    .validate()
                    .map_err(|error| de::Error::custom(format!("kafka endpoint: {error}")))?;
                EndpointKind::Kafka(Box::new(kafka))
            }
            // A known type this build left out is not an unknown type: say
            // which build has it rather than list the others.
            #[cfg(not(feature = "kafka"))]
            "kafka" => return Err(de::Error::custom(MISSING_KAFKA)),
            other => return Err(de::Error::unknown_variant(other, TYPES)),
        };
        Ok(EndpointConfig { kind, flow })
    }
}

/// Checks what each part cannot alone: every route goes into an endpoint
/// that exists. Returns the key to blame and why.
pub fn check(
    routes: &RoutesConfig,
    endpoints: &BTreeMap<String, EndpointConfig>,
) -> Result<(), (String, String)> {
    for (name, route) in &routes.routes {
        let endpoint = route.route.endpoint();
        if !endpoints.contains_key(endpoint) {
            let known: Vec<&str> = endpoints.keys().map(String::as_str).collect();
            return Err((
                format!("routes.{name}.route"),
                format!(
                    "route {name:?} goes INTO {endpoint:?}, which no [endpoints.{endpoint}] table defines (defined: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ),
            ));
        }
    }
    Ok(())
}
