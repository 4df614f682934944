//! A vLLM-like engine, simulated step by step in virtual time (deterministic).
//!
//! Each step the policy ranks every active request; the engine admits them in that order into
//! one batch while the token budget (`max_num_batched_tokens`), `max_num_seqs` and the KV-cache
//! block pool allow: a request being prefilled gets a chunk of its prompt (chunked prefill), a
//! request decoding gets one token. When blocks run out, the lowest-ranked request holding
//! blocks outside the batch is preempted by recompute (its KV is dropped; it must prefill its
//! prompt and generated tokens again); admission stops at the first request that cannot fit
//! (no skipping). The step lasts `β0 + β1·prefill_tokens + β2·decode_tokens` µs.

use crate::Request;
use crate::policy::{Policy, View};

/// Engine and model/GPU parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Preset name.
    pub name: &'static str,
    /// Token budget per step.
    pub max_num_batched_tokens: u32,
    /// Most requests per step.
    pub max_num_seqs: usize,
    /// Tokens per KV block.
    pub block_tokens: u32,
    /// KV blocks in the pool.
    pub kv_blocks: u32,
    /// Step time fit `[β0, β1, β2]` in µs: constant, per prefill token, per decode token.
    pub beta_us: [f64; 3],
}

/// KV blocks of Llama-3.1-8B on an 80 GB GPU: (80 GiB × 0.9 − 16 GiB of weights) / (16 tokens ×
/// 128 KiB per token).
const LLAMA_8B_80GB_BLOCKS: u32 = 28_672;

impl EngineConfig {
    /// Preset names.
    pub const PRESETS: &'static [&'static str] = &["llama3.1-8b-a100", "llama3.1-8b-h100"];

    /// A preset: Llama-3.1-8B with the published step-time fits (../shared/docs/PAPERS.md §3),
    /// a 2048-token budget (vLLM's chunked-prefill default) and `max_num_seqs` 16 (smaller than
    /// vLLM's 256, so that requests queue, and ordering matters, at loads below capacity).
    pub fn preset(name: &str) -> Option<EngineConfig> {
        let beta_us = match name {
            "llama3.1-8b-a100" => [16441.5, 47.84, 18.21],
            "llama3.1-8b-h100" => [5752.7, 17.25, 6.00],
            _ => return None,
        };
        Some(EngineConfig {
            name: EngineConfig::PRESETS
                .iter()
                .find(|p| **p == name)
                .copied()
                .unwrap_or("custom"),
            max_num_batched_tokens: 2048,
            max_num_seqs: 16,
            block_tokens: 16,
            kv_blocks: LLAMA_8B_80GB_BLOCKS,
            beta_us,
        })
    }

    fn blocks_for(&self, tokens: u32) -> u32 {
        tokens.div_ceil(self.block_tokens)
    }
}

/// What happened to one request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    /// The request's id.
    pub id: usize,
    /// Time to first token (s).
    pub ttft: f64,
    /// Time to last token (s).
    pub ttlt: f64,
}

/// One simulated run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunStats {
    /// Completed requests, in completion order.
    pub outcomes: Vec<Outcome>,
    /// Preemptions by recompute.
    pub preemptions: u64,
    /// Tokens whose KV was dropped and recomputed.
    pub wasted_tokens: u64,
    /// Time of the last completion (s).
    pub makespan: f64,
    /// Engine steps.
    pub steps: u64,
}

struct Active {
    idx: usize,
    /// Tokens whose KV is computed (prompt + generated, up to the last generated token).
    computed: u32,
    generated: u32,
    blocks: u32,
    first_token: Option<f64>,
}

impl Active {
    /// Tokens still to prefill (the prompt and, after a recompute, generated tokens).
    fn to_prefill(&self, r: &Request) -> u32 {
        (r.input_tokens + self.generated.saturating_sub(1)).saturating_sub(self.computed)
    }
}

/// Run `requests` (sorted by arrival) through the engine under `policy`.
pub fn simulate(cfg: &EngineConfig, requests: &[Request], policy: &mut dyn Policy) -> RunStats {
    let mut stats = RunStats {
        outcomes: Vec::with_capacity(requests.len()),
        preemptions: 0,
        wasted_tokens: 0,
        makespan: 0.0,
        steps: 0,
    };
    let mut now = 0.0f64;
    let mut next = 0usize;
    let mut active: Vec<Active> = Vec::new();
    let mut free = cfg.kv_blocks;
    let mut order: Vec<(f64, usize)> = Vec::new();
    let mut batch: Vec<(usize, u32)> = Vec::new();
    while next < requests.len() || !active.is_empty() {
        while next < requests.len() && requests[next].arrival <= now {
            policy.arrive(&requests[next]);
            active.push(Active {
                idx: next,
                computed: 0,
                generated: 0,
                blocks: 0,
                first_token: None,
            });
            next += 1;
        }
        if active.is_empty() {
            now = requests[next].arrival;
            continue;
        }
        order.clear();
        order.extend(active.iter().enumerate().map(|(i, a)| {
            let view = View {
                req: &requests[a.idx],
                generated: a.generated,
                started: a.generated > 0 || a.blocks > 0,
                now,
            };
            (policy.rank(&view), i)
        }));
        order.sort_unstable_by(|x, y| {
            x.0.total_cmp(&y.0)
                .then(active[x.1].idx.cmp(&active[y.1].idx))
        });
        batch.clear();
        let mut budget = cfg.max_num_batched_tokens;
        for pos in 0..order.len() {
            if batch.len() == cfg.max_num_seqs || budget == 0 {
                break;
            }
            let i = order[pos].1;
            let r = &requests[active[i].idx];
            let prefill = active[i].to_prefill(r);
            let want = if prefill > 0 { prefill.min(budget) } else { 1 };
            let need = cfg
                .blocks_for(active[i].computed + want)
                .saturating_sub(active[i].blocks);
            // Preempt the lowest-ranked holders outside the batch until the request fits.
            let mut victim_pos = order.len();
            while free < need && victim_pos > pos + 1 {
                victim_pos -= 1;
                let v = order[victim_pos].1;
                if active[v].blocks > 0 {
                    free += active[v].blocks;
                    stats.preemptions += 1;
                    stats.wasted_tokens += u64::from(active[v].computed);
                    active[v].blocks = 0;
                    active[v].computed = 0;
                }
            }
            if free < need {
                break;
            }
            free -= need;
            active[i].blocks += need;
            budget -= want;
            batch.push((i, want));
        }
        if batch.is_empty() {
            // Nothing fits (a single request larger than the pool): drop nothing, wait for an
            // arrival or give up if none will come.
            match requests.get(next) {
                Some(r) => {
                    now = r.arrival;
                    continue;
                }
                None => break,
            }
        }
        let (mut prefill_tokens, mut decode_tokens) = (0u32, 0u32);
        for &(i, n) in &batch {
            if active[i].to_prefill(&requests[active[i].idx]) > 0 {
                prefill_tokens += n;
            } else {
                decode_tokens += n;
            }
        }
        let [b0, b1, b2] = cfg.beta_us;
        now += (b0 + b1 * f64::from(prefill_tokens) + b2 * f64::from(decode_tokens)) / 1e6;
        stats.steps += 1;
        for &(i, n) in &batch {
            let a = &mut active[i];
            let r = &requests[a.idx];
            let was_prefill = a.to_prefill(r) > 0;
            a.computed += n;
            if !was_prefill || a.to_prefill(r) == 0 {
                // A step that finishes a prefill, or a decode step, yields one token.
                a.generated += 1;
                a.first_token.get_or_insert(now);
            }
        }
        let mut i = 0;
        while i < active.len() {
            let r = &requests[active[i].idx];
            if active[i].generated >= r.output_tokens {
                let a = active.swap_remove(i);
                free += a.blocks;
                policy.complete(r);
                stats.outcomes.push(Outcome {
                    id: r.id,
                    ttft: a.first_token.unwrap_or(now) - r.arrival,
                    ttlt: now - r.arrival,
                });
                stats.makespan = now;
            } else {
                i += 1;
            }
        }
    }
    stats
}
