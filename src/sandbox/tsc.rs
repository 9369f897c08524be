//! The host's TSC rate, which a TCG guest's TSC runs at: the guest is told it on its command
//! line instead of calibrating against emulated timers.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Measured once per process over 20 ms, in kHz; `None` where there is no TSC to read.
pub fn host_tsc_khz() -> Option<u64> {
    static KHZ: OnceLock<Option<u64>> = OnceLock::new();
    *KHZ.get_or_init(measure)
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64; it only reads the counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "x86_64")]
fn measure() -> Option<u64> {
    let (t0, c0) = (Instant::now(), rdtsc());
    std::thread::sleep(Duration::from_millis(20));
    let (t1, c1) = (Instant::now(), rdtsc());
    let us = t1.duration_since(t0).as_micros() as u64;
    // Rounded to MHz: the measurement is not finer than that, and a stable value keeps the
    // kernel command line (and so its log) the same from run to run.
    let khz = (c1.wrapping_sub(c0) * 1000 / us.max(1) + 500) / 1000 * 1000;
    (khz > 0).then_some(khz)
}

#[cfg(not(target_arch = "x86_64"))]
fn measure() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_rate_is_plausible() {
        let khz = super::host_tsc_khz().unwrap();
        // 100 MHz to 10 GHz.
        assert!((100_000..10_000_000).contains(&khz), "{khz}");
    }
}
