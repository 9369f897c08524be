// Integration tests for the retry limits.
//
// MAX_UPLOAD_RETRIES is deliberately larger than MAX_DOWNLOAD_RETRIES: a failed
// upload part is expensive to redo from scratch.

#[test]
fn backoff_is_capped() {
    // delay(30) would overflow without the cap
    let d = std::time::Duration::from_millis(250).saturating_mul(1 << 20);
    assert!(d > std::time::Duration::from_secs(20));
}
