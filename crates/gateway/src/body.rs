//! Reading a client's request body, bounded: at most a limit is kept; past it the rest is read
//! and dropped (up to a second, larger bound) before the 413 is sent, because a client still
//! sending when the gateway answers and closes gets a reset connection, not the answer that
//! says why. A body past the second bound is abandoned (its connection closed after the 413).

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Body;

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unread {
    /// Past the limit (`drained`: read to its end, so the connection can stay open).
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: usize,
        /// Whether the rest was read to its end.
        drained: bool,
    },
    /// The client's connection failed mid-body.
    #[error("{0}")]
    Failed(String),
}

/// Read `body` whole if it is at most `limit` bytes; past it, drop what follows up to `drain`
/// bytes in all.
pub(crate) async fn read<B>(body: B, limit: usize, drain: usize) -> Result<Bytes, Unread>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut body = body;
    let mut kept = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Unread::Failed(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen > drain {
            return Err(Unread::TooLarge {
                limit,
                drained: false,
            });
        }
        if seen <= limit {
            kept.extend_from_slice(&data);
        }
    }
    if seen > limit {
        return Err(Unread::TooLarge {
            limit,
            drained: true,
        });
    }
    Ok(kept.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::Frame;
    use std::collections::VecDeque;
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A body of `n` chunks of `size` bytes, each ready.
    struct Chunks(VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn chunks(n: usize, size: usize) -> Chunks {
        Chunks((0..n).map(|_| Bytes::from(vec![b'x'; size])).collect())
    }

    fn read_now(body: Chunks, limit: usize, drain: usize) -> Result<Bytes, Unread> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(read(body, limit, drain))
    }

    #[test]
    fn a_body_within_the_limit_is_kept_whole() {
        let b = read_now(chunks(3, 10), 30, 100).expect("within");
        assert_eq!(b.len(), 30);
    }

    #[test]
    fn past_the_limit_the_rest_is_drained_up_to_the_second_bound() {
        assert!(matches!(
            read_now(chunks(5, 10), 30, 100),
            Err(Unread::TooLarge {
                limit: 30,
                drained: true
            })
        ));
        assert!(matches!(
            read_now(chunks(11, 10), 30, 100),
            Err(Unread::TooLarge {
                limit: 30,
                drained: false
            })
        ));
    }
}
