//! The engine simulator on synthetic requests: exact step arithmetic, determinism, and the
//! orderings scheduling theory predicts.

use xsched_llm::Request;
use xsched_llm::embedding::{Embedder, Hashed};
use xsched_llm::engine::{EngineConfig, simulate};
use xsched_llm::policy;

fn engine() -> EngineConfig {
    EngineConfig::preset("llama3.1-8b-a100").expect("preset")
}

fn req(id: usize, arrival: f64, input: u32, output: u32) -> Request {
    let prompt = format!("prompt number {id}");
    Request {
        id,
        arrival,
        embedding: Hashed.embed(&prompt),
        prompt,
        input_tokens: input,
        output_tokens: output,
    }
}

#[test]
fn one_request_takes_one_prefill_step_and_one_step_per_further_token() {
    let cfg = engine();
    let [b0, b1, b2] = cfg.beta_us;
    let stats = simulate(&cfg, &[req(0, 0.0, 100, 5)], &mut policy::Fcfs);
    let o = stats.outcomes[0];
    let prefill = (b0 + b1 * 100.0) / 1e6;
    let decode = (b0 + b2) / 1e6;
    assert!((o.ttft - prefill).abs() < 1e-12, "{o:?}");
    assert!((o.ttlt - (prefill + 4.0 * decode)).abs() < 1e-9, "{o:?}");
    assert_eq!(stats.steps, 5);
}

#[test]
fn a_long_prompt_is_prefilled_in_chunks_of_the_token_budget() {
    let cfg = engine();
    let stats = simulate(&cfg, &[req(0, 0.0, 5000, 1)], &mut policy::Fcfs);
    assert_eq!(stats.steps, 3, "2048 + 2048 + 904 prompt tokens");
}

fn burst(n: usize) -> Vec<Request> {
    // A burst where long and short requests alternate: ordering decides the mean.
    (0..n)
        .map(|i| req(i, 0.0, 50, if i % 2 == 0 { 1000 } else { 20 }))
        .collect()
}

#[test]
fn oracle_srpt_beats_fcfs_when_requests_queue() {
    let cfg = engine();
    let requests = burst(80);
    let mean = |name: &str| {
        let mut p = policy::by_name(name, 100).expect("policy");
        let s = simulate(&cfg, &requests, p.as_mut());
        assert_eq!(
            s.outcomes.len(),
            requests.len(),
            "{name} completes everything"
        );
        s.outcomes.iter().map(|o| o.ttlt).sum::<f64>() / s.outcomes.len() as f64
    };
    let (fcfs, srpt) = (mean("fcfs"), mean("srpt-oracle"));
    assert!(srpt < 0.8 * fcfs, "srpt {srpt} vs fcfs {fcfs}");
}

#[test]
fn same_inputs_same_numbers() {
    let cfg = engine();
    let requests = burst(40);
    let run = || {
        let mut p = policy::by_name("sagesched", 100).expect("policy");
        simulate(&cfg, &requests, p.as_mut())
    };
    assert_eq!(run(), run());
}

#[test]
fn kv_exhaustion_preempts_by_recompute_and_still_completes() {
    let mut cfg = engine();
    cfg.kv_blocks = 200; // 3200 tokens
    let requests: Vec<Request> = (0..8).map(|i| req(i, 0.0, 300, 400)).collect();
    let stats = simulate(&cfg, &requests, &mut policy::Fcfs);
    assert_eq!(stats.outcomes.len(), 8);
    assert!(
        stats.preemptions > 0 && stats.wasted_tokens > 0,
        "{stats:?}"
    );
}

/// `n` requests arriving `gap` seconds apart with scattered prompt and output lengths (the
/// output pattern set by the stride `out_stride`).
fn staggered(n: usize, gap: f64, out_stride: u32) -> Vec<Request> {
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

#[test]
fn every_policy_completes_every_request() {
    let cfg = engine();
    let requests = staggered(60, 0.05, 53);
    for name in policy::NAMES {
        let mut p = policy::by_name(name, 50).expect("policy");
        let s = simulate(&cfg, &requests, p.as_mut());
        assert_eq!(s.outcomes.len(), requests.len(), "{name}");
        assert!(s.outcomes.iter().all(|o| o.ttft <= o.ttlt), "{name}");
    }
}

#[test]
fn gittins_with_exact_lengths_orders_exactly_as_srpt() {
    let cfg = engine();
    let requests = staggered(50, 0.02, 61);
    let run = |name: &str| {
        let mut p = policy::by_name(name, 10).expect("policy");
        simulate(&cfg, &requests, p.as_mut())
    };
    let (gittins, srpt) = (run("sagesched-oracle"), run("srpt-oracle"));
    assert_eq!(gittins.outcomes, srpt.outcomes);
}
