//! `burst --receive-from`: the subscriber at the upstream of an edge.
//!
//! IotEdgePerf judges an edge by what reaches the cloud: its transmitter
//! publishes into the edge hub, and rates, latency and backlog are read
//! where the messages arrive upstream. With `--receive-from`, the burst's
//! publishers still go to `--broker` (the edge) and its subscriber connects
//! to the broker the edge forwards to, subscribed to the topics as that
//! broker sees them: an uplink may rewrite them with a prefix.
//!
//! Such a run is often about an outage: the upstream goes away while the
//! edge keeps taking messages, and comes back to a backlog. So a subscriber
//! with a persistent session (`--session-expiry`) whose connection to the
//! upstream is lost connects again every [`RETRY_INTERVAL`], resuming its
//! session, so that nothing the upstream took meanwhile is lost on its way
//! to the bench. When it got back in is when the upstream returned: the
//! drain of the edge's backlog is measured from there ([`Return`]).

use crate::client::Conn;
use crate::BenchError;
use ferry_mqtt::{topic, ProtocolVersion, QoS};
use std::net::SocketAddr;
use std::time::Duration;

/// Between attempts to reach an upstream that is away: short against the
/// drain being measured, long enough not to flood a broker that is
/// recovering its log with connects.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(100);

/// Where and how the subscriber listens at the upstream.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub broker: SocketAddr,
    /// The published topics as the upstream sees them.
    pub filter: String,
    pub qos: QoS,
    pub version: ProtocolVersion,
    /// Of the subscriber's session; resuming it needs one above 0.
    pub session_expiry: u32,
}

/// When the subscriber last got back in to the upstream, and the distinct
/// messages it had received before: what arrives after that is the drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Return {
    pub at_ns: u64,
    pub received_before: u64,
}

/// The subscriber's filter at the upstream: `receive_topic` if given (an
/// uplink that adds `edge-1/` needs `edge-1/bench/burst/#`), else the
/// filter of what is published, for an uplink that keeps topics as they
/// are.
pub fn receive_filter(receive_topic: Option<&str>, published: &str) -> Result<String, BenchError> {
    let filter = receive_topic.unwrap_or(published);
    if topic::is_valid_topic_filter(filter) {
        Ok(filter.to_owned())
    } else {
        Err(BenchError::Options(format!("--receive-topic {filter:?} is not an MQTT topic filter")))
    }
}

impl Upstream {
    /// One attempt to get back in after the connection was lost: resumes
    /// the session `client_id` left, and subscribes again only if the
    /// upstream no longer had it (then what it took meanwhile went to
    /// nobody and counts as lost). `None` when the upstream is still away
    /// (refused, reset, silent), after [`RETRY_INTERVAL`], so that a caller
    /// can simply try again.
    pub async fn try_resume(&self, client_id: &str) -> Result<Option<Conn>, BenchError> {
        let attempt = async {
            let (mut conn, connack) =
                Conn::resume(self.broker, client_id.to_owned(), self.version, self.session_expiry)
                    .await?;
            // A resumed session holds the subscription, and its queued
            // messages may follow CONNACK at once, where a SUBSCRIBE's
            // wait for SUBACK would take them for a protocol error.
            if !connack.session_present {
                conn.subscribe(&self.filter, self.qos).await?;
            }
            Ok(conn)
        };
        match attempt.await {
            Ok(conn) => Ok(Some(conn)),
            Err(
                BenchError::Connect { .. } | BenchError::Io { .. } | BenchError::Timeout { .. },
            ) => {
                tokio::time::sleep(RETRY_INTERVAL).await;
                Ok(None)
            }
            Err(other) => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_defaults_to_what_is_published() {
        assert_eq!(receive_filter(None, "bench/burst/#").unwrap(), "bench/burst/#");
        assert_eq!(
            receive_filter(Some("edge-1/bench/burst/#"), "bench/burst/#").unwrap(),
            "edge-1/bench/burst/#"
        );
        assert_eq!(receive_filter(Some("+/burst/+"), "bench/burst/#").unwrap(), "+/burst/+");
    }

    #[test]
    fn a_filter_that_is_not_one_is_refused() {
        for bad in ["", "edge-1/#/burst", "edge-1/bench#", "$share/g"] {
            let err = receive_filter(Some(bad), "bench/burst/#").unwrap_err();
            assert!(matches!(err, BenchError::Options(_)), "{bad:?}: {err}");
        }
    }

    #[tokio::test]
    async fn an_upstream_that_is_away_is_tried_again() {
        // A port nothing listens on: bind one, then close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let upstream = Upstream {
            broker: port,
            filter: "bench/burst/#".into(),
            qos: QoS::AtLeastOnce,
            version: ProtocolVersion::V5,
            session_expiry: 600,
        };
        let started = tokio::time::Instant::now();
        assert!(upstream.try_resume("sub").await.unwrap().is_none());
        assert!(started.elapsed() >= RETRY_INTERVAL, "waits before the next attempt");
    }
}
