//! What the simulator's tests share: synthetic requests and one call to run them.

#![allow(dead_code)]

use xsched_llm_core::RequestPolicySpec;
use xsched_llm_predict::embedding::{Embedder, Hashed};
use xsched_llm_sim::Request;
use xsched_llm_sim::engine::{EngineConfig, RequestTimes};
use xsched_llm_sim::sim::{self, Cluster, SimRun};

/// A request of `input` prompt and `output` answer tokens arriving at `arrival`.
pub fn req(id: usize, arrival: f64, input: u32, output: u32) -> Request {
    let prompt = format!("prompt number {}", id % 13);
    Request {
        id,
        arrival,
        embedding: Hashed.embed(&prompt),
        prompt,
        input_tokens: input,
        output_tokens: output,
        previous_answer_tokens: None,
    }
}

/// `n` requests arriving `gap` seconds apart with scattered prompt and output lengths (the
/// output pattern set by the stride `out_stride`).
pub fn staggered(n: usize, gap: f64, out_stride: u32) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let k = i as u32;
            req(
                i,
                i as f64 * gap,
                30 + (k * 37) % 300,
                3 + (k * out_stride) % 400,
            )
        })
        .collect()
}

/// The policy called `name`.
pub fn policy(name: &str) -> RequestPolicySpec {
    name.parse().expect("a known policy")
}

/// `requests` on one engine of `cfg` under `name`, a history of 100.
pub fn run(cfg: &EngineConfig, name: &str, requests: &[Request]) -> SimRun {
    run_on(cfg, Cluster::SINGLE, name, requests)
}

/// The same on `cluster`.
pub fn run_on(cfg: &EngineConfig, cluster: Cluster, name: &str, requests: &[Request]) -> SimRun {
    sim::simulate(cfg, cluster, policy(name), 100, &[], requests).expect("a valid run")
}

/// Mean TTLT (s).
pub fn mean_ttlt(outcomes: &[RequestTimes]) -> f64 {
    outcomes.iter().map(|o| o.ttlt).sum::<f64>() / outcomes.len().max(1) as f64
}
