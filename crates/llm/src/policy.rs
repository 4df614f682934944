//! Request-ordering policies: each ranks requests (lower runs first). The engine (`engine.rs`,
//! vLLM's V1 scheduling) admits waiting requests in rank order (preempted ones rejoin them);
//! it never pauses a running request for a better one, so every policy here orders a queue.
//!
//! - `fcfs`: arrival order (vLLM's default).
//! - `ssjf`: shortest *predicted* output first, a point estimate (the predictor's mean);
//!   non-preemptive: started requests run to completion first.
//! - `srpt-oracle`: shortest remaining true cost first (knows every output length): the bound.
//! - `sagesched`: highest Gittins index of the predicted cost distribution given the cost
//!   attained, cost `C = O²/2 + I·O` (I input, O output tokens). A started request that has
//!   outlived its predicted support keeps its place until it completes (the history says
//!   nothing more about it; treating it as ever longer starves it to the end).
//! - `fastserve`: skip-join MLFQ: level `p` has a quantum of `10 ms · 2^p` of service; a request
//!   joins the first level whose quantum covers its prefill, is demoted as it uses quanta up, and
//!   is promoted back to the top after waiting [`STARVATION_S`] (the starvation guard). Service
//!   is estimated from tokens and the engine's step-time fit (one step per decoded token).
//! - `trail`: SRPT on the predicted remaining output, refined as tokens are generated (the
//!   conditional mean of the predicted distribution given the tokens so far); a request becomes
//!   non-preemptible once it generated more than 0.8 × its initial prediction.
//! - Ablations of `sagesched`, each changing one thing: `sagesched-mean` (mean remaining cost
//!   instead of the Gittins index), `sagesched-length` (cost = O), `sagesched-nohistory` (the
//!   fixed prior instead of the history), `sagesched-noaging` (no aging guard),
//!   `sagesched-oracle` (the true length as a one-atom distribution and no aging guard: it
//!   must order exactly as `srpt-oracle`).
//! - Every length-aware policy but the oracles has the aging guard of [`AGING_FACTOR`];
//!   FastServe has its own ([`STARVATION_S`]).
//! - `sagesched-noise-<σ>` (not in `all`): the prediction-quality study: ten samples of the
//!   true length × `exp(N(0, σ²))` (seeded per request) as the distribution, sagesched's rules.

use crate::Request;
use crate::engine::EngineConfig;
use crate::predictor::{Embedding, Predictor};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::cell::Cell;
use xsched_core::gittins::SizeDistribution;

/// What a policy sees of one active request.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The request.
    pub req: &'a Request,
    /// Tokens generated so far.
    pub generated: u32,
    /// Whether it has started (holds KV or generated a token).
    pub started: bool,
    /// The engine's clock (s).
    pub now: f64,
}

/// Orders requests.
pub trait Policy {
    /// The policy's name.
    fn name(&self) -> &'static str;
    /// A request arrived.
    fn arrive(&mut self, _req: &Request) {}
    /// Its rank now; lower runs first.
    fn rank(&self, v: &View<'_>) -> f64;
    /// A request completed (its true output length is now known).
    fn complete(&mut self, _req: &Request) {}
}

/// Every policy name.
pub const NAMES: &[&str] = &[
    "fcfs",
    "fastserve",
    "ssjf",
    "trail",
    "sagesched",
    "srpt-oracle",
    "sagesched-mean",
    "sagesched-length",
    "sagesched-nohistory",
    "sagesched-noaging",
    "sagesched-oracle",
];

/// The prefix of the prediction-quality study's names: `sagesched-noise-0.5`.
pub const NOISE_PREFIX: &str = "sagesched-noise-";

/// The cost of serving `o` output tokens after an `i`-token prompt: `O²/2 + I·O`.
pub fn cost(i: u32, o: u32) -> f64 {
    let (i, o) = (f64::from(i), f64::from(o));
    o * o / 2.0 + i * o
}

/// Build a policy by name; the predictor's history holds `history` entries; `engine` is the
/// engine it orders for (FastServe estimates service from its step-time fit).
pub fn by_name(name: &str, history: usize, engine: &EngineConfig) -> Option<Box<dyn Policy>> {
    Some(match name {
        "fcfs" => Box::new(Fcfs),
        "srpt-oracle" => Box::new(SrptOracle),
        "fastserve" => Box::new(FastServe {
            step_us: engine.beta_us[0],
            prefill_us: engine.beta_us[1],
        }),
        "trail" => Box::new(Predicted::new("trail", Rule::Trail, history, engine)),
        "ssjf" => Box::new(Predicted::new("ssjf", Rule::Ssjf, history, engine)),
        "sagesched" => Box::new(Predicted::new("sagesched", Rule::Gittins, history, engine)),
        "sagesched-mean" => Box::new(Predicted::new(
            "sagesched-mean",
            Rule::MeanCost,
            history,
            engine,
        )),
        "sagesched-length" => Box::new(Predicted::new(
            "sagesched-length",
            Rule::LengthOnly,
            history,
            engine,
        )),
        "sagesched-nohistory" => Box::new(Predicted::new(
            "sagesched-nohistory",
            Rule::Gittins,
            0,
            engine,
        )),
        "sagesched-noaging" => Box::new(Predicted {
            aging: None,
            ..Predicted::new("sagesched-noaging", Rule::Gittins, history, engine)
        }),
        "sagesched-oracle" => Box::new(Predicted {
            truth: Some(0.0),
            aging: None,
            ..Predicted::new("sagesched-oracle", Rule::Gittins, 0, engine)
        }),
        _ => {
            let sigma = name
                .strip_prefix(NOISE_PREFIX)?
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)?;
            Box::new(Predicted {
                truth: Some(sigma),
                ..Predicted::new("sagesched-noise", Rule::Gittins, 0, engine)
            })
        }
    })
}

/// Rank offset that puts started requests before waiting ones (non-preemptive policies).
const STARTED_FIRST: f64 = -1e18;

/// Arrival order (vLLM's default).
pub struct Fcfs;

impl Policy for Fcfs {
    fn name(&self) -> &'static str {
        "fcfs"
    }
    fn rank(&self, v: &View<'_>) -> f64 {
        v.req.arrival
    }
}

/// Waiting this long (s) puts a request back at FastServe's top level.
pub const STARVATION_S: f64 = 10.0;

/// FastServe's skip-join MLFQ, with service estimated from the engine's step-time fit.
struct FastServe {
    /// A step's fixed time (µs): a decoded token costs one step.
    step_us: f64,
    /// Time per prefilled token (µs).
    prefill_us: f64,
}

impl FastServe {
    /// Seconds of service for prefilling `i` tokens and decoding `g`.
    fn service(&self, i: u32, g: u32) -> f64 {
        (self.prefill_us * f64::from(i) + self.step_us * f64::from(g)) / 1e6
    }

    /// The first level whose quantum (10 ms · 2^p) covers `seconds`.
    fn level(seconds: f64) -> f64 {
        (seconds / 0.010).max(1.0).log2().ceil()
    }
}

impl Policy for FastServe {
    fn name(&self) -> &'static str {
        "fastserve"
    }
    fn rank(&self, v: &View<'_>) -> f64 {
        let r = v.req;
        let served = self.service(r.input_tokens, v.generated);
        let waited = (v.now - r.arrival - served).max(0.0);
        let level = if waited > STARVATION_S {
            0.0
        } else {
            FastServe::level(self.service(r.input_tokens, 0)).max(FastServe::level(served))
        };
        level * 1e9 + r.arrival
    }
}

struct SrptOracle;

impl Policy for SrptOracle {
    fn name(&self) -> &'static str {
        "srpt-oracle"
    }
    fn rank(&self, v: &View<'_>) -> f64 {
        cost(v.req.input_tokens, v.req.output_tokens) - cost(v.req.input_tokens, v.generated)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    Ssjf,
    Trail,
    Gittins,
    MeanCost,
    LengthOnly,
}

/// What a predictor-driven policy keeps about one waiting or running request.
struct Pending {
    embedding: Embedding,
    /// The predicted cost (or length) distribution.
    dist: SizeDistribution,
    /// The last rank, with the tokens generated when it was computed (a waiting request's
    /// index does not change, so most steps only look it up).
    cached: Cell<Option<(u32, f64)>>,
    /// When (engine clock, s) the aging guard puts it ahead of every un-aged request.
    aged_at: f64,
}

/// The aging guard of the length-aware policies: a request still waiting [`AGING_FACTOR`] times
/// its predicted time alone on the engine after it arrived is served before every request that
/// has not aged, aged ones first come first served (`sagesched-noaging` drops it).
pub const AGING_FACTOR: f64 = 100.0;

/// Rank offset of aged requests: after started ones, before everything else.
const AGED_FIRST: f64 = -1e17;

/// The predictor-driven policies.
struct Predicted {
    name: &'static str,
    rule: Rule,
    predictor: Option<Predictor>,
    /// Predict from the true length instead of the history: ten samples of it times
    /// `exp(N(0, σ²))`, or one atom at it when σ is 0.
    truth: Option<f64>,
    /// Per waiting/running request, indexed by request id (dense positions in the workload),
    /// so a lookup is an array access.
    pending: Vec<Option<Pending>>,
    /// The engine ordered for (the aging guard's time alone), or `None`: no aging guard.
    aging: Option<EngineConfig>,
}

impl Predicted {
    fn new(name: &'static str, rule: Rule, history: usize, engine: &EngineConfig) -> Predicted {
        Predicted {
            name,
            rule,
            predictor: (history > 0).then(|| Predictor::new(history)),
            truth: None,
            pending: Vec::new(),
            aging: Some(engine.clone()),
        }
    }

    fn size(&self, req: &Request, o: u32) -> f64 {
        match self.rule {
            Rule::LengthOnly | Rule::Ssjf | Rule::Trail => f64::from(o),
            Rule::Gittins | Rule::MeanCost => cost(req.input_tokens, o),
        }
    }
}

impl Policy for Predicted {
    fn name(&self) -> &'static str {
        self.name
    }

    fn arrive(&mut self, req: &Request) {
        let e = req.embedding.clone();
        let lengths = match &self.predictor {
            _ if self.truth.is_some() => noisy_truth(req, self.truth.unwrap_or(0.0)),
            Some(p) => p.predict(&e, req.previous_answer_tokens),
            None => Predictor::prior(),
        };
        let aged_at = self.aging.as_ref().map_or(f64::INFINITY, |engine| {
            let alone = engine.solo_seconds(req.input_tokens, lengths.mean().round() as u32);
            req.arrival + AGING_FACTOR * alone
        });
        let dist = lengths
            .map(|o| self.size(req, o as u32))
            .unwrap_or_else(|| SizeDistribution::from_valid_samples(&[], self.size(req, 256)));
        if self.pending.len() <= req.id {
            self.pending.resize_with(req.id + 1, || None);
        }
        self.pending[req.id] = Some(Pending {
            embedding: e,
            dist,
            cached: Cell::new(None),
            aged_at,
        });
    }

    fn rank(&self, v: &View<'_>) -> f64 {
        let Some(Some(p)) = self.pending.get(v.req.id) else {
            return v.req.arrival;
        };
        if v.now >= p.aged_at && !v.started {
            return AGED_FIRST + v.req.arrival;
        }
        if let Some((generated, rank)) = p.cached.get()
            && generated == v.generated
            && !v.started
        {
            return rank;
        }
        let rank = self.compute_rank(v, &p.dist);
        p.cached.set(Some((v.generated, rank)));
        rank
    }

    fn complete(&mut self, req: &Request) {
        if let Some(pending) = self.pending.get_mut(req.id).and_then(Option::take)
            && let Some(p) = self.predictor.as_mut()
        {
            p.learn(pending.embedding, req.output_tokens);
        }
    }
}

impl Predicted {
    fn compute_rank(&self, v: &View<'_>, dist: &SizeDistribution) -> f64 {
        let attained = self.size(v.req, v.generated);
        match self.rule {
            Rule::Ssjf if v.started => STARTED_FIRST + v.req.arrival,
            Rule::Ssjf => dist.mean(),
            Rule::Trail if attained > 0.8 * dist.mean() => STARTED_FIRST + v.req.arrival,
            Rule::Trail => mean_remaining(dist, attained),
            _ if v.started && self.truth.is_none() && attained >= dist.max() => {
                STARTED_FIRST + v.req.arrival
            }
            Rule::MeanCost => mean_remaining(dist, attained),
            Rule::Gittins | Rule::LengthOnly => -dist.gittins(attained),
        }
    }
}

/// The noisy-oracle prediction: ten samples of the true length × `exp(N(0, σ²))` (Box–Muller,
/// seeded by the request id, so runs repeat); one atom at the truth when σ is 0.
fn noisy_truth(req: &Request, sigma: f64) -> SizeDistribution {
    let truth = f64::from(req.output_tokens);
    if sigma == 0.0 {
        return SizeDistribution::from_valid_samples(&[truth], 1.0);
    }
    let mut rng = Pcg64Mcg::seed_from_u64(req.id as u64);
    let samples: Vec<f64> = (0..10)
        .map(|_| {
            let (u1, u2): (f64, f64) = (rng.random_range(f64::EPSILON..1.0), rng.random());
            let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            (truth * (sigma * normal).exp()).max(1.0)
        })
        .collect();
    SizeDistribution::from_valid_samples(&samples, truth)
}

/// `E[S − a | S > a]`, or `a` itself once the support is outlived.
fn mean_remaining(dist: &SizeDistribution, attained: f64) -> f64 {
    let (mut mass, mut work) = (0.0, 0.0);
    for &(s, p) in dist.atoms().iter().filter(|(s, _)| *s > attained) {
        mass += p;
        work += (s - attained) * p;
    }
    if mass > 0.0 {
        work / mass
    } else {
        attained.max(1.0)
    }
}
