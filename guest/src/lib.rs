//! The protocol between Abhed (the host) and its guest agent inside the session microVM.
//!
//! The channel is one virtio-serial port. Each message is a frame: a 4-byte big-endian length,
//! then that many bytes of JSON. The host sends [`Request`]s one at a time and reads the
//! [`Response`] to each before sending the next; the guest speaks first, with
//! [`Response::Ready`], once it has opened the port.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

pub mod policy;
pub mod supervise;
pub mod zygote;

/// The name of the virtio-serial port both sides look for.
pub const PORT_NAME: &str = "abhed.0";

/// Bumped whenever a message changes shape; the host refuses a guest that speaks another.
pub const PROTOCOL_VERSION: u32 = 4;

/// A frame larger than this is a protocol error, not a message (a stray write on the port).
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The longest command the guest runs, in bytes. The guest writes a command to a file in its own
/// tmpfs and the shell sources it, so the kernel's limit on one argument (128 KiB) does not
/// apply; this bounds what one frame carries (a JSON-escaped command is at most six times
/// longer, well inside [`MAX_FRAME`]).
pub const MAX_COMMAND_BYTES: usize = 1024 * 1024;

/// Where background jobs keep their handle files, in the guest's own tmpfs: `ID.log` (the
/// output), `ID.exit` (the exit status, once the job's shell has ended) and `ID.pgid` (its
/// process group, present only while the group holds that number, so that a kill through it
/// cannot reach another process).
pub const JOBS_DIR: &str = "/tmp/abhed-jobs";

/// Whether `id` is a job id as the host makes them: 8 lowercase hex digits.
pub fn valid_job_id(id: &str) -> bool {
    id.len() == 8 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// How much of a command's output the guest keeps from the start and from the end. The host
/// cuts it to its own, smaller limit; these only bound what crosses the channel.
pub const KEEP_HEAD_BYTES: usize = 64 * 1024;
pub const KEEP_TAIL_BYTES: usize = 64 * 1024;

/// A directory the host shares with the guest over 9p.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// The 9p mount tag QEMU was given.
    pub tag: String,
    /// Where it is mounted in the guest (the host path, for the workspace).
    pub path: String,
    pub readonly: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Mount the shares, and set the PATH every command gets; sent once, right after `Ready`.
    Setup { shares: Vec<Share>, path: String },
    /// Run `command` in a fresh shell in `cwd`, wait for it (at most `timeout_ms`), and report.
    /// Every program it executes is checked against `policy` first ([`supervise`]).
    Exec { id: u64, command: String, cwd: String, fallback_cwd: String, timeout_ms: u64, policy: policy::ExecPolicy },
    /// Start `command` detached as job `job` (see [`valid_job_id`]), its output going to a log
    /// file; report its handle at once. Its execs are checked as [`Request::Exec`]'s are.
    Spawn { id: u64, job: String, command: String, cwd: String, fallback_cwd: String, policy: policy::ExecPolicy },
    /// Kill the command running now and every background job, with `reason` written to each
    /// job's log. It may arrive while an `Exec` runs (whose reply then says `stopped`) or between
    /// requests; it has no reply of its own. The host's disk watchdog sends it.
    Stop { reason: String },
    /// Sync and power off.
    Shutdown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    Ready {
        protocol: u32,
        kernel: String,
    },
    SetupDone {
        shell: String,
        errors: Vec<String>,
    },
    Exec(ExecResult),
    Spawned(SpawnResult),
    /// The request could not be carried out (a bad request, or the guest could not fork).
    Failed {
        id: u64,
        message: String,
    },
    ShuttingDown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecResult {
    pub id: u64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Processes of the command's group still running after it exited, which were killed.
    pub stragglers_killed: bool,
    pub output: Output,
    /// The shell's working directory when it exited, if it could be told.
    pub cwd: Option<String>,
    /// `cwd` no longer existed, so the command ran in `fallback_cwd`.
    pub cwd_reset: bool,
    pub duration_ms: u64,
    /// The command was killed because the host sent [`Request::Stop`].
    pub stopped: bool,
    /// Programs the command started that the exec check refused, in order.
    #[serde(default)]
    pub denied: Vec<policy::Denial>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnResult {
    pub id: u64,
    /// The job id the host chose.
    pub job: String,
    /// The job's process group (its shell's pid), for the record: the model is given the job id,
    /// which cannot name another process once the job is gone.
    pub pgid: i32,
    pub log: String,
    /// Holds the exit status once the job ends.
    pub exit_file: String,
    pub cwd_reset: bool,
}

/// Combined stdout and stderr: everything when it fits in `head`, otherwise the first
/// [`KEEP_HEAD_BYTES`] and last [`KEEP_TAIL_BYTES`] bytes, with `total_bytes` telling how much
/// there was. Bytes that are not UTF-8 arrive as U+FFFD, counted in `invalid_utf8_bytes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    pub head: String,
    pub tail: String,
    pub total_bytes: u64,
    /// Bytes neither in `head` nor in `tail`.
    pub omitted_bytes: u64,
    /// Bytes of `head` and `tail` that were not UTF-8, shown as U+FFFD (one for each maximal
    /// invalid sequence, as `String::from_utf8_lossy` does).
    #[serde(default)]
    pub invalid_utf8_bytes: u64,
}

/// Write one frame.
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("frame too large"))?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)?;
    w.flush()
}

/// Read one frame. `Ok(None)` at a clean end of stream (the peer closed between frames).
pub fn read_frame<R: Read, T: for<'de> Deserialize<'de>>(r: &mut R) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "stream ended inside a frame header")),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes exceeds {MAX_FRAME}")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    serde_json::from_slice(&body).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Keeps the first and last bytes of a stream of unknown length.
#[derive(Debug, Default)]
pub struct HeadTail {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
}

impl HeadTail {
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < KEEP_HEAD_BYTES {
            let n = bytes.len().min(KEEP_HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= KEEP_TAIL_BYTES {
            self.tail.clear();
            bytes = &bytes[bytes.len() - KEEP_TAIL_BYTES..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(KEEP_TAIL_BYTES);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    pub fn finish(&self) -> Output {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let kept = (self.head.len() + tail.len()) as u64;
        let omitted = self.total - kept;
        if omitted == 0 {
            // One contiguous text: decode it whole, so a character split between the two parts
            // stays one character.
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            let (head, invalid) = decode(&all);
            return Output {
                head,
                tail: String::new(),
                total_bytes: self.total,
                omitted_bytes: 0,
                invalid_utf8_bytes: invalid,
            };
        }
        // The cuts may split a character: its pieces count as cut, not as invalid bytes.
        let head_end = self.head.len() - partial_suffix(&self.head);
        let tail_start = tail.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count();
        let (head, bad_head) = decode(&self.head[..head_end]);
        let (tail_text, bad_tail) = decode(&tail[tail_start..]);
        Output {
            head,
            tail: tail_text,
            total_bytes: self.total,
            omitted_bytes: omitted + (self.head.len() - head_end + tail_start) as u64,
            invalid_utf8_bytes: bad_head + bad_tail,
        }
    }
}

/// `bytes` as text, each invalid sequence shown as one U+FFFD, and how many bytes were not
/// UTF-8.
fn decode(bytes: &[u8]) -> (String, u64) {
    let mut text = String::with_capacity(bytes.len());
    let mut invalid = 0u64;
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            invalid += chunk.invalid().len() as u64;
            text.push(char::REPLACEMENT_CHARACTER);
        }
    }
    (text, invalid)
}

/// How many bytes at the end of `b` are the start of a character that continues past it.
fn partial_suffix(b: &[u8]) -> usize {
    for back in 1..=3.min(b.len()) {
        let byte = b[b.len() - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let need = match byte {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if need > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_clean_end_is_none() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &Request::Shutdown).unwrap();
        write_frame(
            &mut buf,
            &Request::Exec {
                id: 7,
                command: "echo hi".into(),
                cwd: "/w".into(),
                fallback_cwd: "/w".into(),
                timeout_ms: 5,
                policy: policy::ExecPolicy::default(),
            },
        )
        .unwrap();
        let mut r = &buf[..];
        assert_eq!(read_frame::<_, Request>(&mut r).unwrap(), Some(Request::Shutdown));
        assert!(matches!(read_frame::<_, Request>(&mut r).unwrap(), Some(Request::Exec { id: 7, .. })));
        assert_eq!(read_frame::<_, Request>(&mut r).unwrap(), None);
    }

    #[test]
    fn a_truncated_frame_is_an_error() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &Request::Shutdown).unwrap();
        buf.pop();
        assert!(read_frame::<_, Request>(&mut &buf[..]).is_err());
    }

    #[test]
    fn head_tail_keeps_both_ends_and_counts_the_middle() {
        let mut ht = HeadTail::default();
        let data: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        for chunk in data.chunks(4093) {
            ht.push(chunk);
        }
        let out = ht.finish();
        assert_eq!(out.total_bytes, 300_000);
        assert_eq!(out.head.as_bytes(), &data[..KEEP_HEAD_BYTES]);
        assert_eq!(out.tail.as_bytes(), &data[300_000 - KEEP_TAIL_BYTES..]);
        assert_eq!(out.omitted_bytes, (300_000 - KEEP_HEAD_BYTES - KEEP_TAIL_BYTES) as u64);

        let mut small = HeadTail::default();
        small.push(b"hello");
        assert_eq!(
            small.finish(),
            Output {
                head: "hello".into(),
                tail: String::new(),
                total_bytes: 5,
                omitted_bytes: 0,
                invalid_utf8_bytes: 0
            }
        );
    }

    #[test]
    fn invalid_utf8_is_counted_and_a_character_cut_in_two_is_not() {
        let mut ht = HeadTail::default();
        ht.push(b"ok \xff\xfe end \xe2\x82");
        ht.push(b"\xac"); // completes the euro sign
        let out = ht.finish();
        assert_eq!(out.head, "ok \u{FFFD}\u{FFFD} end \u{20ac}");
        assert_eq!(out.invalid_utf8_bytes, 2);

        // A long stream whose head cut falls inside a 3-byte character: not "invalid".
        let mut ht = HeadTail::default();
        let mut data = vec![b'a'; KEEP_HEAD_BYTES - 1];
        data.extend("\u{20ac}".as_bytes());
        data.extend(vec![b'b'; 200_000]);
        ht.push(&data);
        let out = ht.finish();
        assert_eq!(out.invalid_utf8_bytes, 0);
        assert_eq!(out.head.len(), KEEP_HEAD_BYTES - 1);
        assert_eq!(out.total_bytes, data.len() as u64);
        assert_eq!(out.omitted_bytes, (data.len() - out.head.len() - out.tail.len()) as u64);
    }
}
