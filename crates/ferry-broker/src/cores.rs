//! Per-core execution: one single-threaded runtime per core, and every
//! connection pinned to one of them for its whole life.
//!
//! Why not one multi-threaded runtime: at one message in flight per client
//! (the shape of a device fleet) a work-stealing runtime's workers park,
//! search for work, steal it and wake each other for nearly every message;
//! measured, that cost ~3× the epoll waits, futex wake-ups and 4× the
//! context switches per message of single-threaded Mosquitto. Here a
//! connection's socket events, its protocol work and its writes all happen
//! on the thread that owns it, and a thread only wakes another when a
//! message crosses cores (docs/architecture.md, "Threads and tasks").
//!
//! The listeners accept on the control runtime and hand each socket to the
//! core with the fewest connections, which registers it with its own
//! reactor: a balanced spread without SO_REUSEPORT's hash, which can leave
//! one core with far more clients than another.
//!
//! Each core also keeps a parking lot (`park.rs`) for its idle
//! connections, which then wait there without a task, and may nap before
//! it waits for events, to handle more of them per wake-up (`coalesce.rs`),
//! and a mailbox through which the log writer wakes its connections, one
//! wake of the core per batch (`relay.rs`).

use crate::coalesce::Coalesce;
use crate::seat::Seat;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::runtime::{Builder, Handle};
use tokio::sync::oneshot;

/// The per-core runtimes. Dropping it without [`Cores::stop`] leaves the
/// threads running until the process exits.
pub struct Cores {
    cores: Vec<Core>,
}

struct Core {
    handle: Handle,
    /// Connections this core serves now: what the spread balances.
    connections: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Cores {
    /// Starts `count` threads (at least one), `ferry-core-{i}`, each running
    /// a single-threaded runtime with I/O and timers, which naps for
    /// `coalesce` before it waits for events while it is woken often (zero:
    /// never; at most `coalesce::MAX_COALESCE`).
    pub fn start(count: usize, coalesce: Duration) -> io::Result<Cores> {
        let mut cores = Vec::with_capacity(count.max(1));
        for index in 0..count.max(1) {
            let mut builder = Builder::new_current_thread();
            builder.enable_all();
            if let Some(coalesce) = Coalesce::new(coalesce) {
                builder
                    .on_thread_park(move || coalesce.before_wait())
                    .on_thread_unpark(move || coalesce.after_wait());
            }
            let runtime = builder.build()?;
            let handle = runtime.handle().clone();
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = std::thread::Builder::new().name(format!("ferry-core-{index}")).spawn(
                move || {
                    crate::stats::set_core(index);
                    runtime.spawn(crate::relay::open());
                    // In the runtime: the lot registers with its reactor.
                    let made = {
                        let _inside = runtime.enter();
                        crate::connection::open_lot()
                    };
                    let lot = match made {
                        Ok(lot) => Some(lot),
                        Err(error) => {
                            // Its idle connections then keep their tasks.
                            tracing::error!(%error, core = index, "no parking lot");
                            None
                        }
                    };
                    // Spawned tasks run while the thread blocks on this; the
                    // runtime's drop then cancels whatever is left.
                    let _ = runtime.block_on(stopped);
                    let _inside = runtime.enter();
                    if let Some(lot) = lot {
                        drop(lot.clear());
                    }
                },
            )?;
            cores.push(Core {
                handle,
                connections: Arc::new(AtomicUsize::new(0)),
                stop: Some(stop),
                thread: Some(thread),
            });
        }
        Ok(Cores { cores })
    }

    /// One core per CPU the process may run on.
    pub fn per_cpu(coalesce: Duration) -> io::Result<Cores> {
        Cores::start(std::thread::available_parallelism().map_or(1, usize::from), coalesce)
    }

    /// Runs a task made by `task` on every core, until the core stops:
    /// for what each core's thread must do for itself.
    pub fn spawn_on_each<F: Future<Output = ()> + Send + 'static>(&self, task: impl Fn() -> F) {
        for core in &self.cores {
            core.handle.spawn(task());
        }
    }

    /// The least busy core, to serve one more connection: its runtime's
    /// handle and the seat that counts the connection there.
    pub(crate) fn least_busy(&self) -> (&Handle, Seat) {
        let core = self
            .cores
            .iter()
            .min_by_key(|core| core.connections.load(Ordering::Relaxed))
            .expect("Cores::start makes at least one core");
        (&core.handle, Seat::taken(&core.connections))
    }

    /// Stops every core's runtime, cancelling what still runs on it, and
    /// waits for the threads.
    pub fn stop(mut self) {
        for core in &mut self.cores {
            if let Some(stop) = core.stop.take() {
                let _ = stop.send(());
            }
        }
        for core in &mut self.cores {
            if let Some(thread) = core.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
