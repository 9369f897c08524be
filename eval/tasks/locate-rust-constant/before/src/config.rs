use std::time::Duration;

/// Settings read from the environment.
pub struct Config {
    pub part_size: usize,
    pub request_timeout: Duration,
    pub parallel_uploads: usize,
}

impl Config {
    pub fn from_env() -> Config {
        let num = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
        Config {
            part_size: num("STASHD_PART_SIZE", 8 * 1024 * 1024),
            request_timeout: Duration::from_secs(num("STASHD_TIMEOUT_SECS", 30) as u64),
            parallel_uploads: num("STASHD_PARALLEL", 4),
        }
    }
}
