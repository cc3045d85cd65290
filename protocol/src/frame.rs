//! Length-delimited framing of messages on a byte stream.
//!
//! A frame is a 4-byte big-endian payload length followed by the payload, a
//! JSON-encoded message. The length is checked against a limit before any
//! allocation, so a corrupt or hostile length cannot exhaust memory.

use std::io::{self, Read, Write};

use serde::{de::DeserializeOwned, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest payload accepted by default (bundles included).
pub const MAX_FRAME: usize = 64 << 20;

/// Why a frame could not be read or decoded.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The stream ended cleanly before a frame started.
    #[error("stream closed")]
    Closed,
    /// The stream ended inside a frame.
    #[error("truncated frame: expected {expected} bytes, stream ended after {got}")]
    Truncated {
        /// Bytes the frame announced (or 4 for the header).
        expected: usize,
        /// Bytes read before the end.
        got: usize,
    },
    /// The announced length exceeds the limit.
    #[error("oversized frame: {len} bytes announced, limit is {limit}")]
    Oversized {
        /// Announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The payload is not a valid message.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// An I/O error.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

impl FrameError {
    /// Whether the stream can still be read after this error (the bad frame was consumed whole).
    pub fn is_recoverable(&self) -> bool {
        matches!(self, FrameError::Malformed(_))
    }
}

/// Encodes a message as one frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let payload = serde_json::to_vec(msg).expect("protocol messages always serialize");
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Writes one message as a frame and flushes.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> io::Result<()> {
    w.write_all(&encode(msg))?;
    w.flush()
}

/// Reads one frame's payload (at most `limit` bytes).
pub fn read_payload(r: &mut impl Read, limit: usize) -> Result<Vec<u8>, FrameError> {
    let mut header = [0u8; 4];
    let got = read_full(r, &mut header)?;
    if got == 0 {
        return Err(FrameError::Closed);
    }
    if got < 4 {
        return Err(FrameError::Truncated { expected: 4, got });
    }
    let len = u32::from_be_bytes(header) as usize;
    if len > limit {
        return Err(FrameError::Oversized { len, limit });
    }
    let mut payload = vec![0u8; len];
    let got = read_full(r, &mut payload)?;
    if got < len {
        return Err(FrameError::Truncated { expected: len, got });
    }
    Ok(payload)
}

/// Reads and decodes one message.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read, limit: usize) -> Result<T, FrameError> {
    decode(&read_payload(r, limit)?)
}

/// Decodes a payload.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(payload).map_err(|e| FrameError::Malformed(e.to_string()))
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Writes one message as a frame and flushes (async).
pub async fn write_frame_async<T: Serialize>(
    w: &mut (impl AsyncWrite + Unpin),
    msg: &T,
) -> io::Result<()> {
    w.write_all(&encode(msg)).await?;
    w.flush().await
}

/// Reads one frame's payload (async, at most `limit` bytes).
pub async fn read_payload_async(
    r: &mut (impl AsyncRead + Unpin),
    limit: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut header = [0u8; 4];
    let got = read_full_async(r, &mut header).await?;
    if got == 0 {
        return Err(FrameError::Closed);
    }
    if got < 4 {
        return Err(FrameError::Truncated { expected: 4, got });
    }
    let len = u32::from_be_bytes(header) as usize;
    if len > limit {
        return Err(FrameError::Oversized { len, limit });
    }
    let mut payload = vec![0u8; len];
    let got = read_full_async(r, &mut payload).await?;
    if got < len {
        return Err(FrameError::Truncated { expected: len, got });
    }
    Ok(payload)
}

/// Reads and decodes one message (async).
pub async fn read_frame_async<T: DeserializeOwned>(
    r: &mut (impl AsyncRead + Unpin),
    limit: usize,
) -> Result<T, FrameError> {
    decode(&read_payload_async(r, limit).await?)
}

async fn read_full_async(r: &mut (impl AsyncRead + Unpin), buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]).await? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}
