//! A `ferry serve` child process for integration tests.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A `ferry serve` on an ephemeral port, stopped with SIGTERM on drop.
pub struct Ferry {
    child: Child,
    pub port: u16,
    _data_dir: tempfile::TempDir,
}

impl Ferry {
    /// Starts the broker with MQTT only, its data in a fresh temporary
    /// directory named after `test`, and waits until it logs its MQTT
    /// address.
    pub fn start(test: &str) -> Ferry {
        let data_dir = tempfile::Builder::new()
            .prefix(&format!("ferry-{test}-"))
            .tempdir()
            .expect("a temporary data directory");
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["serve", "--mqtt", "127.0.0.1:0", "--ws", "", "--http", ""])
            .arg("--data-dir")
            .arg(data_dir.path())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ferry starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let port = loop {
            let line = lines.next().expect("ferry logs its listener").expect("stderr is text");
            if let Some(address) = line.split("listening on mqtt://").nth(1) {
                break address.trim().rsplit(':').next().unwrap().parse().unwrap();
            }
        };
        // Keep draining stderr so the broker never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ferry { child, port, _data_dir: data_dir }
    }

    /// The broker's process id, for `--broker-pid`.
    #[allow(dead_code)] // Not every test binary that includes this module samples the broker.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Ferry {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let status = self.child.wait().expect("ferry exits");
        assert!(status.success(), "ferry exited with {status}");
    }
}
