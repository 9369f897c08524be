//! Exponential backoff shared by uploads and downloads.

use std::time::Duration;

/// How many times an upload part is retried before the sync gives up.
pub const MAX_UPLOAD_RETRIES: u32 = 12;

/// The first wait; each retry doubles it, up to `MAX_BACKOFF`.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(250);

pub const MAX_BACKOFF: Duration = Duration::from_secs(20);

/// The wait before retry number `attempt` (0-based).
pub fn delay(attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
    INITIAL_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
}
