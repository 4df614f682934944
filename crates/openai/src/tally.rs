//! Counting an answer's tokens as it passes through, so the predictor learns from real answers:
//! the `usage` an engine reports (`completion_tokens`, and `prompt_tokens` for the prompt's
//! length) when it sends one, else, in a stream, the events that carry text (llama.cpp's and
//! vLLM's servers send one per token) and, for the prompt, llama.cpp's `timings` (`prompt_n` +
//! `cache_n`, in a stream's last event). A stream is scanned line by line as its chunks arrive,
//! and counts only if it finished (a `finish_reason` or `data: [DONE]`): one cut short, or
//! ended by an error event, says nothing of the answer's length. A complete answer is kept (up
//! to [`MAX_KEPT`] bytes) and read at its end. Nothing is changed.

use serde::Deserialize;
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use std::borrow::Cow;

/// The most bytes of a non-streamed answer kept to read its `usage` (a larger answer is not
/// learned from), and of one unfinished line of a stream.
pub const MAX_KEPT: usize = 1 << 20;

/// What an answer said about its length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// Output tokens: `usage.completion_tokens`, or the events with text.
    pub output_tokens: u32,
    /// `usage.prompt_tokens`, when the engine reported it.
    pub prompt_tokens: Option<u32>,
}

/// The tally of one answer.
#[derive(Debug)]
pub struct Tally {
    stream: bool,
    /// A non-streamed answer so far, or a stream's unfinished line.
    kept: Vec<u8>,
    overflow: bool,
    events_with_text: u32,
    usage: Option<Counted>,
    /// The prompt's tokens by llama.cpp's `timings`.
    timed_prompt: Option<u32>,
    /// A stream said it finished.
    finished: bool,
    /// A stream carried an error event.
    errored: bool,
}

impl Tally {
    /// A tally of a streamed (server-sent events) or complete JSON answer.
    pub fn new(stream: bool) -> Tally {
        Tally {
            stream,
            kept: Vec::new(),
            overflow: false,
            events_with_text: 0,
            usage: None,
            timed_prompt: None,
            finished: false,
            errored: false,
        }
    }

    /// Whether the answer is a stream of events.
    pub fn streamed(&self) -> bool {
        self.stream
    }

    /// Events with text so far (a stream's output tokens as they pass; 0 for a complete
    /// answer, read only at its end).
    pub fn text_events(&self) -> u32 {
        self.events_with_text
    }

    /// The next chunk of the answer's body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if !self.stream {
            self.keep(chunk);
            return;
        }
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.keep(&rest[..end]);
            let line = std::mem::take(&mut self.kept);
            if !std::mem::take(&mut self.overflow) {
                self.line(&line);
            }
            self.kept = line;
            self.kept.clear();
            rest = &rest[end + 1..];
        }
        self.keep(rest);
    }

    fn keep(&mut self, bytes: &[u8]) {
        if self.kept.len() + bytes.len() > MAX_KEPT {
            self.overflow = true;
            self.kept.clear();
        } else if !self.overflow {
            self.kept.extend_from_slice(bytes);
        }
    }

    /// One line of a stream: `data: {json}` events count.
    fn line(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            self.finished = true;
            return;
        }
        let Ok(event) = serde_json::from_slice::<Event<'_>>(data) else {
            return; // Not JSON of an event: not a token.
        };
        let choice = event.choices.0.as_ref();
        if choice.is_some_and(|c| c.finish_reason.is_some()) {
            self.finished = true;
        }
        if event.error.is_some() {
            self.errored = true;
        }
        if let Some(u) = event.usage.and_then(Usage::counted) {
            self.usage = Some(u);
        }
        if let Some(p) = event.timings.and_then(Timings::prompt) {
            self.timed_prompt = Some(p);
        }
        if choice.is_some_and(Choice::has_text) {
            self.events_with_text += 1;
        }
    }

    /// The answer ended: what it said of its length, if anything.
    pub fn finish(mut self) -> Option<Counted> {
        if self.stream {
            let last = std::mem::take(&mut self.kept);
            if !self.overflow {
                self.line(&last);
            }
            if !self.finished || self.errored {
                return None;
            }
            let counted = self.usage.or_else(|| {
                (self.events_with_text > 0).then_some(Counted {
                    output_tokens: self.events_with_text,
                    prompt_tokens: None,
                })
            })?;
            return Some(Counted {
                prompt_tokens: counted.prompt_tokens.or(self.timed_prompt),
                ..counted
            });
        }
        if self.overflow {
            return None;
        }
        serde_json::from_slice::<Event<'_>>(&self.kept)
            .ok()?
            .usage?
            .counted()
    }
}

/// Whether a streamed event (its JSON) carries generated text (a chat delta's or a completion's).
pub fn has_text(event: &[u8]) -> bool {
    serde_json::from_slice::<Event<'_>>(event)
        .is_ok_and(|e| e.choices.0.as_ref().is_some_and(Choice::has_text))
}

/// What the tally reads of a streamed event or a complete answer; the rest is skipped unread
/// (no map of the whole event is built: this runs once per streamed token).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    choices: FirstChoice<'a>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    timings: Option<Timings>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// The first of an event's choices (the others skipped).
#[derive(Default)]
struct FirstChoice<'a>(Option<Choice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct First<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for First<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
                let first = seq.next_element()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FirstChoice(first))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(FirstChoice(None))
            }
        }
        d.deserialize_any(First(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    finish_reason: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
}

impl Choice<'_> {
    fn has_text(&self) -> bool {
        self.delta
            .as_ref()
            .and_then(|d| d.content.as_deref())
            .or(self.text.as_deref())
            .is_some_and(|t| !t.is_empty())
    }
}

#[derive(Deserialize)]
struct Usage {
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
}

/// llama.cpp's server's `timings`: the prompt's tokens evaluated and those taken from its cache.
#[derive(Deserialize)]
struct Timings {
    prompt_n: Option<u64>,
    cache_n: Option<u64>,
}

impl Timings {
    fn prompt(self) -> Option<u32> {
        let n = self.prompt_n?.checked_add(self.cache_n.unwrap_or(0))?;
        u32::try_from(n).ok()
    }
}

impl Usage {
    fn counted(self) -> Option<Counted> {
        Some(Counted {
            output_tokens: u32::try_from(self.completion_tokens?).ok()?,
            prompt_tokens: self.prompt_tokens.and_then(|p| u32::try_from(p).ok()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(stream: bool, chunks: &[&[u8]]) -> Option<Counted> {
        let mut t = Tally::new(stream);
        chunks.iter().for_each(|c| t.feed(c));
        t.finish()
    }

    #[test]
    fn a_complete_answer_is_counted_by_its_usage() {
        let body = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#;
        let (a, b) = body.split_at(40);
        assert_eq!(
            tally(false, &[a, b]),
            Some(Counted {
                output_tokens: 7,
                prompt_tokens: Some(12)
            })
        );
        assert_eq!(tally(false, &[b"{\"choices\":[]}"]), None, "no usage");
        assert_eq!(tally(false, &[b"not json"]), None);
    }

    #[test]
    fn a_stream_counts_events_with_text_across_split_chunks() {
        let events = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n\
                      data: {\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\n\
                      data: [DONE]\n\n";
        for cut in [1, 7, 50, 101, events.len() - 3] {
            let (a, b) = events.as_bytes().split_at(cut);
            assert_eq!(
                tally(true, &[a, b]),
                Some(Counted {
                    output_tokens: 2,
                    prompt_tokens: None
                }),
                "cut at {cut}"
            );
        }
        let completion =
            b"data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\",\"finish_reason\":\"length\"}]}";
        assert_eq!(tally(true, &[completion]).map(|c| c.output_tokens), Some(2));
        assert_eq!(tally(true, &[b"data: [DONE]\n\n"]), None, "nothing said");
    }

    #[test]
    fn a_stream_cut_short_or_ended_by_an_error_is_not_counted() {
        let cut = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
        assert_eq!(tally(true, &[cut]), None, "no finish_reason, no [DONE]");
        let error = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"oom\"}}\n\ndata: [DONE]\n\n";
        assert_eq!(tally(true, &[error]), None);
    }

    #[test]
    fn a_streamed_usage_wins_over_the_event_count() {
        let events = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n\
                       data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9}}\n\n\
                       data: [DONE]\n\n";
        assert_eq!(
            tally(true, &[events]),
            Some(Counted {
                output_tokens: 9,
                prompt_tokens: Some(3)
            })
        );
    }

    #[test]
    fn a_llama_cpp_streams_timings_give_its_prompt_length_without_usage() {
        let events = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n\
                       data: {\"choices\":[{\"finish_reason\":\"length\",\"delta\":{}}],\
                       \"timings\":{\"cache_n\":4,\"prompt_n\":27,\"prompt_ms\":105.3}}\n\n\
                       data: [DONE]\n\n";
        assert_eq!(
            tally(true, &[events]),
            Some(Counted {
                output_tokens: 1,
                prompt_tokens: Some(31)
            })
        );
    }

    #[test]
    fn an_answer_past_the_bound_is_not_learned_and_costs_bounded_memory() {
        let mut t = Tally::new(false);
        let chunk = vec![b' '; MAX_KEPT / 2 + 1];
        t.feed(&chunk);
        t.feed(&chunk);
        assert!(t.kept.capacity() <= MAX_KEPT, "nothing kept past the bound");
        t.feed(br#"{"usage":{"completion_tokens":1}}"#);
        assert_eq!(t.finish(), None);
        // A stream's over-long line is skipped; the lines after it still count.
        let mut s = Tally::new(true);
        s.feed(b"data: ");
        s.feed(&vec![b'x'; MAX_KEPT + 1]);
        s.feed(b"\ndata: {\"choices\":[{\"delta\":{\"content\":\"y\"}}]}\ndata: [DONE]\n");
        assert_eq!(s.finish().map(|c| c.output_tokens), Some(1));
    }
}
