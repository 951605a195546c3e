//! A throwaway PostgreSQL cluster for a test: `initdb` in a temporary
//! directory, `pg_ctl start` on a Unix socket there (no TCP port, so runs
//! in parallel cannot collide), and `pg_ctl stop` when dropped. Debian's
//! `postgresql` package provides the programs; scripts/test.sh installs it.
//!
//! PostgreSQL refuses to run as root, so as root the cluster runs as the
//! `postgres` user the package creates.

use std::path::PathBuf;
use std::process::Command;

pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_root: bool,
}

impl Cluster {
    pub fn start() -> Cluster {
        let bin = find_bin();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let as_root = is_root();
        if as_root {
            run(Command::new("chown").arg("postgres").arg(dir.path()));
        }
        let cluster = Cluster { dir, bin, as_root };
        let data = cluster.data();
        cluster.run_pg("initdb", &["-D", &data, "-U", "ferry", "--auth=trust", "-E", "UTF8"]);
        let socket = cluster.socket_dir();
        let options = format!("-k {socket} -c listen_addresses='' -c fsync=on");
        let log = format!("{}/postgres.log", socket);
        cluster.run_pg("pg_ctl", &["-D", &data, "-o", &options, "-l", &log, "-w", "start"]);
        cluster
    }

    /// The connection string of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("host={} user=ferry dbname=postgres", self.socket_dir())
    }

    fn data(&self) -> String {
        format!("{}/data", self.socket_dir())
    }

    fn socket_dir(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn run_pg(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = if self.as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        run(command.args(args));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        self.run_pg("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }
}

fn run(command: &mut Command) {
    let output = command.output().unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Where `initdb` and `pg_ctl` are: on the PATH, or in Debian's versioned
/// directory, the newest version first.
fn find_bin() -> PathBuf {
    if let Ok(path) = std::env::var("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return dir;
            }
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.flatten().map(|entry| entry.path().join("bin")).collect())
        .unwrap_or_default();
    versions.sort();
    versions
        .into_iter()
        .rev()
        .find(|bin| bin.join("initdb").is_file())
        .expect("PostgreSQL's initdb (Debian: apt install postgresql; scripts/test.sh does)")
}

/// Whether this process runs as root, from its real uid in /proc.
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uid = status.lines().find(|line| line.starts_with("Uid:"))?;
            Some(uid.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}
