//! The engine simulator on synthetic requests: exact step arithmetic, determinism, and the
//! orderings scheduling theory predicts.

use xsched_llm::Request;
use xsched_llm::embedding::{Embedder, Hashed};
use xsched_llm::engine::{EngineConfig, simulate};
use xsched_llm::policy;

/// The A100 preset with 16 batch slots and no KV term: requests queue, and steps are the
/// published fit's arithmetic.
fn engine() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 16,
        attend_us: 0.0,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    }
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
        previous_answer_tokens: None,
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
        let mut p = policy::by_name(name, 100, &engine()).expect("policy");
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
        let mut p = policy::by_name("sagesched", 100, &engine()).expect("policy");
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
        let mut p = policy::by_name(name, 50, &engine()).expect("policy");
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
        let mut p = policy::by_name(name, 10, &engine()).expect("policy");
        simulate(&cfg, &requests, p.as_mut())
    };
    let (gittins, srpt) = (run("sagesched-oracle"), run("srpt-oracle"));
    assert_eq!(gittins.outcomes, srpt.outcomes);
}

#[test]
fn the_noise_study_is_seeded_and_its_names_are_checked() {
    let cfg = engine();
    let requests = staggered(50, 0.02, 61);
    let run = || {
        let mut p = policy::by_name("sagesched-noise-0.5", 10, &engine()).expect("policy");
        simulate(&cfg, &requests, p.as_mut())
    };
    assert_eq!(run(), run());
    for bad in [
        "sagesched-noise-",
        "sagesched-noise-x",
        "sagesched-noise--1",
    ] {
        assert!(policy::by_name(bad, 10, &engine()).is_none(), "{bad}");
    }
}

/// The rank of `r` under a fresh `sagesched` (empty history: every request gets the prior).
fn sagesched_rank(r: &Request, generated: u32, started: bool) -> f64 {
    let mut p = policy::by_name("sagesched", 100, &engine()).expect("policy");
    p.arrive(r);
    p.rank(&policy::View {
        req: r,
        generated,
        started,
        now: 1.0,
    })
}

#[test]
fn a_request_past_its_predicted_support_keeps_its_place() {
    let r = req(0, 0.0, 50, 5000);
    let beyond = sagesched_rank(&r, 1500, true); // the prior's largest atom is 1024 tokens
    let fresh = sagesched_rank(&req(1, 0.5, 10, 10), 0, false);
    assert!(beyond < fresh, "beyond {beyond} vs fresh {fresh}");
}

#[test]
fn a_decode_step_also_pays_for_the_context_it_attends() {
    let cfg = EngineConfig::preset("llama3.1-8b-a100").expect("preset");
    assert!(cfg.attend_us > 0.0);
    let [b0, b1, b2] = cfg.beta_us;
    let stats = simulate(&cfg, &[req(0, 0.0, 100, 3)], &mut policy::Fcfs);
    let o = stats.outcomes[0];
    // Prefill yields the first token; each decode reads the prompt and the tokens so far.
    let prefill = b0 + b1 * 100.0;
    let decodes = 2.0 * (b0 + b2) + cfg.attend_us * (101.0 + 102.0);
    assert!((o.ttlt - (prefill + decodes) / 1e6).abs() < 1e-12, "{o:?}");
    assert!((cfg.solo_seconds(100, 3) - o.ttlt).abs() < 1e-12);
    let long = simulate(&cfg, &[req(0, 0.0, 5000, 4)], &mut policy::Fcfs);
    assert!((cfg.solo_seconds(5000, 4) - long.outcomes[0].ttlt).abs() < 1e-9);
}
