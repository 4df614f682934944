//! Request-ordering policies: each ranks active requests every step (lower runs first).
//!
//! - `fcfs`: arrival order (vLLM's default); running requests keep their place.
//! - `ssjf`: shortest *predicted* output first, a point estimate (the predictor's mean);
//!   non-preemptive: started requests run to completion first.
//! - `srpt-oracle`: shortest remaining true cost first (knows every output length): the bound.
//! - `sagesched`: highest Gittins index of the predicted cost distribution given the cost
//!   attained, cost `C = O²/2 + I·O` (I input, O output tokens); preemptive.
//! - `fastserve`: skip-join MLFQ: level `p` has a quantum of `10 ms · 2^p` of service; a request
//!   joins the first level whose quantum covers its prefill, is demoted as it uses quanta up, and
//!   is promoted back to the top after waiting [`STARVATION_S`] (the starvation guard). Service
//!   is estimated from tokens and the engine's step-time fit (one decode step per token).
//! - `trail`: SRPT on the predicted remaining output, refined as tokens are generated (the
//!   conditional mean of the predicted distribution given the tokens so far); a request becomes
//!   non-preemptible once it generated more than 0.8 × its initial prediction.
//! - `sagesched-mean`, `sagesched-length`, `sagesched-nohistory`, `sagesched-oracle`: ablations
//!   (mean remaining cost instead of Gittins; cost = O; the prior instead of the history; the
//!   true length as a one-atom distribution, which must order exactly as `srpt-oracle`; and
//!   `sagesched-np`: the Gittins order for admission only, started requests never displaced).

use crate::Request;
use crate::predictor::{Embedding, Predictor};
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
    "sagesched-oracle",
    "sagesched-np",
];

/// The cost of serving `o` output tokens after an `i`-token prompt: `O²/2 + I·O`.
pub fn cost(i: u32, o: u32) -> f64 {
    let (i, o) = (f64::from(i), f64::from(o));
    o * o / 2.0 + i * o
}

/// Build a policy by name; the predictor's history holds `history` entries.
pub fn by_name(name: &str, history: usize) -> Option<Box<dyn Policy>> {
    Some(match name {
        "fcfs" => Box::new(Fcfs),
        "srpt-oracle" => Box::new(SrptOracle),
        "fastserve" => Box::new(FastServe),
        "trail" => Box::new(Predicted::new("trail", Rule::Trail, history)),
        "ssjf" => Box::new(Predicted::new("ssjf", Rule::Ssjf, history)),
        "sagesched" => Box::new(Predicted::new("sagesched", Rule::Gittins, history)),
        "sagesched-mean" => Box::new(Predicted::new("sagesched-mean", Rule::MeanCost, history)),
        "sagesched-length" => Box::new(Predicted::new(
            "sagesched-length",
            Rule::LengthOnly,
            history,
        )),
        "sagesched-nohistory" => Box::new(Predicted::new("sagesched-nohistory", Rule::Gittins, 0)),
        "sagesched-oracle" => Box::new(Predicted::oracle()),
        "sagesched-np" => Box::new(Predicted::new(
            "sagesched-np",
            Rule::GittinsAdmission,
            history,
        )),
        _ => return None,
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

/// FastServe's skip-join MLFQ, with service estimated from the A100 step-time fit.
struct FastServe;

impl FastServe {
    /// Seconds of service for prefilling `i` tokens and decoding `g`.
    fn service(i: u32, g: u32) -> f64 {
        (47.84 * f64::from(i) + 16_441.5 * f64::from(g)) / 1e6
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
        let served = FastServe::service(r.input_tokens, v.generated);
        let waited = (v.now - r.arrival - served).max(0.0);
        let level = if waited > STARVATION_S {
            0.0
        } else {
            FastServe::level(FastServe::service(r.input_tokens, 0)).max(FastServe::level(served))
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
    /// Gittins order for admission only: started requests run to completion first.
    GittinsAdmission,
    Gittins,
    MeanCost,
    LengthOnly,
}

/// What a predictor-driven policy keeps about one request.
type Pending = (Embedding, SizeDistribution, Cell<Option<(u32, f64)>>);

/// The predictor-driven policies.
struct Predicted {
    name: &'static str,
    rule: Rule,
    predictor: Option<Predictor>,
    /// Predict the true length (a one-atom distribution) instead of using the history.
    oracle: bool,
    /// Per waiting/running request: its embedding, its predicted cost distribution, and its
    /// last rank with the tokens generated when it was computed (a waiting request's index does
    /// not change, so most steps only look it up).
    /// Indexed by request id (dense positions in the workload), so a lookup is an array access.
    pending: Vec<Option<Pending>>,
}

impl Predicted {
    fn new(name: &'static str, rule: Rule, history: usize) -> Predicted {
        Predicted {
            name,
            rule,
            predictor: (history > 0).then(|| Predictor::new(history)),
            oracle: false,
            pending: Vec::new(),
        }
    }

    fn oracle() -> Predicted {
        Predicted {
            oracle: true,
            ..Predicted::new("sagesched-oracle", Rule::Gittins, 0)
        }
    }

    fn size(&self, req: &Request, o: u32) -> f64 {
        match self.rule {
            Rule::LengthOnly | Rule::Ssjf | Rule::Trail => f64::from(o),
            Rule::Gittins | Rule::GittinsAdmission | Rule::MeanCost => cost(req.input_tokens, o),
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
            _ if self.oracle => {
                SizeDistribution::from_valid_samples(&[f64::from(req.output_tokens)], 1.0)
            }
            Some(p) => p.predict(&e),
            None => Predictor::prior(),
        };
        let dist = lengths
            .map(|o| self.size(req, o as u32))
            .unwrap_or_else(|| SizeDistribution::from_valid_samples(&[], self.size(req, 256)));
        if self.pending.len() <= req.id {
            self.pending.resize_with(req.id + 1, || None);
        }
        self.pending[req.id] = Some((e, dist, Cell::new(None)));
    }

    fn rank(&self, v: &View<'_>) -> f64 {
        let Some(Some((_, dist, cached))) = self.pending.get(v.req.id) else {
            return v.req.arrival;
        };
        if let Some((generated, rank)) = cached.get()
            && generated == v.generated
            && !v.started
        {
            return rank;
        }
        let rank = self.compute_rank(v, dist);
        cached.set(Some((v.generated, rank)));
        rank
    }

    fn complete(&mut self, req: &Request) {
        if let Some((e, _, _)) = self.pending.get_mut(req.id).and_then(Option::take)
            && let Some(p) = self.predictor.as_mut()
        {
            p.learn(e, req.output_tokens);
        }
    }
}

impl Predicted {
    fn compute_rank(&self, v: &View<'_>, dist: &SizeDistribution) -> f64 {
        let attained = self.size(v.req, v.generated);
        match self.rule {
            Rule::Ssjf | Rule::GittinsAdmission if v.started => STARTED_FIRST + v.req.arrival,
            Rule::GittinsAdmission => -dist.gittins(0.0),
            Rule::Ssjf => dist.mean(),
            Rule::Trail if attained > 0.8 * dist.mean() => STARTED_FIRST + v.req.arrival,
            Rule::MeanCost | Rule::Trail => mean_remaining(dist, attained),
            Rule::Gittins | Rule::LengthOnly => -dist.gittins(attained),
        }
    }
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
