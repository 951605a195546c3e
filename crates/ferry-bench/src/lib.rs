//! `ferry-bench`: the load generator behind `ferry bench`, pointed at any
//! MQTT broker so that Ferry and other brokers are measured by the same tool
//! in the same run.
//!
//! A scenario ([`Scenario`]) opens load connections, drives publishers and
//! subscribers, and returns a [`Report`]: connect rate, send and receive
//! rates, loss, duplicates and reordering, end-to-end latency percentiles
//! from an HDR histogram (and at QoS 1/2 those of the publishers' wait for
//! PUBACK or PUBREC), and the CPU time and RSS of the broker (given its
//! pid) and of the bench itself.
//!
//! The load clients are not a general MQTT client. Each connection is one
//! task over a `TcpStream` with a read buffer and a capped write buffer
//! (`client`), PUBLISH packets are stamped from a template encoded once by
//! `ferry-mqtt` (`publisher`), and many of them leave in one `write`. That
//! keeps the generator several times lighter than the broker it loads, which
//! the report shows with the bench's own CPU time.
//!
//! Every payload starts with a 16-byte header (`payload`): publisher id,
//! sequence number and send time on a monotonic clock shared by the whole
//! process (`clock`), from which the subscriber side (`subscriber`,
//! `tracker`) counts loss, duplicates and reordering and measures latency.
//! Closed-loop scenarios timestamp a message when it is queued; open-loop
//! ones stamp the time it was due, so a stalled broker cannot hide the
//! delay it caused (coordinated omission).

pub mod args;
pub mod client;
pub mod clock;
pub mod compare;
mod error;
pub mod histogram;
pub mod pacer;
pub mod payload;
pub mod plot;
pub mod procstat;
pub mod publisher;
pub mod report;
pub mod scenario;
pub mod subscriber;
pub mod syscalls;
pub mod timeline;
pub mod tracker;
pub mod twins;
pub mod upstream;

pub use args::{
    Action, BenchCommand, BurstArgs, CommonArgs, ConnArgs, FaninArgs, FanoutArgs, MqttVersion,
    P2pArgs, PubsubArgs, Scenario,
};
pub use error::BenchError;
pub use report::Report;

/// Runs one scenario against the broker named in its options. Needs a Tokio
/// runtime with the time and I/O drivers; a multi-threaded one lets the
/// load spread over the cores.
pub async fn run(scenario: Scenario) -> Result<Report, BenchError> {
    clock::base();
    match scenario {
        Scenario::Pubsub(args) => scenario::pubsub::run(args).await,
        Scenario::P2p(args) => scenario::p2p::run(args).await,
        Scenario::Fanout(args) => scenario::fanout::run(args).await,
        Scenario::Fanin(args) => scenario::fanin::run(args).await,
        Scenario::Burst(args) => scenario::burst::run(args).await,
        Scenario::Conn(args) => scenario::conn::run(args).await,
    }
}

impl Scenario {
    /// Where the SVG charts are to be written, if anywhere.
    pub fn plots_dir(&self) -> Option<&std::path::Path> {
        match self {
            Scenario::Pubsub(args) => args.common.plots.as_deref(),
            Scenario::P2p(args) => args.common.plots.as_deref(),
            Scenario::Fanout(args) => args.common.plots.as_deref(),
            Scenario::Fanin(args) => args.common.plots.as_deref(),
            Scenario::Burst(args) => args.common.plots.as_deref(),
            Scenario::Conn(_) => None,
        }
    }

    /// Where the JSON report is to be written, if anywhere.
    pub fn json_path(&self) -> Option<&std::path::Path> {
        match self {
            Scenario::Pubsub(args) => args.common.json.as_deref(),
            Scenario::P2p(args) => args.common.json.as_deref(),
            Scenario::Fanout(args) => args.common.json.as_deref(),
            Scenario::Fanin(args) => args.common.json.as_deref(),
            Scenario::Burst(args) => args.common.json.as_deref(),
            Scenario::Conn(args) => args.json.as_deref(),
        }
    }
}
