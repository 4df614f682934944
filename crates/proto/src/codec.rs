//! Length-prefixed frames over any byte stream, and [`ProtoError`], the crate's one error (most of
//! its failures begin with a frame).

use serde::{Serialize, de::DeserializeOwned};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;
use xsched_core::CoreError;

/// The largest frame accepted (bytes after the length prefix).
pub const MAX_FRAME: u32 = 64 * 1024;

/// What went wrong reading or writing frames, talking to the daemon as a client, or taking
/// hints off the wire. Each message leaves its cause to the error's source.
#[derive(Debug, Error)]
pub enum ProtoError {
    /// The stream failed or ended inside a frame.
    #[error("reading or writing a frame")]
    Io(#[from] std::io::Error),
    /// The length prefix exceeds [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(u32),
    /// The bytes are not a valid message.
    #[error("malformed frame")]
    Malformed(#[from] postcard::Error),
    /// Nobody listens at the socket (or it cannot be reached).
    #[error("no daemon at {} (start one with `xsched serve`)", .path.display())]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The daemon accepted the connection but did not answer in time.
    #[error("the daemon did not answer within {0:?} (is it stopped, or overloaded?)")]
    NoAnswer(Duration),
    /// The daemon answered with an error.
    #[error("the daemon refused: {0}")]
    Refused(String),
    /// The daemon answered something else than the protocol says.
    #[error("unexpected answer from the daemon: {0}")]
    Unexpected(String),
    /// The daemon closed the connection.
    #[error("the daemon closed the connection")]
    Closed,
    /// Hints from the wire that the core refuses (a zero time slice, say).
    #[error(transparent)]
    Hints(#[from] CoreError),
}

/// Write one message as a frame (one `write_all`, so concurrent writers must serialize).
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), ProtoError> {
    let body = postcard::to_allocvec(msg)?;
    let len = u32::try_from(body.len()).map_err(|_| ProtoError::TooLarge(u32::MAX))?;
    if len > MAX_FRAME {
        return Err(ProtoError::TooLarge(len));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&body);
    w.write_all(&frame)?;
    Ok(())
}

/// Read one frame. `Ok(None)` on a clean end of stream between frames.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<Option<T>, ProtoError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(ProtoError::TooLarge(len));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    Ok(Some(postcard::from_bytes(&body)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientMsg, DaemonMsg, WireHint, WireHints};

    #[test]
    fn round_trip_and_clean_end() {
        let msgs = vec![
            ClientMsg::Hello { version: 1 },
            ClientMsg::Register {
                queue: 3,
                device: 1,
                hints: WireHints::default(),
            },
            ClientMsg::Hint {
                queue: 3,
                hint: WireHint::Priority(-4),
            },
        ];
        let mut buf = Vec::new();
        for m in &msgs {
            write_frame(&mut buf, m).expect("write");
        }
        let mut r = buf.as_slice();
        let mut back = Vec::new();
        while let Some(m) = read_frame::<ClientMsg>(&mut r).expect("read") {
            back.push(m);
        }
        assert_eq!(back, msgs);
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        let mut huge = (MAX_FRAME + 1).to_le_bytes().to_vec();
        huge.extend_from_slice(&[0; 8]);
        assert!(matches!(
            read_frame::<DaemonMsg>(&mut huge.as_slice()),
            Err(ProtoError::TooLarge(_))
        ));
        let truncated = [10u8, 0, 0, 0, 1, 2];
        assert!(matches!(
            read_frame::<DaemonMsg>(&mut truncated.as_slice()),
            Err(ProtoError::Io(_))
        ));
        let garbage = [3u8, 0, 0, 0, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame::<DaemonMsg>(&mut garbage.as_slice()),
            Err(ProtoError::Malformed(_))
        ));
        assert!(matches!(
            read_frame::<DaemonMsg>(&mut [1u8, 0].as_slice()),
            Err(ProtoError::Io(_))
        ));
    }
}
