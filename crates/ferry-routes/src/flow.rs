//! One endpoint's flow: takes batches from its queue in priority order,
//! hands them to its sink, reports them done once acknowledged, and after a
//! failure reconnects with jittered exponential backoff, resending what was
//! not acknowledged. One log line per change of state.
//!
//! Priorities are strict, except that one batch in `100 /
//! starvation_share_percent` starts below the highest priority that has
//! messages, so a flood at priority 0 cannot hold lower ones back for ever.

use crate::config::FlowConfig;
use crate::sink::{Sink, SinkError};
use crate::stats::EndpointStats;
use ferry_broker::endpoint::{EndpointQueue, RoutedMessage};
use ferry_broker::routing::{WhenFull, LOWEST_PRIORITY};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Runs until `stop` says so. What is in flight then stays queued and is
/// sent again by the next flow of this endpoint; what was sent is off the
/// queue before this returns, so that flow does not send it again.
pub async fn run<S: Sink>(
    mut queue: EndpointQueue,
    sink: S,
    config: FlowConfig,
    stats: Arc<EndpointStats>,
    stop: watch::Receiver<bool>,
    paused: watch::Receiver<bool>,
) {
    flow(&mut queue, sink, config, stats, stop, paused).await;
    queue.settled().await;
}

async fn flow<S: Sink>(
    queue: &mut EndpointQueue,
    mut sink: S,
    config: FlowConfig,
    stats: Arc<EndpointStats>,
    mut stop: watch::Receiver<bool>,
    mut paused: watch::Receiver<bool>,
) {
    let name = queue.name().to_owned();
    let mut backoff = Backoff::new(&config);
    let mut batches: u64 = 0;
    let mut draining = false;
    let mut failure = Failure::default();
    // With `max_rate`: when the next batch may go.
    let mut paced_until: Option<tokio::time::Instant> = None;
    'connect: loop {
        let connected = tokio::select! {
            _ = stop.changed() => return,
            connected = sink.connect() => connected,
        };
        if let Err(error) = connected {
            failure.log(&name, &error);
            if !wait_out(queue, &config, &mut backoff, &stats, &mut stop).await {
                return;
            }
            continue;
        }
        backoff.reset();
        stats.set_connected(true);
        let backlog: usize = queue.backlog().iter().sum();
        let failures = std::mem::take(&mut failure).attempts;
        tracing::info!(endpoint = %name, queued = backlog, failed_attempts = failures, "endpoint connected");
        if backlog > 0 {
            tracing::info!(endpoint = %name, messages = backlog, "endpoint draining its queue");
            draining = true;
        }
        loop {
            if *paused.borrow_and_update() {
                // Messages keep queuing in the log meanwhile, under the
                // endpoint's max_bytes and TTL as always.
                tracing::info!(endpoint = %name, "endpoint paused");
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = paused.wait_for(|paused| !paused) => {}
                }
                tracing::info!(endpoint = %name, "endpoint resumed");
            }
            trim(queue, &config, &stats).await;
            let lower_first = lower_turn(batches, config.starvation_share_percent);
            let batch = fill(queue, &config, lower_first, &stats).await;
            if batch.is_empty() {
                if draining {
                    tracing::info!(endpoint = %name, "endpoint queue drained");
                    draining = false;
                }
                tokio::select! {
                    _ = stop.changed() => return,
                    () = queue.stored() => continue,
                    error = sink.closed() => {
                        stats.set_connected(false);
                        failure.log(&name, &error);
                        if !wait_out(queue, &config, &mut backoff, &stats, &mut stop).await {
                            return;
                        }
                        continue 'connect;
                    }
                }
            }
            if let Some(until) = paced_until {
                tokio::select! {
                    _ = stop.changed() => return,
                    () = tokio::time::sleep_until(until) => {}
                }
            }
            batches += 1;
            let started = Instant::now();
            if config.max_rate != 0 {
                let spacing =
                    Duration::from_secs_f64(batch.len() as f64 / f64::from(config.max_rate));
                paced_until = Some(tokio::time::Instant::from_std(started) + spacing);
            }
            let sent = tokio::select! {
                _ = stop.changed() => return,
                sent = sink.send(&batch) => sent,
            };
            match sent {
                Ok(sent) => {
                    stats.record_batch(batch.len(), &sent.rejected, started.elapsed());
                    for (offset, reason) in &sent.rejected {
                        tracing::debug!(endpoint = %name, offset, reason, "message dropped");
                    }
                    let bytes = batch.iter().map(|routed| routed.stored_bytes).sum();
                    queue.done(batch.iter().map(|routed| routed.offset).collect(), bytes);
                }
                Err(error) => {
                    stats.set_connected(false);
                    queue.rewind().await;
                    failure.log(&name, &error);
                    if !wait_out(queue, &config, &mut backoff, &stats, &mut stop).await {
                        return;
                    }
                    continue 'connect;
                }
            }
        }
    }
}

/// The endpoint's failures since it was last connected: a line is logged
/// when the reason changes, not at every attempt, so an upstream away for a
/// day leaves a handful of lines rather than thousands.
#[derive(Default)]
struct Failure {
    reason: Option<String>,
    attempts: u64,
}

impl Failure {
    fn log(&mut self, endpoint: &str, error: &SinkError) {
        self.attempts += 1;
        let reason = error.to_string();
        if self.reason.as_deref() == Some(reason.as_str()) {
            tracing::debug!(endpoint, error = %reason, attempts = self.attempts, "endpoint still failing");
            return;
        }
        tracing::warn!(endpoint, error = %reason, "endpoint failing; backing off and retrying");
        self.reason = Some(reason);
    }
}

/// Waits out the backoff, keeping the queue within its cap meanwhile;
/// false if told to stop.
async fn wait_out(
    queue: &mut EndpointQueue,
    config: &FlowConfig,
    backoff: &mut Backoff,
    stats: &EndpointStats,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    stats.set_connected(false);
    let delay = backoff.next();
    stats.set_backoff(delay);
    let deadline = tokio::time::Instant::now() + delay;
    let waited = loop {
        tokio::select! {
            _ = stop.changed() => break false,
            () = tokio::time::sleep_until(deadline) => break true,
            () = queue.stored() => trim(queue, config, stats).await,
        }
    };
    stats.set_backoff(Duration::ZERO);
    waited
}

/// Messages dropped per round of `trim`: enough to make room quickly, few
/// enough to read into memory at once.
const TRIM_ROUND: usize = 256;

/// With `when_full = "drop_oldest"`, drops the oldest messages until the
/// queue is within its cap again, counted under `cap`.
async fn trim(queue: &mut EndpointQueue, config: &FlowConfig, stats: &EndpointStats) {
    let cap = config.max_bytes.0;
    if cap == 0 || config.when_full != WhenFull::DropOldest {
        return;
    }
    loop {
        // What was reported done must be off the count first, or the
        // same bytes would be dropped twice over.
        queue.settled().await;
        let excess = queue.bytes().saturating_sub(cap);
        if excess == 0 {
            return;
        }
        let (mut dropped, mut bytes) = (Vec::new(), 0);
        for offset in queue.oldest(TRIM_ROUND) {
            if bytes >= excess {
                break;
            }
            bytes += queue.read(offset).map_or(0, |routed| routed.stored_bytes);
            dropped.push(offset);
        }
        if dropped.is_empty() {
            return;
        }
        tracing::debug!(endpoint = %queue.name(), messages = dropped.len(), bytes, "endpoint over max_bytes: oldest messages dropped");
        stats.record_dropped("cap", dropped.len() as u64);
        queue.done(dropped, bytes);
    }
}

/// Whether this batch starts below the highest waiting priority.
fn lower_turn(batches: u64, share_percent: u8) -> bool {
    share_percent != 0
        && batches % (100 / u64::from(share_percent)) == 100 / u64::from(share_percent) - 1
}

/// The next batch: by priority, up to the batch limits, lingering for more
/// if it is not full and the settings ask. Expired messages are reported
/// done (counted) rather than sent.
async fn fill(
    queue: &mut EndpointQueue,
    config: &FlowConfig,
    lower_first: bool,
    stats: &EndpointStats,
) -> Vec<RoutedMessage> {
    let mut batch = Vec::new();
    let mut bytes = 0u64;
    take_into(queue, config, lower_first, stats, &mut batch, &mut bytes);
    let linger = config.batch.linger.0;
    if batch.is_empty() || linger.is_zero() {
        return batch;
    }
    let deadline = tokio::time::Instant::now() + linger;
    while batch.len() < config.batch.max_messages && bytes < config.batch.max_bytes.0 {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => break,
            () = queue.stored() => take_into(queue, config, false, stats, &mut batch, &mut bytes),
        }
    }
    batch
}

/// Messages read from the log at once while filling a batch: one read of
/// their stretch of the log instead of two per message, and at most this
/// many read for nothing when the batch fills by bytes before by count.
const READ_CHUNK: usize = 64;

fn take_into(
    queue: &mut EndpointQueue,
    config: &FlowConfig,
    lower_first: bool,
    stats: &EndpointStats,
    batch: &mut Vec<RoutedMessage>,
    bytes: &mut u64,
) {
    let mut order: Vec<u8> = (0..=LOWEST_PRIORITY).filter(|&p| queue.has_pending(p)).collect();
    if lower_first && order.len() > 1 {
        order.rotate_left(1);
    }
    let now_ms = unix_ms();
    let (mut expired, mut expired_bytes) = (Vec::new(), 0);
    'priorities: for priority in order {
        while batch.len() < config.batch.max_messages {
            let want = (config.batch.max_messages - batch.len()).min(READ_CHUNK);
            let offsets = queue.take(priority, want);
            if offsets.is_empty() {
                break;
            }
            for (&offset, read) in offsets.iter().zip(queue.read_many(&offsets)) {
                let routed = match read {
                    Ok(routed) => routed,
                    Err(error) => {
                        // Unreadable means damaged: sending it is impossible and
                        // retrying for ever would stop the endpoint.
                        tracing::error!(endpoint = %queue.name(), offset, %error, "routed message unreadable; dropped");
                        stats.record_dropped("unreadable", 1);
                        expired.push(offset);
                        continue;
                    }
                };
                if routed.is_expired(now_ms) {
                    expired.push(offset);
                    expired_bytes += routed.stored_bytes;
                    continue;
                }
                let size = (routed.message.payload.len() + routed.message.topic.len()) as u64;
                if !batch.is_empty() && *bytes + size > config.batch.max_bytes.0 {
                    queue.give_back(priority, offset);
                    break 'priorities;
                }
                *bytes += size;
                batch.push(routed);
            }
        }
    }
    if !expired.is_empty() {
        stats.record_dropped("ttl", expired.len() as u64);
        queue.done(expired, expired_bytes);
    }
}

fn unix_ms() -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}

/// Jittered exponential backoff: each wait is a random point in the upper
/// half of the current step, so endpoints that failed together (one
/// network) do not all come back at the same instant.
struct Backoff {
    initial: Duration,
    max: Duration,
    step: Duration,
}

impl Backoff {
    fn new(config: &FlowConfig) -> Backoff {
        Backoff {
            initial: config.backoff.initial.0,
            max: config.backoff.max.0,
            step: config.backoff.initial.0,
        }
    }

    fn reset(&mut self) {
        self.step = self.initial;
    }

    fn next(&mut self) -> Duration {
        let step = self.step;
        self.step = (self.step * 2).min(self.max);
        let random = RandomState::new().build_hasher().finish();
        let half = step / 2;
        half + Duration::from_nanos(random % (half.as_nanos() as u64).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Span;

    #[test]
    fn backoff_doubles_up_to_its_cap_with_jitter_in_the_upper_half() {
        let mut config = FlowConfig::default();
        config.backoff.initial = Span(Duration::from_millis(100));
        config.backoff.max = Span(Duration::from_millis(1000));
        let mut backoff = Backoff::new(&config);
        for step in [100, 200, 400, 800, 1000, 1000] {
            let wait = backoff.next();
            let step = Duration::from_millis(step);
            assert!(wait >= step / 2 && wait <= step, "{wait:?} for a step of {step:?}");
        }
        backoff.reset();
        assert!(backoff.next() <= Duration::from_millis(100));
    }

    #[test]
    fn one_batch_in_ten_starts_lower_at_the_default_share() {
        let lower = (0..100).filter(|&batch| lower_turn(batch, 10)).count();
        assert_eq!(lower, 10);
        assert!(!(0..100).any(|batch| lower_turn(batch, 0)));
        assert_eq!((0..100).filter(|&batch| lower_turn(batch, 50)).count(), 50);
    }
}
