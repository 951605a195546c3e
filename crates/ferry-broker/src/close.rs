//! Why a connection ends, what the client is told, and what is logged.

use ferry_mqtt::{DecodeError, ReasonCode};
use std::net::SocketAddr;

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

    /// One line per closed connection; errors the client caused at `warn`,
    /// ordinary ends at `debug`.
    pub(crate) fn log(&self, peer: SocketAddr, client_id: Option<&str>) {
        let client_id = client_id.unwrap_or("");
        match self {
            Close::Malformed(error) => {
                tracing::warn!(%peer, client_id, reason = ?error.reason_code(), "closing connection: malformed packet: {error}");
            }
            Close::Truncated(bytes) => {
                tracing::warn!(%peer, client_id, "closing connection: truncated packet: connection closed after {bytes} bytes of an incomplete packet");
            }
            Close::Protocol { reason, message } => {
                tracing::warn!(%peer, client_id, ?reason, "closing connection: protocol error: {message}");
            }
            Close::KeepAliveTimeout => {
                tracing::info!(%peer, client_id, "closing connection: keep-alive timeout")
            }
            Close::CredentialsExpired => {
                tracing::info!(%peer, client_id, "closing connection: credentials expired (JWT exp)")
            }
            Close::TakenOver => {
                tracing::info!(%peer, client_id, "closing connection: session taken over")
            }
            Close::Io => tracing::debug!(%peer, client_id, "connection lost"),
            Close::PeerClosed => tracing::debug!(%peer, client_id, "connection closed by peer"),
            Close::Disconnected { .. } => tracing::debug!(%peer, client_id, "client disconnected"),
            Close::ServerShuttingDown => {
                tracing::debug!(%peer, client_id, "closing connection: shutdown")
            }
            Close::Administrative(reason) => {
                tracing::info!(%peer, client_id, reason, "closing connection: administrative action")
            }
        }
    }
}
