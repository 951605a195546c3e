//! Why a benchmark run failed.

use ferry_mqtt::{DecodeError, EncodeError, PacketType, ReasonCode};
use std::io;
use thiserror::Error;

/// A failed run. Loss, duplicates and slowness are results, not errors: an
/// error means the run could not be carried out or measured.
#[derive(Debug, Error)]
pub enum BenchError {
    /// `--broker` is not `mqtt://host:port`.
    #[error("broker URL {0:?} is not mqtt://host:port")]
    BrokerUrl(String),
    /// Name resolution or TCP connect failed.
    #[error("cannot connect to {broker}: {source}")]
    Connect { broker: String, source: io::Error },
    /// A socket failed or the broker closed it mid-run.
    #[error("{client}: connection lost: {source}")]
    Io { client: String, source: io::Error },
    /// The broker sent bytes that are not MQTT.
    #[error("{client}: broker sent a malformed packet: {source}")]
    Decode { client: String, source: DecodeError },
    /// A packet of ours could not be encoded (e.g. a topic too long).
    #[error("cannot encode a packet: {0}")]
    Encode(#[from] EncodeError),
    /// The broker answered CONNECT, SUBSCRIBE or PUBLISH with a failure code.
    #[error("{client}: broker refused {what}: {code:?}")]
    Refused { client: String, what: &'static str, code: ReasonCode },
    /// The broker sent a packet that has no place at this point.
    #[error("{client}: unexpected {packet:?} from the broker ({why})")]
    Protocol { client: String, packet: PacketType, why: &'static str },
    /// The broker did not answer in time.
    #[error("{client}: no {what} within {seconds} s")]
    Timeout { client: String, what: &'static str, seconds: u64 },
    /// The scenario's options contradict each other.
    #[error("invalid options: {0}")]
    Options(String),
    /// `--broker-pid` names a process whose /proc entry cannot be read.
    #[error("cannot sample process {pid}: {source}")]
    Proc { pid: u32, source: io::Error },
    /// A load task panicked or was cancelled.
    #[error("a load task failed: {0}")]
    Task(String),
    /// An open-loop publisher's timer (a timerfd) failed.
    #[error("publisher timer: {0}")]
    Timer(io::Error),
}
