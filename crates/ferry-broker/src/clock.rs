//! Wall-clock time as the broker records it.

/// Wall-clock milliseconds since the Unix epoch: durable times must mean
/// the same after a restart, which `Instant`s do not.
pub(crate) fn unix_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}
