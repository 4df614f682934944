//! An upstream answer's body on its way to the client, unchanged and chunk by chunk (so
//! server-sent events arrive as the engine sends them), told to whoever follows the request
//! ([`AnswerWatch`], the per-request object of `life.rs`): each chunk as it passes and how the
//! answer ended. It knows nothing of scheduling; a client that goes away drops it, and what
//! follows the request sees that from its own side.
//!
//! A body that falls silent for the idle timeout is ended (a stream with an error event, any
//! other body cut) and its upstream reported to [`Health`], unless its watcher says the answer
//! waits its turn in the engine's own queue (the silence then starts over); a body its watcher
//! stops (a request evicted for a higher class) ends the same way after what was already read.

use crate::error::{AnswerBody, BodyError, EVICTED};
use crate::health::Health;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Response;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::CONTENT_TYPE;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How an answer's body ended, for whoever follows the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It ended whole.
    Whole,
    /// The engine's connection failed.
    Failed,
    /// The engine fell silent for the idle timeout.
    Silent,
    /// It was told to stop (evicted).
    Stopped,
}

/// Whoever follows the request is told what passes and how the answer ended.
pub trait AnswerWatch: Send + Sync + Unpin + 'static {
    /// A chunk of the answer passed (at `at`: the first one is its first byte).
    fn passed(&mut self, data: &[u8], at: Instant);
    /// Whether the answer is to stop now (polled with the body; `cx` wakes it when it is).
    fn stop(&mut self, cx: &mut Context<'_>) -> bool;
    /// Whether the answer, silent for `silence`, waits its turn in its engine's own queue (the
    /// silence is then not the engine's fault, and the answer is not cut).
    fn waits_its_turn(&self, silence: Duration) -> bool;
    /// The answer ended, `how`: called once at most (a body dropped first tells nobody).
    fn ended(self, how: Ended);
}

/// Nobody follows (a request passed through unscheduled).
impl AnswerWatch for () {
    fn passed(&mut self, _: &[u8], _: Instant) {}
    fn stop(&mut self, _: &mut Context<'_>) -> bool {
        false
    }
    fn waits_its_turn(&self, _: Duration) -> bool {
        false
    }
    fn ended(self, _: Ended) {}
}

/// The upstream an answer comes from, as its health knows it.
pub struct Origin {
    /// Its health.
    pub health: Arc<Health>,
    /// Its index.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// How long its answer's body may fall silent.
    pub idle: Duration,
}

/// The client's answer: the upstream's head (hop-by-hop headers stripped) and its body relayed,
/// told to `watch`, which may stop it early.
pub fn relay<W: AnswerWatch>(
    answer: Response<Incoming>,
    from: Origin,
    watch: W,
) -> Response<AnswerBody> {
    let (mut parts, body) = answer.into_parts();
    crate::upstream::strip_hop_by_hop(&mut parts.headers);
    let event_stream = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let relay = Relay {
        body: Some(body),
        watch: Some(watch),
        silence: Silence {
            limit: from.idle,
            last: Instant::now(),
            timer: Box::pin(tokio::time::sleep(from.idle)),
        },
        event_stream,
        from,
        gather: Gather::default(),
    };
    Response::from_parts(parts, relay.boxed())
}

/// How long an answer's body has been silent.
struct Silence {
    limit: Duration,
    /// The last chunk (or the head).
    last: Instant,
    /// Fires at the earliest the silence could reach its limit (re-armed from `last` then, so
    /// a chunk costs a clock read, not a timer reset).
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl Silence {
    /// Whether the body has now been silent for the limit (else the timer is re-armed).
    fn poll_over(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            let due = self.last + self.limit;
            if due <= Instant::now() {
                return true;
            }
            self.timer.as_mut().reset(due.into());
        }
    }
}

type Polled = Poll<Option<Result<Frame<Bytes>, BodyError>>>;

/// An upstream answer's body on its way.
struct Relay<W: AnswerWatch> {
    /// The upstream's body; `None` once it ended or was cut (its connection dropped).
    body: Option<Incoming>,
    /// Told what passes; `None` once told how it ended.
    watch: Option<W>,
    silence: Silence,
    /// Server-sent events, which can end with an error event.
    event_stream: bool,
    from: Origin,
    /// What is taken from the engine and not yet passed on.
    gather: Gather,
}

impl<W: AnswerWatch> Relay<W> {
    /// Tell the watcher how the answer ended (once).
    fn ended(&mut self, how: Ended) {
        if let Some(w) = self.watch.take() {
            w.ended(how);
        }
    }

    /// The upstream fell silent: report it and end the answer.
    fn silent(&mut self) -> Polled {
        let why = format!(
            "upstream {} sent nothing for {} s",
            self.from.name,
            self.silence.limit.as_secs_f64()
        );
        tracing::warn!("{why}");
        self.from.health.failed(self.from.index, &why);
        self.cut(Ended::Silent, why, 504)
    }

    /// Drop the engine's connection (the engine stops the request) and end the answer after
    /// what was already read: a stream with an error event that says why, any other body with
    /// an error.
    fn cut(&mut self, how: Ended, why: String, code: u16) -> Polled {
        self.body = None;
        self.ended(how);
        if self.event_stream {
            let kind = if code == 503 {
                "server_error"
            } else {
                "upstream_error"
            };
            let event = serde_json::json!({"error": {"message": why, "type": kind, "code": code}});
            self.gather
                .held
                .extend_from_slice(format!("data: {event}\n\n").as_bytes());
            Poll::Ready(self.gather.release().map(Ok))
        } else {
            self.gather.release_then(Some(Err(why.into())))
        }
    }

    /// A frame came from the engine.
    fn frame(&mut self, frame: Frame<Bytes>) -> Option<Polled> {
        self.silence.last = Instant::now();
        let other = match frame.into_data() {
            Ok(data) => {
                if let Some(w) = &mut self.watch {
                    w.passed(&data, self.silence.last);
                }
                self.gather.held.extend_from_slice(&data);
                None
            }
            Err(trailers) => Some(trailers),
        };
        // A sized body's last frame: the server may not poll again.
        let ended = self.body.as_ref().is_none_or(Body::is_end_stream);
        if ended {
            self.ended(Ended::Whole);
        }
        if let Some(other) = other {
            return Some(self.gather.release_then(Some(Ok(other))));
        }
        (ended || self.gather.held.len() >= GATHER_BYTES)
            .then(|| Poll::Ready(self.gather.release().map(Ok)))
    }

    /// The engine's connection had nothing this poll.
    fn pending(&mut self, cx: &mut Context<'_>) -> Polled {
        if self.gather.held.is_empty() {
            while self.silence.poll_over(cx) {
                let waits = self.watch.as_ref();
                if !waits.is_some_and(|w| w.waits_its_turn(self.silence.limit)) {
                    return self.silent();
                }
                // Queued, not hung: the silence starts over (and the timer is re-armed).
                self.silence.last = Instant::now();
            }
            return Poll::Pending;
        }
        if self.gather.wait_for_more() {
            // The engine's connection runs on this thread's queue before this task is polled
            // again: what it has read already comes in the meantime.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(self.gather.release().map(Ok))
    }
}

impl<W: AnswerWatch> Body for Relay<W> {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        if let Some(stashed) = this.gather.stashed.take() {
            return Poll::Ready(stashed);
        }
        if this.watch.as_mut().is_some_and(|w| w.stop(cx)) {
            return this.cut(Ended::Stopped, EVICTED.to_string(), 503);
        }
        loop {
            let Some(body) = &mut this.body else {
                return Poll::Ready(None);
            };
            match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(polled) = this.frame(frame) {
                        return polled;
                    }
                }
                Poll::Ready(None) => {
                    this.ended(Ended::Whole);
                    return this.gather.release_then(None);
                }
                Poll::Ready(Some(Err(e))) => {
                    this.ended(Ended::Failed);
                    return this.gather.release_then(Some(Err(e.into())));
                }
                Poll::Pending => return this.pending(cx),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.gather.held.is_empty()
            && self.gather.stashed.is_none()
            && self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            Some(body) if self.gather.held.is_empty() => body.size_hint(),
            Some(_) => SizeHint::default(),
            None => SizeHint::with_exact(0),
        }
    }
}

/// The most bytes of an answer gathered into one frame for the client.
const GATHER_BYTES: usize = 16 * 1024;

/// How many times in a row the engine's connection may bring nothing before what is held is
/// passed on. hyper polls a body twice in one turn when the first poll wrote nothing (so one
/// empty poll is not yet a turn given to the engine's connection), and a second turn without
/// data means it has none: the answer then goes out at once.
const EMPTY_POLLS: u8 = 3;

/// Answer data taken from the engine's connection and not yet passed on: when the engine sends
/// faster than events are passed on one by one (a burst read in one go from its socket), the
/// client gets them in one write instead of one write each, which costs less per event. An
/// answer whose events come apart loses nothing: each goes out as soon as the engine's
/// connection has nothing more, one task turn later.
#[derive(Default)]
struct Gather {
    held: bytes::BytesMut,
    /// How much was held at the last poll that found nothing more.
    held_at_last_empty: usize,
    /// Polls in a row that found nothing more.
    empty: u8,
    /// What the engine's body said after the held data (its end, an error or trailers), for
    /// the next poll.
    stashed: Option<Option<Result<Frame<Bytes>, BodyError>>>,
}

impl Gather {
    /// The engine's connection had nothing more this poll: whether to wait for it once more.
    fn wait_for_more(&mut self) -> bool {
        if self.held.len() > self.held_at_last_empty {
            self.empty = 0;
        }
        self.held_at_last_empty = self.held.len();
        self.empty += 1;
        self.empty < EMPTY_POLLS
    }

    /// The held data as one frame, if any.
    fn release(&mut self) -> Option<Frame<Bytes>> {
        self.held_at_last_empty = 0;
        self.empty = 0;
        (!self.held.is_empty()).then(|| Frame::data(self.held.split().freeze()))
    }

    /// The held data first, if any, and `next` at the next poll; else `next` now.
    fn release_then(&mut self, next: Option<Result<Frame<Bytes>, BodyError>>) -> Polled {
        match self.release() {
            Some(data) => {
                self.stashed = Some(next);
                Poll::Ready(Some(Ok(data)))
            }
            None => Poll::Ready(next),
        }
    }
}
