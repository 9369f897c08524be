use super::backoff;

/// Downloads are cheap to restart, so they give up sooner than uploads.
pub const MAX_DOWNLOAD_RETRIES: u32 = 3;

pub fn fetch_with_retry<F>(mut get: F) -> Result<Vec<u8>, String>
where
    F: FnMut() -> Result<Vec<u8>, String>,
{
    let mut attempt = 0;
    loop {
        match get() {
            Ok(body) => return Ok(body),
            Err(e) if attempt >= MAX_DOWNLOAD_RETRIES => return Err(e),
            Err(_) => {
                std::thread::sleep(backoff::delay(attempt));
                attempt += 1;
            }
        }
    }
}
