//! Why a connection ends, what the client is told, and what is logged.

use ferry_mqtt::{DecodeError, PacketType, ReasonCode};
use std::net::SocketAddr;

/// The names of the reasons a connected client's connection ends, in the
/// order of [`Close::index`]: the disconnect log line's `reason` and the
/// labels of `ferry_disconnections_total`.
pub const DISCONNECT_REASONS: [&str; 11] = [
    "client_gone",
    "truncated_packet",
    "connection_lost",
    "client_disconnect",
    "malformed_packet",
    "protocol_error",
    "keep_alive_timeout",
    "credentials_expired",
    "taken_over",
    "server_shutdown",
    "administrative_action",
];

/// The end of a connection. Decides the DISCONNECT reason code sent to a
/// v5 client, the log line, and whether the will is published.
#[derive(Debug)]
pub(crate) enum Close {
    /// The peer closed the socket without DISCONNECT.
    PeerClosed,
    /// The peer closed the socket in the middle of a packet, after sending
    /// this many bytes of it.
    Truncated(usize),
    /// The socket failed.
    Io,
    /// The client sent DISCONNECT; 0x04 asks for the will anyway.
    Disconnected {
        publish_will: bool,
    },
    /// The bytes were not a valid packet.
    Malformed(DecodeError),
    /// A valid packet broke the protocol's rules.
    Protocol {
        reason: ReasonCode,
        message: String,
    },
    KeepAliveTimeout,
    /// The client's credentials expired (a JWT's `exp`).
    CredentialsExpired,
    /// Another connection attached to the session.
    TakenOver,
    ServerShuttingDown,
    /// An administrator closed it (`DELETE /api/v1/clients/{id}`), for
    /// this reason.
    Administrative(String),
}

impl Close {
    pub(crate) fn protocol(reason: ReasonCode, message: impl Into<String>) -> Close {
        Close::Protocol { reason, message: message.into() }
    }

    /// The DISCONNECT reason to send to a v5 client, if one is sent.
    pub(crate) fn reason_code(&self) -> Option<ReasonCode> {
        match self {
            Close::PeerClosed | Close::Truncated(_) | Close::Io | Close::Disconnected { .. } => {
                None
            }
            // Closed without a word, as Mosquitto closes: a remaining length
            // that is no number leaves no packet to answer, and a client
            // that sent DISCONNECT has said goodbye, however badly.
            Close::Malformed(
                DecodeError::MalformedRemainingLength
                | DecodeError::InvalidReasonCode { packet: PacketType::Disconnect, .. },
            ) => None,
            Close::Malformed(error) => Some(error.reason_code()),
            Close::Protocol { reason, .. } => Some(*reason),
            Close::KeepAliveTimeout => Some(ReasonCode::KeepAliveTimeout),
            Close::CredentialsExpired => Some(ReasonCode::MaximumConnectTime),
            Close::TakenOver => Some(ReasonCode::SessionTakenOver),
            Close::ServerShuttingDown => Some(ReasonCode::ServerShuttingDown),
            Close::Administrative(_) => Some(ReasonCode::AdministrativeAction),
        }
    }

    /// The human-readable explanation, sent as the reason string.
    pub(crate) fn explanation(&self) -> Option<String> {
        match self {
            Close::Malformed(error) => Some(error.to_string()),
            Close::Protocol { message, .. } => Some(message.clone()),
            Close::KeepAliveTimeout => Some("keep-alive timeout".into()),
            Close::CredentialsExpired => Some("credentials expired".into()),
            Close::TakenOver => Some("another connection took over the session".into()),
            Close::ServerShuttingDown => Some("server shutting down".into()),
            Close::Administrative(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    pub(crate) fn publishes_will(&self) -> bool {
        match self {
            Close::Disconnected { publish_will } => *publish_will,
            Close::ServerShuttingDown => false,
            _ => true,
        }
    }

    /// The reason's place in [`DISCONNECT_REASONS`].
    pub(crate) fn index(&self) -> usize {
        match self {
            Close::PeerClosed => 0,
            Close::Truncated(_) => 1,
            Close::Io => 2,
            Close::Disconnected { .. } => 3,
            Close::Malformed(_) => 4,
            Close::Protocol { .. } => 5,
            Close::KeepAliveTimeout => 6,
            Close::CredentialsExpired => 7,
            Close::TakenOver => 8,
            Close::ServerShuttingDown => 9,
            Close::Administrative(_) => 10,
        }
    }

    /// The reason's name in the disconnect log line and the
    /// `ferry_disconnections_total` metric: one word a query can match.
    pub(crate) fn name(&self) -> &'static str {
        DISCONNECT_REASONS[self.index()]
    }

    fn description(&self) -> String {
        match self {
            Close::PeerClosed => "connection closed by peer".into(),
            Close::Truncated(bytes) => {
                format!("connection closed by peer after {bytes} bytes of an incomplete packet")
            }
            Close::Io => "connection lost".into(),
            Close::Disconnected { publish_will: false } => "DISCONNECT".into(),
            Close::Disconnected { publish_will: true } => "DISCONNECT with will (0x04)".into(),
            Close::Malformed(error) => format!("closing connection: malformed packet: {error}"),
            Close::Protocol { message, .. } => {
                format!("closing connection: protocol error: {message}")
            }
            Close::KeepAliveTimeout => "closing connection: keep-alive timeout".into(),
            Close::CredentialsExpired => "closing connection: credentials expired (JWT exp)".into(),
            Close::TakenOver => "closing connection: session taken over".into(),
            Close::ServerShuttingDown => "closing connection: server shutting down".into(),
            Close::Administrative(reason) => {
                format!("closing connection: administrative action: {reason}")
            }
        }
    }

    /// The one line of a connected client's end, at `info` whatever the
    /// reason: an operator reads connects and disconnects together. A
    /// connection that never completed CONNECT gets [`Close::log_refused`]
    /// instead.
    pub(crate) fn log_disconnect(&self, peer: SocketAddr, client_id: &str, listener: &str) {
        let reason_code =
            self.reason_code().map(|code| format!("0x{:02X}", code as u8)).unwrap_or_default();
        tracing::info!(
            client_id,
            %peer,
            listener,
            reason = self.name(),
            reason_code,
            "client disconnected: {}",
            self.description()
        );
    }

    /// The end of a connection before its CONNECT was accepted: errors the
    /// client caused (a refused CONNECT among them) at `warn`, a peer that
    /// merely went away at `debug`.
    pub(crate) fn log_refused(&self, peer: SocketAddr, listener: &str) {
        let reason = self.name();
        match self {
            Close::Malformed(_) | Close::Truncated(_) | Close::Protocol { .. } => {
                tracing::warn!(%peer, listener, reason, "{}", self.description())
            }
            _ => tracing::debug!(%peer, listener, reason, "{}", self.description()),
        }
    }
}
