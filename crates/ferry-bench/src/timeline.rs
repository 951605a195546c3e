//! What a run looks like while it runs: counters the load tasks bump, a
//! ticker that samples them into a timeline (rate and backlog over time,
//! for the report and its plots) and shows live progress — a bar on a
//! terminal, a plain line a second otherwise.

use crate::clock;
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often the counters are sampled into the timeline.
pub const TICK: Duration = Duration::from_millis(100);

/// How often a progress line is shown.
const SHOW_EVERY_TICKS: u32 = 10;

/// Most ticks a timeline keeps. A longer run halves its resolution
/// (every other tick dropped, the interval doubled) instead of growing:
/// 4,096 points are more than a plot can show.
pub const MAX_TICKS: usize = 4_096;

/// Counters shared by the tasks of one run. Tasks add once per batch of
/// packets, not per message, so the shared cache line stays cold.
#[derive(Debug, Default)]
pub struct Progress {
    sent: AtomicU64,
    received: AtomicU64,
}

impl Progress {
    /// A fresh set of counters to share between tasks.
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress::default())
    }

    /// `n` more messages written by publishers.
    pub fn add_sent(&self, n: u64) {
        if n > 0 {
            self.sent.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// `n` more first arrivals at subscribers.
    pub fn add_received(&self, n: u64) {
        if n > 0 {
            self.received.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn read(&self) -> (u64, u64) {
        (self.sent.load(Ordering::Relaxed), self.received.load(Ordering::Relaxed))
    }
}

/// Cumulative counts at one moment of a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tick {
    /// Seconds since publishing started.
    pub seconds: f64,
    /// Messages sent so far.
    pub sent: u64,
    /// Distinct messages received so far, over all subscribers.
    pub received: u64,
}

/// How progress is shown while the ticker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// A bar redrawn in place on stderr (stderr is a terminal).
    Bar,
    /// One plain line a second on stderr (a log, a pipe, CI).
    Lines,
    /// Nothing.
    Off,
}

impl Display {
    /// A bar when stderr is a terminal, lines otherwise, nothing if `quiet`.
    pub fn detect(quiet: bool) -> Display {
        match (quiet, std::io::stderr().is_terminal()) {
            (true, _) => Display::Off,
            (false, true) => Display::Bar,
            (false, false) => Display::Lines,
        }
    }
}

/// Samples a [`Progress`] every [`TICK`] until stopped.
pub struct Ticker {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<Tick>>,
}

impl Ticker {
    /// Starts sampling; tick times count from `origin_ns` on the process
    /// clock (the start of publishing). `expected` is the number of arrivals
    /// that completes the run, for the bar's percentage, when known.
    pub fn start(
        progress: Arc<Progress>,
        origin_ns: u64,
        expected: Option<u64>,
        display: Display,
    ) -> Ticker {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let start_ns = origin_ns;
            let mut timeline = Timeline::default();
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut ticks: u32 = 0;
            loop {
                tokio::select! {
                    _ = interval.tick() => {}
                    _ = stopped.changed() => break,
                }
                let (sent, received) = progress.read();
                let seconds = clock::now_ns().saturating_sub(start_ns) as f64 / 1e9;
                let tick = Tick { seconds, sent, received };
                timeline.push(tick);
                ticks += 1;
                if ticks.is_multiple_of(SHOW_EVERY_TICKS) {
                    show(display, &tick, timeline.rates_over_last_second(), expected);
                }
            }
            let (sent, received) = progress.read();
            let seconds = clock::now_ns().saturating_sub(start_ns) as f64 / 1e9;
            timeline.push_last(Tick { seconds, sent, received });
            if display == Display::Bar {
                eprintln!();
            }
            timeline.ticks
        });
        Ticker { stop, task }
    }

    /// Stops sampling and returns the timeline, ending with a final tick.
    pub async fn finish(self) -> Vec<Tick> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// Ticks with a bounded length: see [`MAX_TICKS`].
#[derive(Debug, Default)]
struct Timeline {
    ticks: Vec<Tick>,
    /// Ticks offered so far; tick `n` is kept when `n % stride == 0`.
    offered: u64,
    /// log2 of the stride: how often the resolution was halved.
    halvings: u32,
}

impl Timeline {
    fn push(&mut self, tick: Tick) {
        let n = self.offered;
        self.offered += 1;
        if !n.is_multiple_of(self.stride()) {
            return;
        }
        if self.ticks.len() == MAX_TICKS {
            // Kept ticks are n = 0, s, 2s, …: every other one is a multiple of 2s.
            let mut position = 0;
            self.ticks.retain(|_| {
                position += 1;
                position % 2 == 1
            });
            self.halvings += 1;
            if !n.is_multiple_of(self.stride()) {
                return;
            }
        }
        self.ticks.push(tick);
    }

    /// The last tick of a run, kept whatever the stride.
    fn push_last(&mut self, tick: Tick) {
        if self.ticks.len() == MAX_TICKS {
            self.ticks.pop();
        }
        self.ticks.push(tick);
    }

    fn stride(&self) -> u64 {
        1 << self.halvings
    }

    /// (sent, received) per second over about the last second of ticks.
    fn rates_over_last_second(&self) -> (f64, f64) {
        let Some(last) = self.ticks.last() else { return (0.0, 0.0) };
        let first = self
            .ticks
            .iter()
            .rev()
            .find(|t| last.seconds - t.seconds >= 1.0)
            .or(self.ticks.first())
            .unwrap_or(last);
        rates(first, last)
    }
}

/// (sent, received) messages per second between two ticks.
pub fn rates(from: &Tick, to: &Tick) -> (f64, f64) {
    let seconds = to.seconds - from.seconds;
    if seconds <= 0.0 {
        return (0.0, 0.0);
    }
    (
        to.sent.saturating_sub(from.sent) as f64 / seconds,
        to.received.saturating_sub(from.received) as f64 / seconds,
    )
}

const BAR_WIDTH: usize = 30;

fn show(display: Display, tick: &Tick, (out, into): (f64, f64), expected: Option<u64>) {
    let rates =
        format!("sent {} ({}/s)  received {} ({}/s)", tick.sent, si(out), tick.received, si(into));
    let mut stderr = std::io::stderr().lock();
    // Progress is best effort: a closed stderr must not stop the run.
    let _ = match display {
        Display::Off => Ok(()),
        Display::Lines => writeln!(stderr, "{:>7.1} s  {rates}", tick.seconds),
        Display::Bar => {
            let (bar, percent) = match expected {
                Some(n) if n > 0 => {
                    let done = (tick.received as f64 / n as f64).clamp(0.0, 1.0);
                    let filled = (done * BAR_WIDTH as f64).round() as usize;
                    (
                        format!("[{}{}]", "#".repeat(filled), ".".repeat(BAR_WIDTH - filled)),
                        format!("{:>5.1}%", done * 100.0),
                    )
                }
                _ => (String::new(), String::new()),
            };
            write!(stderr, "\r\x1b[2K{bar} {percent} {:>6.1} s  {rates}", tick.seconds)
                .and_then(|()| stderr.flush())
        }
    };
}

/// A rate with an SI suffix: 950, 12.3k, 1.25M.
fn si(value: f64) -> String {
    match value {
        v if v >= 1e6 => format!("{:.2}M", v / 1e6),
        v if v >= 1e3 => format!("{:.1}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(seconds: f64, sent: u64, received: u64) -> Tick {
        Tick { seconds, sent, received }
    }

    #[test]
    fn rates_between_ticks() {
        assert_eq!(rates(&tick(1.0, 100, 50), &tick(1.5, 600, 550)), (1_000.0, 1_000.0));
        assert_eq!(rates(&tick(1.0, 0, 0), &tick(1.0, 10, 10)), (0.0, 0.0), "no division by zero");
    }

    #[test]
    fn live_rate_looks_back_one_second() {
        let mut t = Timeline::default();
        for i in 0..=30u64 {
            // 1,000 msg/s for the first 2 s, then 10,000 msg/s.
            let sent = if i <= 20 { i * 100 } else { 2_000 + (i - 20) * 1_000 };
            t.push(tick(i as f64 * 0.1, sent, sent));
        }
        let (out, into) = t.rates_over_last_second();
        assert!((out - 10_000.0).abs() < 1e-6 && (into - 10_000.0).abs() < 1e-6, "{out}");
    }

    #[test]
    fn a_long_run_halves_resolution_instead_of_growing() {
        let mut t = Timeline::default();
        let n = MAX_TICKS * 3;
        for i in 0..n {
            t.push(tick(i as f64, i as u64, i as u64));
        }
        assert!(t.ticks.len() <= MAX_TICKS, "{}", t.ticks.len());
        assert!(t.ticks.len() > MAX_TICKS / 2, "{}", t.ticks.len());
        assert!(t.ticks.windows(2).all(|w| w[0].seconds < w[1].seconds));
        let last = t.ticks.last().unwrap().seconds;
        assert!(last >= (n - 4) as f64, "the end of the run is kept: {last}");
        let gaps: Vec<f64> = t.ticks.windows(2).map(|w| w[1].seconds - w[0].seconds).collect();
        assert!(gaps.iter().all(|&g| g == 4.0), "evenly spaced after two halvings: {gaps:?}");
    }

    #[test]
    fn si_suffixes() {
        assert_eq!(si(950.0), "950");
        assert_eq!(si(12_345.0), "12.3k");
        assert_eq!(si(1_250_000.0), "1.25M");
    }

    #[tokio::test]
    async fn ticker_samples_until_finished() {
        let progress = Progress::new();
        let ticker = Ticker::start(progress.clone(), clock::now_ns(), Some(10), Display::Off);
        progress.add_sent(10);
        progress.add_received(7);
        let ticks = ticker.finish().await;
        let last = ticks.last().unwrap();
        assert_eq!((last.sent, last.received), (10, 7), "the final tick reads the counters");
    }
}
