//! The order requests are admitted in, and the predictions behind it.
//!
//! - `fcfs`: arrival order.
//! - `sagesched`: SageSched's rule as the ShareGPT issue built it (`xsched_llm::policy`): the
//!   prompt is embedded, the history predictor gives the distribution of its answer's length
//!   (similar past prompts' real lengths, and the conversation's previous answer), capped at the
//!   request's `max_tokens`; the cost `O²/2 + I·O` of each length makes a cost distribution, and
//!   requests go in order of its Gittins index (highest first). The gateway admits a request
//!   whole, so its index is the one at no service attained.
//! - `sagesched-time`: the same rule over the predicted *time* on the engine instead of the
//!   paper's cost: `a·I + b·O`, with `a` (seconds per prompt token) and `b` (per output token)
//!   measured from streamed answers (admission to first byte, first byte to last, as moving
//!   sums). The paper's cost models a batching engine's compute and KV memory; an engine that
//!   serves one request at a time (llama-cpp-python's server) spends time linear in both, and
//!   on this machine a prompt token costs about as much as an output token. Until both rates
//!   are measured it orders by the paper's cost.
//!
//! The predictor learns online from every answer that ends whole: its output tokens as the
//! engine reported them (`usage`) or as counted from the stream (`tally.rs`). Input tokens are
//! the context's characters times a tokens-per-character ratio learned from the engine's
//! `usage.prompt_tokens` (0.25 until it reports one): the gateway does not run the engine's
//! tokenizer.
//!
//! The starvation guard is the ShareGPT issue's aging guard: a request still waiting
//! [`AGING_FACTOR`] times its predicted time alone on an engine after it arrived goes before
//! every request that has not aged. Time alone is its predicted output tokens times the
//! seconds per output token the gateway measured: moving averages of answers' service
//! (admission to the answer's end) and of their output tokens, divided, so long answers weigh
//! as much as they cost. Until one answer is measured nothing ages.
//!
//! The cost-aware router uses the same prediction, whatever the policy: the size of the mean
//! predicted answer (its time under `sagesched-time`, else the paper's cost).

use crate::admission::{Rank, Ticket};
use crate::metrics::Metrics;
use crate::request::Checked;
use crate::tally::Counted;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use xsched_llm::embedding::Embedder;
use xsched_llm::policy::{AGING_FACTOR, cost};
use xsched_llm::predictor::{Embedding, Predictor};

/// The order of admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// First come, first served.
    Fcfs,
    /// Highest Gittins index of the predicted cost first, with the aging guard.
    SageSched,
    /// The same over the predicted time on the engine (measured rates).
    SageSchedTime,
}

/// Every policy's name.
pub const NAMES: &[&str] = &["fcfs", "sagesched", "sagesched-time"];

impl Policy {
    /// Its name (`--policy`, and the metrics' `policy` label).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fcfs => "fcfs",
            Policy::SageSched => "sagesched",
            Policy::SageSchedTime => "sagesched-time",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "fcfs" => Ok(Policy::Fcfs),
            "sagesched" => Ok(Policy::SageSched),
            "sagesched-time" => Ok(Policy::SageSchedTime),
            _ => Err(format!("unknown policy `{s}`; known: {}", NAMES.join(", "))),
        }
    }
}

/// Entries the predictor's history holds by default.
pub const HISTORY: usize = 10_000;
/// Tokens per character assumed until the engine reports a prompt's tokens.
pub const TOKENS_PER_CHAR: f64 = 0.25;
/// The weight of each new answer in the learned ratios' moving averages.
const SMOOTHING: f64 = 0.1;

/// What is learned from answers.
struct Learned {
    predictor: Predictor,
    tokens_per_char: f64,
    /// Answers' service and output tokens.
    service: Rate,
    /// Streamed answers' prefill (admission to first byte) and prompt tokens.
    prefill: Rate,
    /// Streamed answers' decoding (first byte to last) and output tokens after the first.
    decode: Rate,
}

/// Seconds per token as moving averages of seconds and of tokens, divided (so long answers
/// weigh as much as they cost).
#[derive(Clone, Copy, Debug, Default)]
struct Rate(Option<(f64, f64)>);

impl Rate {
    /// A sample of `tokens` taking `seconds`; one of no tokens says nothing of a rate.
    fn add(&mut self, seconds: f64, tokens: f64) {
        if !(tokens > 0.0 && seconds.is_finite() && seconds >= 0.0) {
            return;
        }
        self.0 = Some(match self.0 {
            Some((s, t)) => (s + SMOOTHING * (seconds - s), t + SMOOTHING * (tokens - t)),
            None => (seconds, tokens),
        });
    }

    /// Seconds per token, once measured.
    fn get(self) -> Option<f64> {
        self.0.filter(|(_, t)| *t > 0.0).map(|(s, t)| s / t)
    }
}

/// How long an answer took, from its admission.
#[derive(Clone, Copy, Debug)]
pub struct Served {
    /// To its end.
    pub total: Duration,
    /// To its first byte, for a stream (`None`: a complete answer, whose first byte is its
    /// end's).
    pub first_byte: Option<Duration>,
}

/// What was predicted for a request, kept until its answer ends.
#[derive(Clone, Debug)]
pub struct Forecast {
    embedding: Embedding,
    /// The predicted mean output tokens.
    pub tokens: f64,
    context_chars: usize,
    /// The estimated prompt tokens.
    input: u32,
}

/// A request's ticket and, when the gateway predicts, its forecast.
#[derive(Debug)]
pub struct Placed {
    /// Its place in the queue.
    pub ticket: Ticket,
    /// What was predicted (`None`: nothing is predicted).
    pub forecast: Option<Forecast>,
}

/// The policy with its predictor.
pub struct Orderer {
    policy: Policy,
    embedder: Option<Arc<dyn Embedder>>,
    learned: Mutex<Learned>,
    arrivals: AtomicU64,
    metrics: Arc<Metrics>,
}

impl Orderer {
    /// `policy`, predicting with `embedder` (`None`: nothing is predicted; `sagesched` and the
    /// cost-aware router need one) over a history of `history` entries.
    pub fn new(
        policy: Policy,
        embedder: Option<Arc<dyn Embedder>>,
        history: usize,
        metrics: Arc<Metrics>,
    ) -> Orderer {
        Orderer {
            policy,
            embedder,
            learned: Mutex::new(Learned {
                predictor: Predictor::new(history),
                tokens_per_char: TOKENS_PER_CHAR,
                service: Rate::default(),
                prefill: Rate::default(),
                decode: Rate::default(),
            }),
            arrivals: AtomicU64::new(0),
            metrics,
        }
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Whether requests are predicted (placing one then embeds its prompt: CPU work, for a
    /// blocking thread).
    pub fn predicts(&self) -> bool {
        self.embedder.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Learned> {
        // Updates are single assignments and a history insert that cannot leave it torn.
        self.learned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A request's place, arriving now.
    pub fn place(&self, req: &Checked) -> Placed {
        let now = Instant::now();
        let arrival = self.arrivals.fetch_add(1, Ordering::Relaxed) as f64;
        let Some(embedder) = &self.embedder else {
            return Placed {
                ticket: Ticket::ranked(arrival),
                forecast: None,
            };
        };
        let embedding = embedder.embed(&req.prompt);
        let (lengths, input, seconds_per_token, rates) = {
            let learned = self.lock();
            let per_char = learned.tokens_per_char;
            let tokens = |chars: usize| (chars as f64 * per_char).round() as u32;
            let previous = req.previous_answer_chars.map(tokens);
            (
                learned.predictor.predict(&embedding, previous),
                tokens(req.context_chars).max(1),
                learned.service.get(),
                learned.prefill.get().zip(learned.decode.get()),
            )
        };
        let lengths = match req.max_tokens {
            Some(cap) => {
                let cap = cap.max(1) as f64;
                lengths.map(|o| o.min(cap)).unwrap_or(lengths)
            }
            None => lengths,
        };
        let tokens = lengths.mean();
        let size = |o: f64| match (self.policy, rates) {
            (Policy::SageSchedTime, Some((a, b))) => a * f64::from(input) + b * o,
            _ => cost(input, o as u32),
        };
        // Predicted tokens are finite and at least 1, rates finite and positive: every size is
        // finite. A guard time beyond what `Instant` holds is no guard.
        let aged_at = |s: f64| {
            Duration::try_from_secs_f64(AGING_FACTOR * s * tokens)
                .ok()
                .and_then(|d| now.checked_add(d))
        };
        let ticket = match self.policy {
            Policy::Fcfs => Ticket::ranked(arrival),
            Policy::SageSched | Policy::SageSchedTime => Ticket {
                rank: Rank(lengths.map(size).map_or(0.0, |d| -d.gittins(0.0))),
                aged_at: seconds_per_token.and_then(aged_at),
                cost: 0.0,
            },
        };
        Placed {
            ticket: Ticket {
                cost: size(tokens.round()),
                ..ticket
            },
            forecast: Some(Forecast {
                embedding,
                tokens,
                context_chars: req.context_chars,
                input,
            }),
        }
    }

    /// An answer predicted as `forecast` ended whole, `counted` long, `served` as it was: learn
    /// from it.
    pub fn learn(&self, forecast: Forecast, counted: Counted, served: Served) {
        self.metrics
            .predicted(forecast.tokens, f64::from(counted.output_tokens));
        let mut learned = self.lock();
        learned
            .predictor
            .learn(forecast.embedding, counted.output_tokens);
        if let Some(p) = counted.prompt_tokens
            && forecast.context_chars > 0
        {
            let ratio = f64::from(p) / forecast.context_chars as f64;
            learned.tokens_per_char += SMOOTHING * (ratio - learned.tokens_per_char);
        }
        let (total, output) = (served.total.as_secs_f64(), f64::from(counted.output_tokens));
        learned.service.add(total, output);
        if let Some(first) = served.first_byte {
            let prompt = counted.prompt_tokens.unwrap_or(forecast.input);
            learned.prefill.add(first.as_secs_f64(), f64::from(prompt));
            learned
                .decode
                .add(total - first.as_secs_f64(), (output - 1.0).max(0.0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Endpoint, check};
    use xsched_llm::embedding::Hashed;

    fn orderer(policy: Policy) -> Orderer {
        Orderer::new(policy, Some(Arc::new(Hashed)), 100, Arc::default())
    }

    fn chat(text: &str, max_tokens: u32) -> Checked {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens,
        });
        check(Endpoint::Chat, body.to_string().as_bytes()).expect("valid")
    }

    fn served(total_ms: u64, first_ms: Option<u64>) -> Served {
        Served {
            total: Duration::from_millis(total_ms),
            first_byte: first_ms.map(Duration::from_millis),
        }
    }

    fn teach(o: &Orderer, text: &str, tokens: u32, times: usize) {
        for _ in 0..times {
            let f = o.place(&chat(text, 4096)).forecast.expect("predicted");
            let counted = Counted {
                output_tokens: tokens,
                prompt_tokens: None,
            };
            o.learn(f, counted, served(u64::from(tokens), None));
        }
    }

    #[test]
    fn fcfs_ranks_by_arrival_and_predicts_only_with_an_embedder() {
        let o = Orderer::new(Policy::Fcfs, None, 10, Arc::default());
        let ranks: Vec<f64> = (0..3)
            .map(|_| o.place(&chat("x", 8)).ticket.rank.0)
            .collect();
        assert_eq!(ranks, [0.0, 1.0, 2.0]);
        assert!(o.place(&chat("x", 8)).forecast.is_none());
        let with = orderer(Policy::Fcfs).place(&chat("x", 8));
        assert!(with.forecast.is_some() && with.ticket.cost > 0.0 && with.ticket.aged_at.is_none());
    }

    #[test]
    fn sagesched_learns_online_to_put_short_answers_first() {
        let o = orderer(Policy::SageSched);
        let (short, long) = (
            "say yes or no",
            "write a long essay about the history of rome",
        );
        let before = [o.place(&chat(short, 4096)), o.place(&chat(long, 4096))];
        let [a, b] = before.map(|p| p.forecast.expect("predicted").tokens);
        assert_eq!(a, b, "nothing learned: one prior for both");
        for _ in 0..20 {
            teach(&o, short, 2, 1);
            teach(&o, long, 800, 1);
        }
        let [s, l] = [o.place(&chat(short, 4096)), o.place(&chat(long, 4096))];
        assert!(
            s.ticket.rank < l.ticket.rank,
            "{:?} vs {:?}",
            s.ticket,
            l.ticket
        );
        assert!(s.forecast.expect("f").tokens < l.forecast.expect("f").tokens);
        assert!(s.ticket.cost < l.ticket.cost);
    }

    #[test]
    fn predictions_are_capped_at_max_tokens() {
        let o = orderer(Policy::SageSched);
        teach(&o, "long", 1000, 40);
        let capped = o.place(&chat("long", 16)).forecast.expect("f");
        assert!(capped.tokens <= 16.0, "{}", capped.tokens);
    }

    #[test]
    fn the_aging_guard_starts_once_service_is_measured_and_scales_with_the_prediction() {
        let o = orderer(Policy::SageSched);
        assert!(
            o.place(&chat("q", 64)).ticket.aged_at.is_none(),
            "nothing measured"
        );
        // 1 ms per token, 50 tokens each.
        teach(&o, "q", 50, 40);
        let before = Instant::now();
        let aged_at = o.place(&chat("q", 64)).ticket.aged_at.expect("guarded");
        let wait = aged_at - before;
        // AGING_FACTOR × 50 tokens × 1 ms.
        let expected = Duration::from_secs_f64(AGING_FACTOR * 0.050);
        assert!(
            wait <= expected + Duration::from_millis(50)
                && wait + Duration::from_millis(50) >= expected,
            "{wait:?} vs {expected:?}"
        );
    }

    #[test]
    fn answers_of_no_tokens_teach_no_rate_and_nothing_panics() {
        let o = orderer(Policy::SageSchedTime);
        for _ in 0..2000 {
            let f = o.place(&chat("empty", 0)).forecast.expect("f");
            let counted = Counted {
                output_tokens: 0,
                prompt_tokens: Some(1),
            };
            o.learn(f, counted, served(5, Some(5)));
        }
        let l = o.lock();
        assert!(
            l.service.get().is_none() && l.decode.get().is_none(),
            "no rate from 0 tokens"
        );
        drop(l);
        for _ in 0..500 {
            let f = o.place(&chat("one", 1)).forecast.expect("f");
            let counted = Counted {
                output_tokens: 1,
                prompt_tokens: Some(1),
            };
            o.learn(f, counted, served(5, Some(5)));
        }
        let placed = o.place(&chat("one", 1));
        assert!(placed.ticket.cost.is_finite() && placed.ticket.rank.0.is_finite());
    }

    #[test]
    fn input_tokens_follow_the_engines_reported_prompt_lengths() {
        let o = orderer(Policy::SageSched);
        let text = "x".repeat(400);
        let first = o.place(&chat(&text, 8)).ticket.cost;
        for _ in 0..60 {
            let f = o.place(&chat(&text, 8)).forecast.expect("f");
            let counted = Counted {
                output_tokens: 8,
                prompt_tokens: Some(400),
            };
            o.learn(f, counted, served(8, None));
        }
        let learned = o.lock().tokens_per_char;
        assert!((learned - 1.0).abs() < 0.01, "{learned}");
        assert!(o.place(&chat(&text, 8)).ticket.cost > first);
    }

    #[test]
    fn sagesched_time_ranks_by_measured_time_where_the_paper_cost_ranks_by_output() {
        // Same predicted answer length (8 tokens, learned); one prompt 100 times longer.
        let (short, long) = ("q".to_string(), "q ".repeat(400));
        for policy in [Policy::SageSched, Policy::SageSchedTime] {
            let o = orderer(policy);
            for text in [&short, &long] {
                for _ in 0..20 {
                    let f = o.place(&chat(text, 4096)).forecast.expect("f");
                    let counted = Counted {
                        output_tokens: 8,
                        prompt_tokens: None,
                    };
                    // Prefill: 1 ms a prompt token; decoding: 1 ms a token.
                    let prefill = u64::from(f.input);
                    o.learn(f, counted, served(prefill + 7, Some(prefill)));
                }
            }
            let rates = {
                let l = o.lock();
                (l.prefill.get(), l.decode.get())
            };
            let (a, b) = (rates.0.expect("prefill"), rates.1.expect("decode"));
            assert!(
                (a - 0.001).abs() < 1e-4 && (b - 0.001).abs() < 1e-4,
                "{a} {b}"
            );
            let rank = |t: &str| o.place(&chat(t, 4096)).ticket.rank;
            assert!(
                rank(&short) < rank(&long),
                "{policy:?}: the short prompt first"
            );
        }
        // A long answer to a short prompt against a short answer to a long prompt: by time
        // (1 + 200 ms against 200 + 8 ms) nearly even; by the paper's cost the long answer
        // (200²/2 + 200 = 20 200) is far costlier than the long prompt (8²/2 + 200·8 = 1 632).
        let paper = cost(1, 200) / cost(200, 8);
        assert!(paper > 10.0, "{paper}");
    }

    #[test]
    fn names_parse_back_and_unknown_ones_list_the_known() {
        for name in NAMES {
            assert_eq!(name.parse::<Policy>().map(Policy::name), Ok(*name));
        }
        assert!(
            "srpt"
                .parse::<Policy>()
                .expect_err("unknown")
                .contains("fcfs, sagesched, sagesched-time")
        );
    }
}
