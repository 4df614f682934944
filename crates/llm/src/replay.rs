//! A real engine's recorded requests ([`crate::recorded`]) made the simulator's, and one
//! policy's replay of them summed up (`xsched llm replay`): so the simulator's figures can be
//! set beside the engine's for the very same requests, by one rule wherever they are replayed.

use crate::LlmError;
use crate::recorded::Recorded;
use xsched_llm_predict::embedding::Embedder;
use xsched_llm_sim::Request;
use xsched_llm_sim::sim::SimRun;

/// One policy's replay: mean and P99 TTLT, mean TTFT, and each request's TTLT.
#[derive(Clone, Debug)]
pub struct ReplaySummary {
    /// Requests that completed.
    pub completed: usize,
    /// Mean TTLT of the completed requests (s).
    pub mean_ttlt: f64,
    /// P99 TTLT of the completed requests (s; `None` when none completed).
    pub p99_ttlt: Option<f64>,
    /// Mean TTFT of the completed requests (s).
    pub mean_ttft: f64,
    /// Each request's TTLT by id, that is in arrival order (s; NaN where it did not complete).
    pub ttlt: Vec<f64>,
}

/// `recorded` as the simulator's requests, in arrival order (ids their positions), each prompt
/// embedded by `embedder`; an answer recorded with no tokens counts one.
pub fn requests(recorded: &[Recorded], embedder: &dyn Embedder) -> Result<Vec<Request>, LlmError> {
    let mut out = recorded
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let input_tokens = r
                .input_tokens
                .ok_or(LlmError::NoInputTokens { number: k + 1 })?;
            Ok(Request {
                id: 0,
                arrival: r.arrival,
                embedding: embedder.embed(&r.prompt),
                prompt: r.prompt.clone(),
                input_tokens,
                output_tokens: r.output_tokens.max(1),
                previous_answer_tokens: None,
            })
        })
        .collect::<Result<Vec<_>, LlmError>>()?;
    out.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
    for (k, r) in out.iter_mut().enumerate() {
        r.id = k;
    }
    Ok(out)
}

/// `run`'s figures, over the `requests` it was given.
pub fn summarize(run: &SimRun, requests: usize) -> ReplaySummary {
    let mut ttlt = vec![f64::NAN; requests];
    let mut ttft = 0.0;
    for o in &run.stats.outcomes {
        if let Some(t) = ttlt.get_mut(o.id) {
            *t = o.ttlt;
        }
        ttft += o.ttft;
    }
    let n = run.stats.outcomes.len().max(1);
    let done: Vec<f64> = ttlt.iter().copied().filter(|t| t.is_finite()).collect();
    ReplaySummary {
        completed: run.stats.outcomes.len(),
        mean_ttlt: done.iter().sum::<f64>() / n as f64,
        p99_ttlt: xsched_report::quantile(&done, 0.99),
        mean_ttft: ttft / n as f64,
        ttlt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xsched_llm_predict::embedding::Hashed;
    use xsched_llm_sim::engine::{RequestTimes, RunStats};

    fn recorded(arrival: f64, input_tokens: Option<u32>, output_tokens: u32) -> Recorded {
        Recorded {
            arrival,
            prompt: format!("prompt at {arrival}"),
            input_tokens,
            output_tokens,
        }
    }

    #[test]
    fn requests_are_sorted_by_arrival_renumbered_and_answer_at_least_one_token() {
        let got = requests(
            &[recorded(2.0, Some(5), 0), recorded(1.0, Some(3), 9)],
            &Hashed,
        )
        .expect("requests");
        let seen: Vec<_> = got
            .iter()
            .map(|r| (r.id, r.arrival, r.input_tokens, r.output_tokens))
            .collect();
        assert_eq!(seen, [(0, 1.0, 3, 9), (1, 2.0, 5, 1)]);
        assert_eq!(got[0].prompt, "prompt at 1");
        assert_eq!(got[0].embedding, Hashed.embed("prompt at 1"));
    }

    #[test]
    fn a_request_without_input_tokens_is_named() {
        let e = requests(
            &[recorded(0.0, Some(3), 1), recorded(1.0, None, 1)],
            &Hashed,
        )
        .expect_err("refused");
        assert_eq!(e.to_string(), "request 2 has no `input_tokens`");
    }

    #[test]
    fn the_summary_counts_completed_requests_and_leaves_the_rest_nan() {
        let done = |id, ttft, ttlt| RequestTimes { id, ttft, ttlt };
        let run = SimRun {
            stats: RunStats {
                outcomes: vec![done(2, 0.5, 2.0), done(0, 1.0, 4.0)],
                ..RunStats::default()
            },
            admitted: Vec::new(),
            scheduler_ns: Vec::new(),
            predict_ns: Vec::new(),
            evicted: Vec::new(),
            reclaimed: Vec::new(),
            limits: Vec::new(),
            decided: Vec::new(),
        };
        let s = summarize(&run, 3);
        assert_eq!(s.completed, 2);
        assert_eq!(
            (s.mean_ttlt, s.p99_ttlt, s.mean_ttft),
            (3.0, Some(4.0), 0.75)
        );
        assert_eq!((s.ttlt[0], s.ttlt[2]), (4.0, 2.0));
        assert!(s.ttlt[1].is_nan());
    }
}
