//! Each open connection's place in the event journal, kept in one small
//! JSON file beside the connections (`twin-connection-places.json`,
//! `{"<connection id>": <place>}`), so that a Ferry restarted after a
//! crash or a shutdown sends the events its connections had not settled
//! (`progress.rs`, `feed.rs`).
//!
//! The file is written every [`FLUSH_EVERY`] while places move, and at
//! once when a connection starts for the first time: written to a
//! temporary file, fsynced, renamed over the old one. A place is
//! per node, like the connections file: on a shared PostgreSQL store each
//! Ferry keeps its own.

use super::progress::Progress;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// How often moved places are written: what a crash can make a
/// connection send twice is about this much of its events.
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);

pub struct Places {
    file: PathBuf,
    state: Mutex<State>,
    /// Wakes the flusher before its next tick.
    flush_now: Arc<Notify>,
}

struct State {
    /// Read from the file at start: where each connection resumes.
    stored: BTreeMap<String, u64>,
    /// The running connections' progress, by connection id.
    running: BTreeMap<String, Arc<Progress>>,
    /// What the file holds now.
    written: BTreeMap<String, u64>,
}

/// A places file that cannot be read at start.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct PlacesError {
    pub file: PathBuf,
    pub message: String,
}

impl Places {
    /// Reads `file`; a missing file holds no places.
    pub fn open(file: PathBuf) -> Result<Places, PlacesError> {
        let stored: BTreeMap<String, u64> = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|error| PlacesError { file: file.clone(), message: error.to_string() })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => return Err(PlacesError { file, message: error.to_string() }),
        };
        let written = stored.clone();
        Ok(Places {
            file,
            state: Mutex::new(State { stored, running: BTreeMap::new(), written }),
            flush_now: Arc::default(),
        })
    }

    /// The progress of connection `id` starting now: on from where the
    /// run it replaces stands, else from the stored place.
    pub fn start(&self, id: &str) -> Arc<Progress> {
        let mut state = self.lock();
        // From the replaced run's exact place, not the durable one a flush
        // behind: its events settled since the last flush are not sent
        // twice. (One of the replaced run's commits still announcing
        // itself out of order this very moment would be missed.)
        let place = match state.running.get(id) {
            Some(replaced) => replaced.place(),
            None => state.stored.get(id).copied(),
        };
        let progress = Arc::new(Progress::starting_at(place, self.flush_now.clone()));
        state.running.insert(id.to_owned(), progress.clone());
        progress
    }

    /// Makes `progress` connection `id`'s again: its replacement could not
    /// be stored, and the run it belongs to goes on.
    pub fn restore(&self, id: &str, progress: Arc<Progress>) {
        self.lock().running.insert(id.to_owned(), progress);
    }

    /// Forgets connection `id`'s place: it was closed or deleted, and
    /// what it misses meanwhile is not its to send.
    pub fn forget(&self, id: &str) {
        let mut state = self.lock();
        state.stored.remove(id);
        if let Some(progress) = state.running.remove(id) {
            progress.stop();
        }
        self.flush_now.notify_one();
    }

    /// Writes the places every [`FLUSH_EVERY`], or sooner when asked,
    /// until the service closes.
    pub async fn run(self: Arc<Self>, mut closing: tokio::sync::watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(FLUSH_EVERY);
        loop {
            let tick = tokio::select! {
                _ = closing.wait_for(|&closed| closed) => return,
                _ = ticker.tick() => true,
                () = self.flush_now.notified() => false,
            };
            let places = self.clone();
            if let Ok(Err(error)) = tokio::task::spawn_blocking(move || places.flush(tick)).await {
                tracing::warn!(file = %self.file.display(), %error, "cannot store the twin connections' places");
            }
        }
    }

    /// Stops every connection's progress and writes where each stands:
    /// for a shutdown, so that what the stopping tasks drop is sent again.
    pub fn stop(&self) -> std::io::Result<()> {
        for progress in self.lock().running.values() {
            progress.stop();
        }
        self.flush(false)
    }

    /// Writes the places when they moved; `tick` for the regular write,
    /// the only one that moves a connection's durable place on
    /// ([`Progress::durable`] lags one tick behind).
    fn flush(&self, tick: bool) -> std::io::Result<()> {
        let state = self.lock();
        let mut places = BTreeMap::new();
        for (id, progress) in &state.running {
            let place = if tick { progress.durable() } else { progress.resume_place() };
            // None: a connection that never ran has not read the head yet.
            if let Some(place) = place {
                places.insert(id.clone(), place);
            }
        }
        if places == state.written {
            return Ok(());
        }
        // Not while holding the lock a connection's start needs; only the
        // flusher (and the shutdown, after it) writes.
        drop(state);
        write_whole(&self.file, &places)?;
        self.lock().written = places;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned lock's data is whole.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Replaces `file` with `places`: a temporary file, fsynced, renamed over
/// it, the directory fsynced, so a crash leaves the old places or the new.
fn write_whole(file: &Path, places: &BTreeMap<String, u64>) -> std::io::Result<()> {
    let temporary = file.with_extension("json.tmp");
    let mut handle = std::fs::File::create(&temporary)?;
    handle.write_all(&serde_json::to_vec(places).map_err(std::io::Error::other)?)?;
    handle.sync_all()?;
    std::fs::rename(&temporary, file)?;
    if let Some(directory) = file.parent() {
        std::fs::File::open(directory)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_survive_a_restart_and_a_forgotten_connection_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("places.json");
        let places = Places::open(file.clone()).unwrap();
        let kept = places.start("kept");
        let gone = places.start("gone");
        kept.start_at(7);
        gone.start_at(7);
        let on_its_way = kept.take(8);
        drop(kept.take(9));
        places.stop().unwrap();
        drop(on_its_way);

        let reopened = Places::open(file.clone()).unwrap();
        assert_eq!(reopened.start("kept").start(), Some(7));
        reopened.forget("gone");
        assert_eq!(reopened.start("gone").start(), None);
        reopened.flush(true).unwrap();
        let stored: BTreeMap<String, u64> =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(stored, BTreeMap::from([("kept".to_owned(), 7)]));
    }

    #[test]
    fn a_bad_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("places.json");
        std::fs::write(&file, "{\"a\": -1}").unwrap();
        let error = Places::open(file).err().unwrap();
        assert!(error.to_string().contains("places.json"), "{error}");
    }
}
