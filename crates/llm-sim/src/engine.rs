//! A vLLM-like engine, simulated step by step in virtual time (deterministic). It has no
//! policy: the scheduler in front of it (`xsched-llm-core`, driven by `sim.rs`) decides which
//! requests it is sent and when, as a gateway would in front of a real engine, and may ask it to
//! pause a running request.
//!
//! Each step is scheduled the way vLLM's V1 scheduler does it (`vllm/v1/core/sched/
//! scheduler.py`; docs/LLM-ENGINE.md says what matches and what differs): first the *running*
//! requests, in the order they were admitted, each getting a chunk of what it still has to
//! prefill (chunked prefill) or one decode token, within the step's token budget
//! (`max_num_batched_tokens`). When a running request needs a KV block and none is free, the
//! most recently admitted running request is preempted by recompute (its KV dropped; it goes
//! to the front of the engine's queue and must prefill its prompt and generated tokens again),
//! and if that is the request itself, no more running requests are scheduled this step. Then,
//! only if nobody was preempted, queued requests (sent by the scheduler, or preempted) are
//! admitted first come first served while `max_num_seqs`, the budget and the free blocks
//! allow; admission stops at the first that does not fit (no skipping).
//!
//! A request the scheduler pauses ([`Engine::pause`]) leaves the running set at the step
//! boundary. Its KV is swapped to host memory if it fits the preset's swap space, at the
//! host link's bandwidth each way, or else dropped and recomputed when it resumes: whichever
//! costs less time. A swap runs on the GPU's copy engines during the step that follows, beside
//! its kernels (FastServe's proactive swapping overlaps them so): that step lasts the longer of
//! its compute and the transfer.
//!
//! The step lasts `β0 + β1·prefill_tokens + β2·decode_tokens + β3·attended` µs, `attended`
//! being the context tokens (KV) the decoding requests read, plus any swap traffic.

use crate::Request;
use crate::waiting::Waiting;
use xsched_llm_core::cost::StepFit;
use xsched_llm_core::{EngineLimits, EngineReport};

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
    /// µs to move one token's KV across the host link, one way.
    pub swap_us_per_token: f64,
    /// Tokens of KV the host's swap space holds.
    pub swap_tokens: u64,
}

/// The named presets (`EngineConfig::preset`) live in `presets.rs`, beside where each number
/// comes from.
impl EngineConfig {
    /// Its step-time fit, as the scheduler's service model takes it.
    pub fn fit(&self) -> StepFit {
        StepFit {
            beta_us: self.beta_us,
            attend_us: self.attend_us,
            chunk_tokens: self.max_num_batched_tokens,
        }
    }

    /// What the scheduler may admit to it: its slots and its KV pool.
    pub fn limits(&self) -> EngineLimits {
        EngineLimits {
            concurrency: self.max_num_seqs,
            kv_tokens: Some(u64::from(self.kv_blocks) * u64::from(self.block_tokens)),
            block_tokens: self.block_tokens,
        }
    }

    /// Seconds a request takes on an otherwise empty engine.
    pub fn solo_seconds(&self, input: u32, output: u32) -> f64 {
        self.fit().solo_seconds(input, output)
    }

    /// Whether a request of `input` prompt and `output` answer tokens can ever fit the pool
    /// (vLLM refuses one that cannot).
    pub fn holds(&self, input: u32, output: u32) -> bool {
        self.blocks_for(input.saturating_add(output)) <= self.kv_blocks
    }

    fn blocks_for(&self, tokens: u32) -> u32 {
        tokens.div_ceil(self.block_tokens)
    }
}

/// What happened to one request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestTimes {
    /// The request's id.
    pub id: usize,
    /// Time to first token (s).
    pub ttft: f64,
    /// Time to last token (s).
    pub ttlt: f64,
}

/// One simulated run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Completed requests, in completion order.
    pub outcomes: Vec<RequestTimes>,
    /// Preemptions by recompute the engine made (KV exhausted).
    pub preemptions: u64,
    /// Tokens whose KV was dropped and recomputed (by preemptions and recomputed pauses).
    pub wasted_tokens: u64,
    /// Running requests paused at the scheduler's request.
    pub pauses: u64,
    /// Tokens of KV swapped out to host memory by pauses.
    pub swapped_tokens: u64,
    /// Time of the last completion (s).
    pub makespan: f64,
    /// Engine steps.
    pub steps: u64,
    /// Requests refused at arrival: prompt and output larger than the whole KV pool.
    pub refused: u64,
    /// Requests the scheduler shed (its queue full).
    pub shed: u64,
    /// Running requests the scheduler evicted for a higher class (ended unanswered).
    pub evicted: u64,
}

impl RunStats {
    /// Add another engine's run.
    pub fn absorb(&mut self, other: RunStats) {
        self.outcomes.extend(other.outcomes);
        self.preemptions += other.preemptions;
        self.wasted_tokens += other.wasted_tokens;
        self.pauses += other.pauses;
        self.swapped_tokens += other.swapped_tokens;
        self.makespan = self.makespan.max(other.makespan);
        self.steps += other.steps;
        self.refused += other.refused;
        self.shed += other.shed;
        self.evicted += other.evicted;
    }
}

#[derive(Clone, Copy, Default)]
struct Active {
    /// Tokens whose KV is computed (prompt + generated, up to the last generated token).
    computed: u32,
    generated: u32,
    blocks: u32,
    /// Its KV sits in host memory (a paused request).
    swapped: bool,
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

/// What one step did, for the scheduler.
#[derive(Debug, Default)]
pub struct StepEvents {
    /// Requests that generated a token, with their tokens so far.
    pub progressed: Vec<(usize, u32)>,
    /// Requests that completed.
    pub finished: Vec<usize>,
    /// Requests the engine preempted.
    pub preempted: Vec<usize>,
}

/// One engine during a run.
pub struct Engine<'a> {
    cfg: &'a EngineConfig,
    requests: &'a [Request],
    state: Vec<Active>,
    /// Requests holding KV, in admission order.
    running: Vec<usize>,
    /// Requests sent or preempted and not yet running (`waiting.rs`: vLLM's `fcfs` or
    /// `priority`).
    queue: Waiting,
    free: u32,
    /// Swap space in use (tokens).
    swap_used: u64,
    /// Swap traffic (µs) charged to the next step.
    swap_due_us: f64,
    now: f64,
    /// This step's batch: (request, tokens).
    batch: Vec<(usize, u32)>,
    budget: u32,
    stats: RunStats,
    events: StepEvents,
}

impl<'a> Engine<'a> {
    /// An empty engine for `requests` (indexed by position; it only sees those it is sent).
    pub fn new(cfg: &'a EngineConfig, requests: &'a [Request]) -> Engine<'a> {
        Engine {
            cfg,
            requests,
            state: vec![Active::default(); requests.len()],
            running: Vec::new(),
            queue: Waiting::new(requests.len()),
            free: cfg.kv_blocks,
            swap_used: 0,
            swap_due_us: 0.0,
            now: 0.0,
            batch: Vec::new(),
            budget: 0,
            stats: RunStats::default(),
            events: StepEvents::default(),
        }
    }

    /// Request `i` is sent to the engine: it queues behind what was sent before, or, sent with
    /// a `priority` (vLLM's `--scheduling-policy priority`), behind what has a lower number.
    pub fn accept(&mut self, i: usize, priority: Option<i64>) {
        self.queue.send(i, priority);
    }

    /// Pause running (or queued) request `i` at this step boundary: swap its KV out or drop
    /// it, whichever costs less (see the module docs).
    pub fn pause(&mut self, i: usize) {
        self.running.retain(|&r| r != i);
        self.queue.remove(i);
        let cfg = self.cfg;
        let a = &mut self.state[i];
        self.stats.pauses += 1;
        if a.swapped || a.blocks == 0 {
            // Paused again before it resumed: its KV is already out of the GPU.
            return;
        }
        let tokens = a.computed;
        let swap_us = 2.0 * cfg.swap_us_per_token * f64::from(tokens);
        let recompute_us = cfg.beta_us[1] * f64::from(tokens);
        self.free += a.blocks;
        a.blocks = 0;
        if tokens > 0
            && swap_us < recompute_us
            && self.swap_used + u64::from(tokens) <= cfg.swap_tokens
        {
            a.swapped = true;
            self.swap_used += u64::from(tokens);
            self.swap_due_us += cfg.swap_us_per_token * f64::from(tokens);
            self.stats.swapped_tokens += u64::from(tokens);
        } else {
            self.stats.wasted_tokens += u64::from(tokens);
            a.computed = 0;
        }
    }

    /// End running (or queued) request `i` unanswered at this step boundary (its client was
    /// told to retry): its KV, on the GPU or swapped out, is freed.
    pub fn abort(&mut self, i: usize) {
        self.running.retain(|&r| r != i);
        self.queue.remove(i);
        let a = &mut self.state[i];
        self.free += a.blocks;
        if a.swapped {
            self.swap_used -= u64::from(a.computed);
        }
        *a = Active::default();
    }

    /// Preempt vLLM's victim, the most recently admitted running request (`fcfs`) or the one of
    /// the highest number, then latest sent (`priority`): drop its KV and queue it again
    /// (un-batching it if it was batched). Which request it was, and where it ran.
    fn preempt(&mut self) -> Option<(usize, usize)> {
        let at = if self.queue.ordered() {
            let queue = &self.queue;
            (0..self.running.len()).max_by_key(|&k| queue.key(self.running[k]))?
        } else {
            self.running.len().checked_sub(1)?
        };
        let victim = self.running.remove(at);
        if let Some(pos) = self.batch.iter().position(|&(i, _)| i == victim) {
            self.budget += self.batch.swap_remove(pos).1;
        }
        let a = &mut self.state[victim];
        self.free += a.blocks;
        self.stats.preemptions += 1;
        self.stats.wasted_tokens += u64::from(a.computed);
        a.blocks = 0;
        a.computed = 0;
        self.queue.requeue(victim);
        self.events.preempted.push(victim);
        Some((victim, at))
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
                match self.preempt() {
                    Some((victim, _)) if victim == i => {}
                    // A victim ahead of `i` moves it one place up.
                    Some((_, at)) => {
                        k -= usize::from(at < k);
                        continue;
                    }
                    None => {}
                }
                scheduled = false;
                break;
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

    /// Start queued requests in order while they fit (a swapped one needs its whole KV back).
    fn admit_queued(&mut self) {
        while self.running.len() < self.cfg.max_num_seqs && self.budget > 0 {
            let Some(i) = self.queue.front() else {
                break;
            };
            let a = self.state[i];
            let want = a.wants(&self.requests[i], self.budget);
            if !self.allocate(i, want) {
                break;
            }
            if a.swapped {
                let a = &mut self.state[i];
                a.swapped = false;
                self.swap_used -= u64::from(a.computed);
                self.swap_due_us += self.cfg.swap_us_per_token * f64::from(a.computed);
            }
            self.queue.pop_front();
            self.budget -= want;
            self.batch.push((i, want));
            self.running.push(i);
        }
    }

    /// Run the batch: advance the clock, produce tokens, retire what finished.
    fn execute(&mut self) {
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
        let compute_us = b0
            + b1 * f64::from(prefill_tokens)
            + b2 * f64::from(decode_tokens)
            + self.cfg.attend_us * attended as f64;
        // Swaps run on the copy engines beside the step's kernels: the step lasts the longer.
        self.now += compute_us.max(std::mem::take(&mut self.swap_due_us)) / 1e6;
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
                self.events.progressed.push((i, a.generated));
            }
            if a.generated >= r.output_tokens {
                self.free += a.blocks;
                a.blocks = 0;
                finished = true;
                self.events.finished.push(i);
                self.stats.outcomes.push(RequestTimes {
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

    /// Whether anything is running or queued.
    pub fn busy(&self) -> bool {
        !self.running.is_empty() || !self.queue.is_empty()
    }

    /// Schedule and run one step, writing what it did into `out`; false if nothing could run.
    /// A step that only preempted runs nothing and takes no time; the next one does.
    pub fn step(&mut self, out: &mut StepEvents) -> bool {
        for events in [&mut self.events, &mut *out] {
            events.progressed.clear();
            events.finished.clear();
            events.preempted.clear();
        }
        self.batch.clear();
        self.budget = self.cfg.max_num_batched_tokens;
        let preempted = self.schedule_running();
        if !preempted {
            self.admit_queued();
        }
        let ran = !self.batch.is_empty();
        if ran {
            self.execute();
        }
        std::mem::swap(&mut self.events, out);
        ran || preempted
    }

    /// What it can start in its next step: the budget its running requests leave (none while
    /// requests it was sent still queue), its free KV, its queue.
    pub fn report(&self) -> EngineReport {
        let mut budget = self.cfg.max_num_batched_tokens;
        for &i in &self.running {
            budget = budget.saturating_sub(self.state[i].wants(&self.requests[i], budget));
        }
        let slots = self.cfg.max_num_seqs.saturating_sub(self.running.len());
        let step_tokens = if self.queue.is_empty() && slots > 0 {
            budget
        } else {
            0
        };
        EngineReport {
            step_tokens: Some(step_tokens),
            kv_free_tokens: Some(u64::from(self.free) * u64::from(self.cfg.block_tokens)),
            waiting: self.queue.len(),
            slots: None,
        }
    }

    /// The engine's clock (s).
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Move an idle engine's clock forward to `t`.
    pub fn wait_until(&mut self, t: f64) {
        self.now = self.now.max(t);
    }

    /// What happened so far.
    pub fn finish(self) -> RunStats {
        self.stats
    }
}
