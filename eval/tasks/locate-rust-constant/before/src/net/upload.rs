use super::backoff::{self, MAX_UPLOAD_RETRIES};

/// Upload one part, retrying up to `MAX_UPLOAD_RETRIES` times.
pub fn put_part_with_retry<F>(part: &[u8], mut put: F) -> Result<(), String>
where
    F: FnMut(&[u8]) -> Result<(), String>,
{
    let mut attempt = 0;
    loop {
        match put(part) {
            Ok(()) => return Ok(()),
            Err(e) if attempt >= MAX_UPLOAD_RETRIES => {
                return Err(format!("part failed after {attempt} retries: {e}"))
            }
            Err(_) => {
                std::thread::sleep(backoff::delay(attempt));
                attempt += 1;
            }
        }
    }
}
