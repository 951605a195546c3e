//! What the admin API sees of one live connection: where it came from,
//! what it said in its CONNECT, and its traffic so far.
//!
//! Shared by the connection's task, which alone writes the counters, and
//! its session (`Session::connection`), through which `inspect.rs` finds
//! it. The counters are relaxed atomics on this connection's own
//! allocation: the publish path adds to them without a lock and without
//! touching a cache line another connection writes.

use crate::listener::Listener;
use ferry_auth::Principal;
use ferry_mqtt::ProtocolVersion;
use std::net::{Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One connection's particulars and traffic.
#[derive(Debug)]
pub(crate) struct ConnectionInfo {
    /// The peer's address, an IPv4 one mapped into IPv6: 18 bytes where a
    /// `SocketAddr` takes 32 (held by every connection, so this one is
    /// held to a size budget: `connection::tests`).
    address: ([u8; 16], u16),
    pub listener: Arc<Listener>,
    /// Who the client proved to be, shared with its `Client`; `None` for
    /// an anonymous one. One pointer where its user name alone took two.
    principal: Option<Arc<Principal>>,
    pub version: ProtocolVersion,
    /// The keep-alive in force (the server's, when it overrode the
    /// client's), in seconds.
    pub keep_alive_secs: u16,
    pub clean_start: bool,
    /// Unix milliseconds.
    pub connected_at_ms: u64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// PUBLISH packets received from the client.
    pub messages_in: AtomicU64,
    /// PUBLISH packets sent to the client.
    pub messages_out: AtomicU64,
}

impl ConnectionInfo {
    pub(crate) fn new(
        address: SocketAddr,
        listener: Arc<Listener>,
        principal: Option<Arc<Principal>>,
        version: ProtocolVersion,
        keep_alive_secs: u16,
        clean_start: bool,
    ) -> ConnectionInfo {
        let ip = match address.ip() {
            std::net::IpAddr::V4(ip) => ip.to_ipv6_mapped(),
            std::net::IpAddr::V6(ip) => ip,
        };
        ConnectionInfo {
            address: (ip.octets(), address.port()),
            listener,
            principal,
            version,
            keep_alive_secs,
            clean_start,
            connected_at_ms: crate::clock::unix_ms(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            messages_out: AtomicU64::new(0),
        }
    }

    /// The proven user name, if any.
    pub(crate) fn username(&self) -> Option<&str> {
        self.principal.as_ref()?.username.as_deref()
    }

    /// The peer's address, as the socket gave it (without an IPv6 scope).
    pub(crate) fn address(&self) -> SocketAddr {
        let (ip, port) = self.address;
        SocketAddr::new(Ipv6Addr::from(ip).to_canonical(), port)
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_address_reads_back_as_the_socket_gave_it() {
        let listener = Arc::new(Listener::new(
            "test".into(),
            crate::listener::Protocol::Mqtt,
            None,
            ferry_auth::ListenerAuth::default(),
            0,
        ));
        for address in ["192.0.2.7:1883", "[2001:db8::1]:8883", "[::1]:1", "0.0.0.0:65535"] {
            let address: SocketAddr = address.parse().unwrap();
            let info =
                ConnectionInfo::new(address, listener.clone(), None, ProtocolVersion::V5, 60, true);
            assert_eq!(info.address(), address);
            assert_eq!(info.address().to_string(), address.to_string());
        }
    }
}
