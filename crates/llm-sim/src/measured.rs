//! Engines measured here, not derived from a GPU's data sheet: vLLM's CPU build serving
//! SmolLM2-135M-Instruct on this project's 2-vCPU machine, the real engine the simulator is
//! checked against (docs/results/vllm.md, "SageSched on vLLM itself").
//!
//! Its limits are the server's flags and what vLLM reported at start-up; its step time is
//! fitted from vLLM's own benchmark client's timings (`scripts/llm/vllm-sim-compare.py fit`,
//! over `scripts/llm/vllm-bench.py`'s runs): a request alone decodes a token a step, so its
//! median inter-token gap is β0 + β2; with `max_num_seqs` requests decoding at once the gap is
//! β0 + `max_num_seqs`·β2; the first token's time alone against the prompt's tokens has slope
//! β1. β3 is 0: the gaps do not resolve attention over a 2 048-token window.

use crate::engine::EngineConfig;
use crate::provenance::{Fact, Provenance};

/// vLLM 0.32.0's CPU build, SmolLM2-135M-Instruct in float32, `--max-num-seqs 8
/// --max-model-len 2048`, `VLLM_CPU_KVCACHE_SPACE=2`, on 2 vCPUs.
pub const SMOLLM2_CPU: &str = "smollm2-135m-cpu";

/// The fit `[β0, β1, β2]` (µs): `vllm-sim-compare.py fit` on the run of 2026-12-05.
const SMOLLM2_CPU_FIT: [f64; 3] = [35_561.9, 3_339.88, 5_659.0];

/// The measured engine called `name`.
pub fn engine(name: &str) -> Option<EngineConfig> {
    (name == SMOLLM2_CPU).then_some(EngineConfig {
        name: SMOLLM2_CPU,
        max_num_batched_tokens: 2048,
        max_num_seqs: 8,
        block_tokens: 128,
        kv_blocks: 364,
        beta_us: SMOLLM2_CPU_FIT,
        attend_us: 0.0,
        max_model_len: 2048,
        swap_us_per_token: 0.0,
        swap_tokens: 0,
    })
}

/// Where each of its numbers comes from.
pub fn provenance(name: &str) -> Vec<Fact> {
    let Some(e) = engine(name) else {
        return Vec::new();
    };
    let flag = |what, value: f64, how: &str| Fact {
        what,
        value,
        source: Provenance::Published,
        how: how.to_string(),
    };
    let fit = |what, value, how: &str| Fact {
        what,
        value,
        source: Provenance::Measured,
        how: format!("{how} (scripts/llm/vllm-sim-compare.py fit)"),
    };
    vec![
        flag("max_num_seqs", e.max_num_seqs as f64, "--max-num-seqs 8"),
        flag(
            "max_num_batched_tokens",
            f64::from(e.max_num_batched_tokens),
            "vLLM's CPU default for a 2 048-token window",
        ),
        flag(
            "kv_blocks",
            f64::from(e.kv_blocks),
            "vLLM's start-up: KV cache size 46 592 tokens in blocks of 128 (2 GiB)",
        ),
        fit("beta0_us", e.beta_us[0], "a decode step alone, less beta2"),
        fit(
            "beta1_us_per_prefill_token",
            e.beta_us[1],
            "the first token alone against the prompt's tokens",
        ),
        fit(
            "beta2_us_per_decode_token",
            e.beta_us[2],
            "(the gap with 8 decoding - the gap alone) / 7",
        ),
        flag("beta3_us_per_attended_token", 0.0, "not resolved: 0"),
        flag(
            "max_model_len",
            f64::from(e.max_model_len),
            "--max-model-len 2048",
        ),
        flag(
            "swap_us_per_token",
            0.0,
            "vLLM V1 preempts by recompute only",
        ),
        flag("swap_tokens", 0.0, "vLLM V1 preempts by recompute only"),
    ]
}
