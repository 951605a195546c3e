//! Why a benchmark run failed.

use ferry_mqtt::{DecodeError, EncodeError, PacketType, ReasonCode};
use std::io;
use std::path::PathBuf;
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
    /// `compare`: the suite file cannot be read.
    #[error("{path}: cannot read: {source}")]
    SuiteRead { path: PathBuf, source: io::Error },
    /// `compare`: the suite file is not a valid suite.
    #[error("{path}:{line}: {key}: {message}")]
    Suite { path: PathBuf, line: usize, key: String, message: String },
    /// `compare`: a broker did not start, or died during a run.
    #[error("broker {broker}: {message}{}", log_section(.log_tail))]
    Broker { broker: String, message: String, log_tail: String },
    /// `compare`: something already listens on a broker's port, so the
    /// bench would load that instead.
    #[error("broker {broker}: port {port} on 127.0.0.1 is already in use: {source}")]
    PortInUse { broker: String, port: u16, source: io::Error },
    /// `compare`: the running executable, which `{ferry}` stands for, cannot be found.
    #[error("cannot locate the running executable for {{ferry}}: {0}")]
    CurrentExe(io::Error),
    /// `compare`: the document, a chart or the JSON cannot be written.
    #[error("cannot write {path}: {source}")]
    Output { path: PathBuf, source: io::Error },
    /// `compare`: the suite ran to the end, but some runs failed against
    /// some brokers; the document shows which and why.
    #[error("{failed} of {total} runs against a broker failed; {output} shows why")]
    RunsFailed { failed: usize, total: usize, output: PathBuf },
}

/// The end of a broker's log, set apart under the error it explains.
fn log_section(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("\n--- last lines of its log ---\n{tail}")
    }
}
