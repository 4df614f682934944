//! The engine simulator on synthetic requests: exact step arithmetic, determinism, vLLM's
//! preemption, pauses costed by swap or recompute, and the orderings scheduling theory
//! predicts.

mod common;

use common::{mean_ttlt, req, run, staggered};
use xsched_llm_sim::engine::EngineConfig;

/// The A100 preset with 16 batch slots and no KV term: requests queue, and steps are the
/// published fit's arithmetic.
fn engine() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 16,
        attend_us: 0.0,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    }
}

#[test]
fn one_request_takes_one_prefill_step_and_one_step_per_further_token() {
    let cfg = engine();
    let [b0, b1, b2] = cfg.beta_us;
    let stats = run(&cfg, "fcfs", &[req(0, 0.0, 100, 5)]).stats;
    let o = stats.outcomes[0];
    let prefill = (b0 + b1 * 100.0) / 1e6;
    let decode = (b0 + b2) / 1e6;
    assert!((o.ttft - prefill).abs() < 1e-12, "{o:?}");
    assert!((o.ttlt - (prefill + 4.0 * decode)).abs() < 1e-9, "{o:?}");
    assert_eq!(stats.steps, 5);
}

#[test]
fn a_long_prompt_is_prefilled_in_chunks_of_the_token_budget() {
    let stats = run(&engine(), "fcfs", &[req(0, 0.0, 5000, 1)]).stats;
    assert_eq!(stats.steps, 3, "2048 + 2048 + 904 prompt tokens");
}

fn burst(n: usize) -> Vec<xsched_llm_sim::Request> {
    // A burst where long and short requests alternate: ordering decides the mean.
    (0..n)
        .map(|i| req(i, 0.0, 50, if i % 2 == 0 { 1000 } else { 20 }))
        .collect()
}

#[test]
fn oracle_srpt_beats_fcfs_when_requests_queue() {
    let requests = burst(80);
    let mean = |name: &str| {
        let s = run(&engine(), name, &requests).stats;
        assert_eq!(
            s.outcomes.len(),
            requests.len(),
            "{name} completes everything"
        );
        mean_ttlt(&s.outcomes)
    };
    let (fcfs, srpt) = (mean("fcfs"), mean("srpt-oracle"));
    assert!(srpt < 0.8 * fcfs, "srpt {srpt} vs fcfs {fcfs}");
}

#[test]
fn same_inputs_same_numbers() {
    let requests = burst(40);
    for name in ["sagesched", "fastserve", "trail"] {
        let once = run(&engine(), name, &requests);
        let again = run(&engine(), name, &requests);
        assert_eq!(once.stats, again.stats, "{name}");
        assert_eq!(once.admitted, again.admitted, "{name}");
    }
}

#[test]
fn kv_exhaustion_preempts_the_newest_by_recompute_and_still_completes() {
    let mut cfg = engine();
    cfg.kv_blocks = 200; // 3200 tokens
    let requests: Vec<_> = (0..8).map(|i| req(i, 0.0, 300, 400)).collect();
    let stats = run(&cfg, "fcfs", &requests).stats;
    assert_eq!(stats.outcomes.len(), 8);
    assert!(
        stats.preemptions > 0 && stats.wasted_tokens > 0,
        "{stats:?}"
    );
}

#[test]
fn expected_peak_admission_admits_only_what_the_pool_holds_to_the_end() {
    let mut cfg = engine();
    cfg.kv_blocks = 200; // 3200 tokens: four of these requests at most
    let requests: Vec<_> = (0..8).map(|i| req(i, 0.0, 300, 400)).collect();
    let engine_admission = run(&cfg, "srpt-oracle:admit=engine", &requests).stats;
    let peak = run(&cfg, "srpt-oracle", &requests).stats;
    assert!(engine_admission.preemptions > 0, "{engine_admission:?}");
    assert_eq!(peak.preemptions, 0, "{peak:?}");
    assert_eq!(peak.outcomes.len(), 8);
    assert_eq!(peak.wasted_tokens, 0);
    // Four at once (each is known to reach 700 tokens of 3 200); a fifth only once they are
    // far enough along that its own growth fits beside theirs.
    let first_four: Vec<usize> = peak.outcomes[..4].iter().map(|o| o.id).collect();
    assert_eq!(first_four, [0, 1, 2, 3]);
}

#[test]
fn every_policy_completes_every_request() {
    let requests = staggered(60, 0.05, 53);
    let names = xsched_llm_core::policy::names().chain([
        "sagesched:preempt=on",
        "ssjf:admit=peak",
        "sagesched-noise-0.5",
    ]);
    for name in names {
        let s = run(&engine(), name, &requests).stats;
        assert_eq!(s.outcomes.len(), requests.len(), "{name}");
        assert!(s.outcomes.iter().all(|o| o.ttft <= o.ttlt), "{name}");
    }
}

#[test]
fn gittins_with_exact_lengths_orders_exactly_as_srpt() {
    let requests = staggered(50, 0.02, 61);
    let (gittins, srpt) = (
        run(&engine(), "sagesched-oracle", &requests),
        run(&engine(), "srpt-oracle", &requests),
    );
    assert_eq!(gittins.stats.outcomes, srpt.stats.outcomes);
    assert_eq!(gittins.admitted, srpt.admitted);
}

#[test]
fn the_noise_study_is_seeded() {
    let requests = staggered(50, 0.02, 61);
    let a = run(&engine(), "sagesched-noise-0.5", &requests);
    let b = run(&engine(), "sagesched-noise-0.5", &requests);
    assert_eq!(a.stats, b.stats);
}

#[test]
fn a_decode_step_also_pays_for_the_context_it_attends() {
    let cfg = EngineConfig::preset("llama3.1-8b-a100").expect("preset");
    assert!(cfg.attend_us > 0.0);
    let [b0, b1, b2] = cfg.beta_us;
    let o = run(&cfg, "fcfs", &[req(0, 0.0, 100, 3)]).stats.outcomes[0];
    // Prefill yields the first token; each decode reads the prompt and the tokens so far.
    let prefill = b0 + b1 * 100.0;
    let decodes = 2.0 * (b0 + b2) + cfg.attend_us * (101.0 + 102.0);
    assert!((o.ttlt - (prefill + decodes) / 1e6).abs() < 1e-12, "{o:?}");
    assert!((cfg.solo_seconds(100, 3) - o.ttlt).abs() < 1e-12);
    let long = run(&cfg, "fcfs", &[req(0, 0.0, 5000, 4)]).stats.outcomes[0];
    assert!((cfg.solo_seconds(5000, 4) - long.ttlt).abs() < 1e-9);
}

/// Two slots, one long request running, then short ones: a preemptive policy pauses the long
/// one for them.
fn pause_workload() -> Vec<xsched_llm_sim::Request> {
    let mut r = vec![req(0, 0.0, 200, 2000), req(1, 0.0, 200, 2000)];
    r.extend((2..10).map(|i| req(i, 0.5 + i as f64 * 0.01, 20, 5)));
    r
}

#[test]
fn a_pause_swaps_kv_out_and_back_when_swap_space_allows_and_recomputes_otherwise() {
    let cfg = EngineConfig {
        max_num_seqs: 2,
        ..engine()
    };
    let swapped = run(&cfg, "fastserve", &pause_workload()).stats;
    assert!(swapped.pauses > 0, "{swapped:?}");
    assert!(
        swapped.swapped_tokens > 0 && swapped.wasted_tokens == 0,
        "{swapped:?}"
    );
    assert_eq!(swapped.outcomes.len(), 10);
    let no_swap = EngineConfig {
        swap_tokens: 0,
        ..cfg.clone()
    };
    let recomputed = run(&no_swap, "fastserve", &pause_workload()).stats;
    assert!(
        recomputed.pauses > 0 && recomputed.swapped_tokens == 0,
        "{recomputed:?}"
    );
    assert!(recomputed.wasted_tokens > 0, "{recomputed:?}");
    // Recomputing costs prefill time that swapping does not.
    assert!(
        recomputed.makespan > swapped.makespan,
        "{recomputed:?} {swapped:?}"
    );
    // Without pausing, the short ones wait for a slot.
    let fcfs = run(&cfg, "fcfs", &pause_workload()).stats;
    assert_eq!(fcfs.pauses, 0);
    let short = |s: &xsched_llm_sim::engine::RunStats| {
        mean_ttlt(
            &s.outcomes
                .iter()
                .filter(|o| o.id >= 2)
                .copied()
                .collect::<Vec<_>>(),
        )
    };
    assert!(short(&swapped) < 0.5 * short(&fcfs));
}

#[test]
fn a_request_too_large_for_the_whole_pool_is_refused_and_the_rest_run() {
    let mut cfg = engine();
    cfg.kv_blocks = 10;
    let stats = run(
        &cfg,
        "sagesched",
        &[req(0, 0.0, 100, 10_000), req(1, 0.0, 10, 10)],
    )
    .stats;
    assert_eq!(stats.refused, 1);
    assert_eq!(stats.outcomes.len(), 1);
}
