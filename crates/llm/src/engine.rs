//! A vLLM-like engine, simulated step by step in virtual time (deterministic).
//!
//! Each step is scheduled the way vLLM's V1 scheduler does it (`vllm/v1/core/sched/
//! scheduler.py`): first the *running* requests (those holding KV), in the order they were
//! admitted, each getting a chunk of what it still has to prefill (chunked prefill) or one
//! decode token, within the step's token budget (`max_num_batched_tokens`). When a running
//! request needs a KV block and none is free, the lowest-ranked running request is preempted by
//! recompute: the most recently admitted one, vLLM's default (its KV dropped; it returns to the
//! waiting queue and must prefill its prompt and generated tokens again), and if that is the
//! request itself, no more running requests are scheduled this step. Then, only if nobody was preempted, *waiting* requests are admitted in
//! the policy's order while `max_num_seqs`, the budget and the free blocks allow; admission
//! stops at the first that does not fit (no skipping). So a policy decides the order of the
//! waiting queue (preempted requests rejoin it); it never pauses a running request to let a
//! better one in (vLLM cannot). Choosing the victim by the policy's rank instead (vLLM's
//! `priority` mode) was measured worse for every length-aware policy on ShareGPT: it preempts
//! the requests with the most KV, whose recompute then collapses throughput
//! (docs/BENCHMARKS.md). The step lasts `β0 + β1·prefill_tokens +
//! β2·decode_tokens + β3·attended` µs, `attended` being the context tokens (KV) the decoding
//! requests read. A request whose prompt and output cannot fit in the whole KV pool is refused
//! at arrival (vLLM refuses it too) and counted.

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
    /// β3, µs per context token a decoding request attends (its KV read once per step).
    pub attend_us: f64,
    /// The model's window: prompt + output tokens of one request.
    pub max_model_len: u32,
}

impl EngineConfig {
    /// Preset names (`crate::presets`).
    pub const PRESETS: &'static [&'static str] = crate::presets::NAMES;

    /// A preset: a model on a GPU at vLLM's server defaults (`crate::presets`, with where each
    /// number comes from).
    pub fn preset(name: &str) -> Option<EngineConfig> {
        crate::presets::engine(name)
    }

    /// The CLI's default preset (Llama-3.1-8B on an A100-80G).
    pub fn default_preset() -> EngineConfig {
        crate::presets::default_engine()
    }

    /// Seconds a request takes on an otherwise empty engine: its prompt in chunks of the token
    /// budget, then one decode step per further token, each attending the context so far.
    pub fn solo_seconds(&self, input: u32, output: u32) -> f64 {
        let [b0, b1, b2] = self.beta_us;
        let (i, decodes) = (f64::from(input), f64::from(output.saturating_sub(1)));
        let chunks = f64::from(input.div_ceil(self.max_num_batched_tokens.max(1)).max(1));
        let prefill = chunks * b0 + b1 * i;
        // Decode k (1-based) attends the prompt and k tokens.
        let attended = decodes * i + decodes * (decodes + 1.0) / 2.0;
        (prefill + decodes * (b0 + b2) + self.attend_us * attended) / 1e6
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
    /// Requests refused at arrival: prompt and output larger than the whole KV pool.
    pub refused: u64,
}

#[derive(Clone, Copy, Default)]
struct Active {
    /// Tokens whose KV is computed (prompt + generated, up to the last generated token).
    computed: u32,
    generated: u32,
    blocks: u32,
    first_token: Option<f64>,
}

impl Active {
    /// Tokens still to prefill (the prompt and, after a recompute, generated tokens).
    fn unprefilled(&self, r: &Request) -> u32 {
        (r.input_tokens + self.generated.saturating_sub(1)).saturating_sub(self.computed)
    }

    /// Tokens this request would process in a step with `budget` tokens left.
    fn wants(&self, r: &Request, budget: u32) -> u32 {
        match self.unprefilled(r) {
            0 => 1,
            p => p.min(budget),
        }
    }
}

/// The engine's state during one run.
pub(crate) struct Engine<'a> {
    cfg: &'a EngineConfig,
    requests: &'a [Request],
    state: Vec<Active>,
    /// Requests holding KV, in admission order.
    running: Vec<usize>,
    /// Requests waiting to be admitted (new or preempted), in no particular order.
    waiting: Vec<usize>,
    free: u32,
    now: f64,
    /// This step's batch: (request, tokens).
    batch: Vec<(usize, u32)>,
    budget: u32,
    stats: RunStats,
}

impl Engine<'_> {
    fn rank(&self, policy: &dyn Policy, i: usize) -> f64 {
        let a = &self.state[i];
        policy.rank(&View {
            req: &self.requests[i],
            generated: a.generated,
            started: a.generated > 0 || a.blocks > 0,
            now: self.now,
        })
    }

    /// Preempt vLLM's default victim, the most recently admitted running request: drop its KV
    /// and send it back to wait (un-batching it if it was batched). Which request it was.
    fn preempt_newest(&mut self) -> Option<usize> {
        let victim = self.running.pop()?;
        if let Some(pos) = self.batch.iter().position(|&(i, _)| i == victim) {
            self.budget += self.batch.swap_remove(pos).1;
        }
        let a = &mut self.state[victim];
        self.free += a.blocks;
        self.stats.preemptions += 1;
        self.stats.wasted_tokens += u64::from(a.computed);
        a.blocks = 0;
        a.computed = 0;
        self.waiting.push(victim);
        Some(victim)
    }

    /// Give `i` the blocks for `tokens` more tokens; false if the pool has too few.
    fn allocate(&mut self, i: usize, tokens: u32) -> bool {
        let a = &mut self.state[i];
        let need = self
            .cfg
            .blocks_for(a.computed + tokens)
            .saturating_sub(a.blocks);
        if self.free < need {
            return false;
        }
        self.free -= need;
        a.blocks += need;
        true
    }

    /// Schedule the running requests in admission order; whether anyone was preempted.
    fn schedule_running(&mut self) -> bool {
        let mut preempted = false;
        let mut k = 0;
        while k < self.running.len() && self.budget > 0 {
            let i = self.running[k];
            let want = self.state[i].wants(&self.requests[i], self.budget);
            let mut scheduled = true;
            while !self.allocate(i, want) {
                preempted = true;
                // Victims come off the end, so `i` keeps its place until it is the victim.
                if self.preempt_newest().is_none_or(|victim| victim == i) {
                    scheduled = false;
                    break;
                }
            }
            if !scheduled {
                break;
            }
            self.budget -= want;
            self.batch.push((i, want));
            k += 1;
        }
        preempted
    }

    /// Admit waiting requests in the policy's order while they fit.
    fn admit_waiting(&mut self, policy: &dyn Policy) {
        // A waiting request holds no blocks, so it needs a free one and a free slot.
        if self.waiting.is_empty()
            || self.budget == 0
            || self.free == 0
            || self.running.len() >= self.cfg.max_num_seqs
        {
            return;
        }
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<Ranked>> = self
            .waiting
            .iter()
            .map(|&i| std::cmp::Reverse(Ranked(self.rank(policy, i), i)))
            .collect();
        let mut admitted = false;
        while self.running.len() < self.cfg.max_num_seqs && self.budget > 0 {
            let Some(std::cmp::Reverse(Ranked(_, i))) = heap.pop() else {
                break;
            };
            let want = self.state[i].wants(&self.requests[i], self.budget);
            if !self.allocate(i, want) {
                break;
            }
            self.budget -= want;
            self.batch.push((i, want));
            self.running.push(i);
            admitted = true;
        }
        if admitted {
            // Waiting requests hold no blocks; the admitted ones now do.
            let state = &self.state;
            self.waiting.retain(|&i| state[i].blocks == 0);
        }
    }

    /// Run the batch: advance the clock, produce tokens, retire what finished.
    fn execute(&mut self, policy: &mut dyn Policy) {
        let (mut prefill_tokens, mut decode_tokens, mut attended) = (0u32, 0u32, 0u64);
        for &(i, n) in &self.batch {
            if self.state[i].unprefilled(&self.requests[i]) > 0 {
                prefill_tokens += n;
            } else {
                decode_tokens += n;
                attended += u64::from(self.state[i].computed + n);
            }
        }
        let [b0, b1, b2] = self.cfg.beta_us;
        self.now += (b0
            + b1 * f64::from(prefill_tokens)
            + b2 * f64::from(decode_tokens)
            + self.cfg.attend_us * attended as f64)
            / 1e6;
        self.stats.steps += 1;
        let mut finished = false;
        for &(i, n) in &self.batch {
            let r = &self.requests[i];
            let a = &mut self.state[i];
            let was_prefill = a.unprefilled(r) > 0;
            a.computed += n;
            if !was_prefill || a.unprefilled(r) == 0 {
                // A step that finishes a prefill, or a decode step, yields one token.
                a.generated += 1;
                a.first_token.get_or_insert(self.now);
            }
            if a.generated >= r.output_tokens {
                self.free += a.blocks;
                a.blocks = 0;
                finished = true;
                policy.complete(r);
                self.stats.outcomes.push(Outcome {
                    id: r.id,
                    ttft: a.first_token.unwrap_or(self.now) - r.arrival,
                    ttlt: self.now - r.arrival,
                });
                self.stats.makespan = self.now;
            }
        }
        if finished {
            let (state, requests) = (&self.state, self.requests);
            self.running
                .retain(|&i| state[i].generated < requests[i].output_tokens);
        }
    }
}

/// A rank and its request, ordered by rank then request (lower first).
#[derive(PartialEq)]
struct Ranked(f64, usize);

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

/// What one engine step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A batch ran (the clock advanced).
    Ran,
    /// Requests were preempted and nothing ran: step again.
    Preempted,
    /// Nothing can run until a request arrives.
    Idle,
}

impl<'a> Engine<'a> {
    /// An empty engine for `requests` (indexed by position; it only sees those that arrive).
    pub(crate) fn new(cfg: &'a EngineConfig, requests: &'a [Request]) -> Engine<'a> {
        Engine {
            cfg,
            requests,
            state: vec![Active::default(); requests.len()],
            running: Vec::new(),
            waiting: Vec::new(),
            free: cfg.kv_blocks,
            now: 0.0,
            batch: Vec::new(),
            budget: 0,
            stats: RunStats {
                outcomes: Vec::new(),
                preemptions: 0,
                wasted_tokens: 0,
                makespan: 0.0,
                steps: 0,
                refused: 0,
            },
        }
    }

    /// Request `i` arrives now; false if it was refused (it can never fit the KV pool).
    pub(crate) fn arrive(&mut self, i: usize, policy: &mut dyn Policy) -> bool {
        let r = &self.requests[i];
        if self.cfg.blocks_for(r.input_tokens + r.output_tokens) > self.cfg.kv_blocks {
            self.stats.refused += 1;
            return false;
        }
        policy.arrive(r);
        self.waiting.push(i);
        true
    }

    /// Whether anything is running or waiting.
    pub(crate) fn busy(&self) -> bool {
        !self.running.is_empty() || !self.waiting.is_empty()
    }

    /// Schedule and run one step.
    pub(crate) fn step(&mut self, policy: &mut dyn Policy) -> Step {
        self.batch.clear();
        self.budget = self.cfg.max_num_batched_tokens;
        let preempted = self.schedule_running();
        if !preempted {
            self.admit_waiting(policy);
        }
        match (self.batch.is_empty(), preempted) {
            (false, _) => {
                self.execute(policy);
                Step::Ran
            }
            // Every running request preempted itself: the waiting ones fit next step.
            (true, true) => Step::Preempted,
            (true, false) => Step::Idle,
        }
    }

    /// The engine's clock (s).
    pub(crate) fn now(&self) -> f64 {
        self.now
    }

    /// Move an idle engine's clock forward to `t`.
    pub(crate) fn wait_until(&mut self, t: f64) {
        self.now = self.now.max(t);
    }

    /// Requests held: (running, waiting).
    pub(crate) fn load(&self) -> (usize, usize) {
        (self.running.len(), self.waiting.len())
    }

    /// Fraction of the KV pool in use.
    pub(crate) fn kv_used(&self) -> f64 {
        1.0 - f64::from(self.free) / f64::from(self.cfg.kv_blocks.max(1))
    }

    /// Whether it would admit a new request at its next step (a free slot and nobody waiting).
    pub(crate) fn has_room(&self) -> bool {
        self.waiting.is_empty() && self.running.len() < self.cfg.max_num_seqs
    }

    /// Completions after the first `seen`.
    pub(crate) fn outcomes_since(&self, seen: usize) -> &[Outcome] {
        self.stats.outcomes.get(seen..).unwrap_or_default()
    }

    /// Completions so far.
    pub(crate) fn outcomes_len(&self) -> usize {
        self.stats.outcomes.len()
    }

    /// What happened so far.
    pub(crate) fn finish(self) -> RunStats {
        self.stats
    }
}

/// Run `requests` (sorted by arrival, ids their positions) through the engine under `policy`.
pub fn simulate(cfg: &EngineConfig, requests: &[Request], policy: &mut dyn Policy) -> RunStats {
    let mut e = Engine::new(cfg, requests);
    let mut next = 0usize;
    loop {
        while next < requests.len() && requests[next].arrival <= e.now() {
            e.arrive(next, policy);
            next += 1;
        }
        let step = if e.busy() { e.step(policy) } else { Step::Idle };
        if step == Step::Idle {
            match requests.get(next) {
                Some(r) => e.wait_until(r.arrival),
                None => break,
            }
        }
    }
    e.finish()
}
