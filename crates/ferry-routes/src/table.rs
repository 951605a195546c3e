//! The route table the broker asks on the publish path (`Router`): the
//! routes' filters in a topic tree, so a message visits only the routes
//! whose filter matches, then their conditions, the payload parsed as JSON
//! at most once for all of them.

use crate::config::RoutesConfig;
use crate::stats::EndpointStats;
use crate::{Body, Condition, MessageView};
use ferry_broker::routing::{EndpointTarget, RouteSource, Router};
use ferry_broker::topic_tree::{Match, TopicTree};
use ferry_broker::Message;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct RouteTable {
    filters: TopicTree<usize, ()>,
    routes: Vec<CompiledRoute>,
    /// With `count_unrouted`: counts the messages no route takes.
    unrouted: Option<Arc<AtomicU64>>,
}

struct CompiledRoute {
    condition: Option<Condition>,
    endpoint: Arc<str>,
    stats: Option<Arc<EndpointStats>>,
    priority: u8,
    /// `None`: the message never expires on the way.
    ttl_ms: Option<u64>,
}

impl RouteTable {
    /// The table of `config`'s routes, counting what each sends into
    /// `stats` of its endpoint.
    pub fn new(
        config: &RoutesConfig,
        stats: &BTreeMap<String, Arc<EndpointStats>>,
        unrouted: &Arc<AtomicU64>,
    ) -> RouteTable {
        let mut filters = TopicTree::new();
        let mut routes = Vec::with_capacity(config.routes.len());
        for route in config.routes.values() {
            filters.insert(route.route.filter(), routes.len(), ());
            routes.push(CompiledRoute {
                condition: route.route.condition().cloned(),
                endpoint: route.route.endpoint().into(),
                stats: stats.get(route.route.endpoint()).cloned(),
                priority: route.priority,
                ttl_ms: config
                    .ttl_of(route)
                    .map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
            });
        }
        RouteTable { filters, routes, unrouted: config.count_unrouted.then(|| unrouted.clone()) }
    }

    /// Whether the table routes nothing and counts nothing: then the
    /// broker need not ask it.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty() && self.unrouted.is_none()
    }
}

impl Router for RouteTable {
    fn route(
        &self,
        message: &Message,
        source: RouteSource<'_>,
        now_ms: u64,
        out: &mut Vec<EndpointTarget>,
    ) {
        // Inline for the usual handful of matching routes: this runs for
        // every message published.
        let mut matched: SmallVec<[usize; 8]> = SmallVec::new();
        self.filters.for_each_match(&message.topic, |found| {
            if let Match::Subscriber { key, .. } = found {
                matched.push(*key);
            }
        });
        if matched.is_empty() {
            self.count_unrouted(out);
            return;
        }
        let view = View { message, source };
        let body = Body::new(&message.payload);
        for index in matched {
            let route = &self.routes[index];
            if !route
                .condition
                .as_ref()
                .is_none_or(|condition| condition.matches_with_body(&view, &body))
            {
                continue;
            }
            let expires_at_ms = route.ttl_ms.map_or(0, |ttl| now_ms.saturating_add(ttl).max(1));
            // A message goes to an endpoint once: the highest priority and
            // the longest life of the routes that send it there.
            match out.iter_mut().find(|target| target.endpoint == route.endpoint) {
                Some(target) => {
                    target.priority = target.priority.min(route.priority);
                    target.expires_at_ms = match (target.expires_at_ms, expires_at_ms) {
                        (0, _) | (_, 0) => 0,
                        (a, b) => a.max(b),
                    };
                }
                None => {
                    if let Some(stats) = &route.stats {
                        stats.count_routed();
                    }
                    out.push(EndpointTarget {
                        endpoint: route.endpoint.clone(),
                        priority: route.priority,
                        expires_at_ms,
                    })
                }
            }
        }
        self.count_unrouted(out);
    }
}

impl RouteTable {
    fn count_unrouted(&self, out: &[EndpointTarget]) {
        if let (Some(unrouted), true) = (&self.unrouted, out.is_empty()) {
            unrouted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A broker message as route conditions see it.
struct View<'m> {
    message: &'m Message,
    source: RouteSource<'m>,
}

impl MessageView for View<'_> {
    fn topic(&self) -> &str {
        &self.message.topic
    }

    fn payload(&self) -> &[u8] {
        &self.message.payload
    }

    fn qos(&self) -> u8 {
        self.message.qos as u8
    }

    fn client_id(&self) -> &str {
        self.source.client_id.unwrap_or("")
    }

    fn username(&self) -> Option<&str> {
        self.source.username
    }

    fn content_type(&self) -> Option<&str> {
        self.message.properties.content_type.as_deref()
    }

    fn user_property(&self, name: &str) -> Option<&str> {
        self.message
            .properties
            .user_properties
            .iter()
            .find(|(key, _)| key.as_str() == name)
            .map(|(_, value)| value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RouteConfig;
    use crate::Route;
    use bytes::Bytes;
    use ferry_mqtt::{Properties, QoS};
    use std::time::Duration;

    fn table(routes: &[(&str, &str, u8, Option<Option<Duration>>)]) -> RouteTable {
        let mut config = RoutesConfig::default();
        for &(name, text, priority, ttl) in routes {
            let route = Route::parse(name, text).unwrap();
            config.routes.insert(name.into(), RouteConfig { route, priority, ttl });
        }
        RouteTable::new(&config, &BTreeMap::new(), &Arc::default())
    }

    fn route(table: &RouteTable, topic: &str, payload: &'static [u8]) -> Vec<EndpointTarget> {
        let message = Message::new(
            topic.into(),
            Bytes::from_static(payload),
            QoS::AtLeastOnce,
            false,
            Properties::default(),
            0,
        );
        let mut out = Vec::new();
        table.route(&message, RouteSource::default(), 1_000, &mut out);
        out
    }

    #[test]
    fn a_message_goes_to_each_endpoint_once_at_its_best_priority_and_longest_life() {
        let hour = Some(Some(Duration::from_secs(3600)));
        let table = table(&[
            ("a", "FROM t/# INTO cloud", 9, hour),
            ("b", "FROM t/+ WHERE $body.x = 1 INTO cloud", 2, Some(Some(Duration::from_secs(60)))),
            ("c", "FROM t/x INTO archive", 5, Some(None)),
            ("d", "FROM other INTO archive", 0, None),
        ]);
        let targets = route(&table, "t/x", br#"{"x": 1}"#);
        assert_eq!(targets.len(), 2, "{targets:?}");
        let cloud = targets.iter().find(|t| &*t.endpoint == "cloud").unwrap();
        assert_eq!((cloud.priority, cloud.expires_at_ms), (2, 1_000 + 3_600_000));
        let archive = targets.iter().find(|t| &*t.endpoint == "archive").unwrap();
        assert_eq!((archive.priority, archive.expires_at_ms), (5, 0), "ttl 0: never expires");
        let targets = route(&table, "t/x", b"not json");
        assert_eq!(targets.iter().map(|t| (&*t.endpoint, t.priority)).collect::<Vec<_>>().len(), 2);
        assert!(route(&table, "elsewhere", b"").is_empty());
        let default_ttl = route(&table, "other", b"");
        assert_eq!(default_ttl[0].expires_at_ms, 1_000 + 2 * 3_600_000, "default_ttl is 2h");
    }
}
