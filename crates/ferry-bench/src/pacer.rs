//! Waiting for an open-loop message's due time, to the microsecond.
//!
//! Tokio's timer wheel has millisecond slots and a sleep ends at the first
//! tick after its deadline, so a message due at t would leave up to 1 ms
//! late. Open-loop latency counts from the due time (no coordinated
//! omission), so that lateness would be charged to the broker: on loopback,
//! where a good broker answers in tens of microseconds, it would be most of
//! what is measured. A timerfd armed for the exact due time on
//! `CLOCK_MONOTONIC` — the clock `Instant`, and so [`crate::clock`], reads —
//! wakes within the kernel's timer slack (50 µs by default) instead, and is
//! awaited through Tokio's reactor like a socket.

use crate::clock;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use tokio::io::unix::AsyncFd;

/// One publisher's timer.
#[derive(Debug)]
pub struct Pacer {
    timer: AsyncFd<OwnedFd>,
}

impl Pacer {
    /// A disarmed timer.
    pub fn new() -> io::Result<Pacer> {
        // SAFETY: timerfd_create takes no pointers; it returns a new file
        // descriptor or -1.
        let fd = unsafe {
            libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by timerfd_create, is open, and
        // nothing else owns it: the OwnedFd becomes its only owner.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the OwnedFd is open and moves into the AsyncFd, which
        // owns it until dropped, so it stays open and its as_raw_fd is the
        // same descriptor for the registration's whole life.
        let timer = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Pacer { timer })
    }

    /// Returns at `due_ns` on the [`clock`], or at once if that has passed.
    pub async fn sleep_until(&mut self, due_ns: u64) -> io::Result<()> {
        if due_ns <= clock::now_ns() {
            return Ok(());
        }
        let at = monotonic_offset_ns().saturating_add(due_ns);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            },
        };
        let fd = self.timer.get_ref().as_raw_fd();
        // SAFETY: `fd` is our open timerfd; `spec` is a valid itimerspec
        // that lives across the call; the old value pointer may be null.
        // Re-arming also resets an expiration that was never read.
        if unsafe {
            libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        } < 0
        {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut ready = self.timer.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: `fd` is our open timerfd and `expirations` is a
            // writable 8-byte buffer, the size a timerfd read requires.
            let read = unsafe { libc::read(fd, expirations.as_mut_ptr().cast(), 8) };
            if read == 8 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::WouldBlock {
                return Err(error);
            }
            // Readiness left over from an earlier arming: wait for this one.
            ready.clear_ready();
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds at [`clock::base`], measured once.
fn monotonic_offset_ns() -> u64 {
    static OFFSET: OnceLock<u64> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC
        // always exists on Linux, so the call cannot fail.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let monotonic = now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64;
        monotonic.saturating_sub(clock::now_ns())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn never_returns_before_the_due_time() {
        let mut pacer = Pacer::new().unwrap();
        for step_us in [300, 1_500, 50] {
            let due = clock::now_ns() + step_us * 1_000;
            pacer.sleep_until(due).await.unwrap();
            assert!(clock::now_ns() >= due, "woke early for a {step_us} µs wait");
        }
    }

    #[tokio::test]
    async fn a_past_due_time_returns_at_once_and_rearming_forgets_it() {
        let mut pacer = Pacer::new().unwrap();
        pacer.sleep_until(0).await.unwrap();
        // Arm, let it expire unread, then re-arm: the stale expiration must
        // not end the second wait early.
        let soon = clock::now_ns() + 20_000_000;
        // One poll arms the timer; the zero timeout then drops the wait.
        let armed = tokio::time::timeout(std::time::Duration::ZERO, pacer.sleep_until(soon)).await;
        assert!(armed.is_err(), "not due yet");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let due = clock::now_ns() + 2_000_000;
        pacer.sleep_until(due).await.unwrap();
        assert!(clock::now_ns() >= due);
    }

    #[test]
    fn the_offset_maps_the_process_clock_onto_clock_monotonic() {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        let ours = clock::now_ns();
        // SAFETY: as in monotonic_offset_ns.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        let monotonic = now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64;
        let mapped = monotonic_offset_ns() + ours;
        assert!(mapped <= monotonic, "{mapped} > {monotonic}");
        assert!(monotonic - mapped < 5_000_000, "within 5 ms: {}", monotonic - mapped);
    }
}
