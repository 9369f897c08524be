pub mod backoff;
pub mod download;
pub mod upload;
