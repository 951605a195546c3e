//! A broker's life during one run: started fresh from its suite entry with
//! its output in a log file, awaited until it accepts connections, stopped
//! with SIGTERM (SIGKILL if it lingers) and reaped. Fresh per run so one
//! run's leftovers (queues, memory, sessions) never weigh on the next.

use super::suite::{substitute, Broker, Placeholders};
use crate::BenchError;
use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// How long a broker may take to accept connections, and to exit after SIGTERM.
const PATIENCE: Duration = Duration::from_secs(10);

/// How often a starting broker is probed for a listening port.
const POLL: Duration = Duration::from_millis(25);

/// How long a version command may run.
const VERSION_PATIENCE: Duration = Duration::from_secs(5);

/// Lines of a broker's log shown when it fails.
const LOG_TAIL_LINES: usize = 20;

/// A child process whose stdout and stderr go to one file. Dropping it kills
/// the process (Tokio reaps it), so an error or a panic in the middle of a
/// suite leaves no broker behind on its port.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn spawn(argv: &[String], log: &Path) -> std::io::Result<Process> {
        let out = File::create(log)?;
        let err = out.try_clone()?;
        let (program, args) = argv.split_first().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command")
        })?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()?;
        Ok(Process { child, log: log.to_owned() })
    }

    /// The pid; 0 once the process has been reaped.
    fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// The exit status, if the process has exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits up to `patience` for the process to exit.
    async fn wait(&mut self, patience: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(patience, self.child.wait()).await.ok().and_then(Result::ok)
    }

    fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.child.id().and_then(|pid| libc::pid_t::try_from(pid).ok()) {
            // SAFETY: kill(2) has no memory effects; the pid is our unreaped
            // child, so it cannot have been reused by another process.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// SIGTERM, then SIGKILL if it is still there after [`PATIENCE`]; reaped either way.
    async fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        self.signal(libc::SIGTERM);
        if self.wait(PATIENCE).await.is_none() {
            self.kill().await;
        }
    }

    /// SIGKILL, and reap.
    async fn kill(&mut self) {
        // Fails only if the process is already reaped, which is the goal.
        let _ = self.child.kill().await;
    }

    /// The last lines the process wrote.
    fn log_tail(&self) -> String {
        log_tail(&self.log, LOG_TAIL_LINES)
    }
}

/// A broker started for one run.
pub struct RunningBroker {
    name: String,
    process: Process,
}

impl RunningBroker {
    /// Starts `broker` with its config and data in `dir` (created, and
    /// expected fresh) and returns once 127.0.0.1:port accepts connections.
    pub async fn start(
        broker: &Broker,
        ferry: &str,
        dir: &Path,
    ) -> Result<RunningBroker, BenchError> {
        ensure_port_free(broker)?;
        let failed = |message: String, log_tail: String| BenchError::Broker {
            broker: broker.name.clone(),
            message,
            log_tail,
        };
        let data = dir.join("data");
        let config = dir.join("config");
        std::fs::create_dir_all(&data)
            .map_err(|e| failed(format!("cannot create {}: {e}", data.display()), String::new()))?;
        let values = Placeholders {
            ferry,
            config: &config.to_string_lossy(),
            port: broker.port,
            dir: &data.to_string_lossy(),
        };
        if let Some(text) = &broker.config {
            std::fs::write(&config, substitute(text, &values)).map_err(|e| {
                failed(format!("cannot write {}: {e}", config.display()), String::new())
            })?;
        }
        let argv: Vec<String> = broker.command.iter().map(|arg| substitute(arg, &values)).collect();
        let mut process = Process::spawn(&argv, &dir.join("log"))
            .map_err(|e| failed(format!("cannot run {argv:?}: {e}"), String::new()))?;

        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = process.exited() {
                return Err(failed(format!("exited at start ({status})"), process.log_tail()));
            }
            let probe = tokio::time::timeout(
                POLL,
                tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, broker.port)),
            );
            if let Ok(Ok(_)) = probe.await {
                return Ok(RunningBroker { name: broker.name.clone(), process });
            }
            if Instant::now() >= deadline {
                let message = format!(
                    "does not accept connections on 127.0.0.1:{} after {} s",
                    broker.port,
                    PATIENCE.as_secs()
                );
                return Err(failed(message, process.log_tail()));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// For `--broker-pid`.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Stops the broker. An error if it had already exited: it died during
    /// the run, and the error says how and shows the end of its log.
    pub async fn stop(mut self) -> Result<(), BenchError> {
        if let Some(status) = self.process.exited() {
            return Err(BenchError::Broker {
                broker: self.name,
                message: format!("exited during the run ({status})"),
                log_tail: self.process.log_tail(),
            });
        }
        self.process.stop().await;
        Ok(())
    }
}

/// An error if something already listens on the broker's port: the bench
/// would load that instead of the broker it names.
pub fn ensure_port_free(broker: &Broker) -> Result<(), BenchError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, broker.port)).map(drop).map_err(|source| {
        BenchError::PortInUse { broker: broker.name.clone(), port: broker.port, source }
    })
}

/// The first line `argv` prints (stdout, else stderr), run in `dir`; a
/// non-zero exit is fine (`mosquitto -h` exits 3 after printing its
/// version). What went wrong, if nothing could be read.
pub async fn version_line(argv: &[String], dir: &Path) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let log = dir.join("version");
    let mut process =
        Process::spawn(argv, &log).map_err(|e| format!("cannot run {argv:?}: {e}"))?;
    if process.wait(VERSION_PATIENCE).await.is_none() {
        process.kill().await;
        return Err(format!("{argv:?} still running after {} s", VERSION_PATIENCE.as_secs()));
    }
    let text = std::fs::read(&log).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&text);
    let line = text.lines().map(str::trim).find(|line| !line.is_empty());
    line.map(str::to_owned).ok_or_else(|| format!("{argv:?} printed nothing"))
}

/// The last `lines` lines of the file at `path`, or why it cannot be read.
fn log_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(error) => format!("(cannot read {}: {error})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferry-compare-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn shell(name: &str, port: u16, script: &str) -> Broker {
        Broker {
            name: name.into(),
            command: vec!["sh".into(), "-c".into(), script.into()],
            config: None,
            port,
            version: None,
        }
    }

    #[test]
    fn compare_log_tail_keeps_the_last_lines() {
        let dir = scratch("tail");
        let path = dir.join("log");
        std::fs::write(&path, "1\n2\n3\n4\n").unwrap();
        assert_eq!(log_tail(&path, 2), "3\n4");
        assert_eq!(log_tail(&path, 10), "1\n2\n3\n4");
        assert!(log_tail(&dir.join("missing"), 2).starts_with("(cannot read"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn compare_version_is_the_first_line_even_on_failure() {
        let dir = scratch("version");
        let argv = |s: &str| vec!["sh".to_owned(), "-c".to_owned(), s.to_owned()];
        let noisy = argv("echo; echo 'x version 2.0.11'; echo more; exit 3");
        assert_eq!(version_line(&noisy, &dir).await.unwrap(), "x version 2.0.11");
        assert!(version_line(&argv("true"), &dir).await.unwrap_err().contains("printed nothing"));
        let missing = version_line(&["/nonexistent/broker".to_owned()], &dir).await;
        assert!(missing.unwrap_err().contains("cannot run"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn compare_broker_that_exits_at_start_shows_its_log() {
        let dir = scratch("exits");
        let free = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let broker = shell("Doomed", port, "echo 'bad config line 3' >&2; exit 2");
        let error = RunningBroker::start(&broker, "ferry", &dir).await.err().unwrap().to_string();
        assert!(error.starts_with("broker Doomed: exited at start"), "{error}");
        assert!(error.contains("bad config line 3"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn compare_busy_port_is_refused() {
        let dir = scratch("busy");
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let broker = shell("Late", port, "sleep 5");
        let error = RunningBroker::start(&broker, "ferry", &dir).await.err().unwrap().to_string();
        assert!(error.contains(&format!("port {port}")), "{error}");
        assert!(error.contains("Late"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
