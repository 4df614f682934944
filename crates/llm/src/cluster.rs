//! Several engine instances behind one router (`xsched llm --instances N --router NAME`),
//! simulated together in virtual time: the instance whose clock is earliest steps next, and an
//! arrival is routed when every busy instance has reached its time.
//!
//! Routers (what each looks at when a request arrives):
//! - `round-robin`: the next instance in turn.
//! - `least-outstanding`: the fewest requests running or waiting.
//! - `kv-score`: what Kubernetes inference gateways ship (the Gateway API inference
//!   extension's queue-depth and KV-cache-utilization scorers, equal weights): the highest
//!   `(1 − waiting / most waiting anywhere) + (1 − KV used)`.
//! - `cost-aware`: the least predicted outstanding cost, `Σ (O²/2 + I·O)` over the requests
//!   it was sent and has not completed, O the router's history prediction (its mean; learned
//!   online from every instance's completions): SageSched's cost model used for placement. The
//!   sums are kept as requests are sent and complete (a decision is one pass over the
//!   instances); the progress of running requests is not subtracted.
//!
//! Where the policy orders requests: `instance` (each instance orders its own waiting queue
//! with its own copy of the policy and predictor) or `router` (one queue at the router, in the
//! policy's order; a request is sent on only to an instance that would admit it at once, chosen
//! by the router among those; instances then serve first come first served).

use crate::Request;
use crate::engine::{Engine, EngineConfig, RunStats, Step};
use crate::policy::{self, Policy, View};
use crate::predictor::Predictor;
use std::time::Instant;

/// Router names.
pub const ROUTERS: &[&str] = &["round-robin", "least-outstanding", "kv-score", "cost-aware"];

/// Where the policy orders requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ordering {
    /// Each instance orders its own queue.
    Instance,
    /// One queue at the router.
    Router,
}

/// A cluster run's outcome.
#[derive(Debug)]
pub struct ClusterStats {
    /// Every instance's completions, preemptions and steps together.
    pub stats: RunStats,
    /// Wall-clock time of each routing decision (ns).
    pub decision_ns: Vec<u64>,
}

/// How the router picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    RoundRobin,
    LeastOutstanding,
    KvScore,
    CostAware,
}

struct Router {
    rule: Rule,
    turn: usize,
    predictor: Predictor,
    /// The predicted cost of each request sent (by id), for `cost-aware`.
    predicted: Vec<f64>,
    /// Per instance, the predicted cost of what it was sent and has not completed.
    outstanding: Vec<f64>,
}

impl Router {
    fn new(name: &str, requests: &[Request], history: usize, instances: usize) -> Option<Router> {
        let rule = match name {
            "round-robin" => Rule::RoundRobin,
            "least-outstanding" => Rule::LeastOutstanding,
            "kv-score" => Rule::KvScore,
            "cost-aware" => Rule::CostAware,
            _ => return None,
        };
        Some(Router {
            rule,
            turn: 0,
            predictor: Predictor::new(history.max(1)),
            predicted: vec![0.0; requests.len()],
            outstanding: vec![0.0; instances],
        })
    }

    /// Request `i` was sent to instance `to`.
    fn sent(&mut self, i: usize, to: usize) {
        self.outstanding[to] += self.predicted[i];
    }

    /// Request `r`, sent to instance `from`, completed.
    fn completed(&mut self, r: &Request, from: usize) {
        self.outstanding[from] -= self.predicted[r.id];
        self.predictor.learn(r.embedding.clone(), r.output_tokens);
    }

    /// The instance for request `i` among `candidates` (indices into `engines`).
    fn pick(
        &mut self,
        i: usize,
        r: &Request,
        engines: &[Engine<'_>],
        candidates: &[usize],
    ) -> usize {
        let first = candidates.first().copied().unwrap_or(0);
        match self.rule {
            Rule::RoundRobin => {
                let at = candidates
                    .iter()
                    .copied()
                    .find(|&c| c >= self.turn % engines.len())
                    .unwrap_or(first);
                self.turn = at + 1;
                at
            }
            Rule::LeastOutstanding => min_by_key(candidates, |c| {
                let (running, waiting) = engines[c].load();
                (running + waiting) as f64
            }),
            Rule::KvScore => {
                let most = candidates
                    .iter()
                    .map(|&c| engines[c].load().1)
                    .max()
                    .unwrap_or(0)
                    .max(1) as f64;
                min_by_key(candidates, |c| {
                    let queue = 1.0 - engines[c].load().1 as f64 / most;
                    -(queue + 1.0 - engines[c].kv_used())
                })
            }
            Rule::CostAware => {
                let o = self
                    .predictor
                    .predict(&r.embedding, r.previous_answer_tokens)
                    .mean();
                self.predicted[i] = policy::cost(r.input_tokens, o.round() as u32);
                min_by_key(candidates, |c| self.outstanding[c])
            }
        }
    }
}

/// The candidate with the lowest `key` (the first on ties).
fn min_by_key(candidates: &[usize], key: impl Fn(usize) -> f64) -> usize {
    candidates
        .iter()
        .copied()
        .map(|c| (key(c), c))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
        .map_or(0, |(_, c)| c)
}

/// A cluster: how many instances, which router, where the policy orders.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// Engine instances.
    pub instances: usize,
    /// A [`ROUTERS`] name.
    pub router: String,
    /// Where the policy orders requests.
    pub ordering: Ordering,
}

/// Run `requests` (sorted by arrival, ids their positions) on `cluster`'s instances of `cfg`,
/// the policy `policy_name` ordering where the cluster says; every predictor (the router's,
/// and each policy's) first learns `warm`. `None` for an unknown router or policy name.
pub fn simulate(
    cfg: &EngineConfig,
    cluster: &Cluster,
    policy_name: &str,
    history: usize,
    warm: &[Request],
    requests: &[Request],
) -> Option<ClusterStats> {
    let (instances, ordering) = (cluster.instances.max(1), cluster.ordering);
    let mut router = Router::new(&cluster.router, requests, history, instances)?;
    for r in warm {
        router.predictor.learn(r.embedding.clone(), r.output_tokens);
    }
    let per_instance = |name: &str| {
        let mut p = policy::by_name(name, history, cfg)?;
        for r in warm {
            p.arrive(r);
            p.complete(r);
        }
        Some(p)
    };
    let instance_policy = match ordering {
        Ordering::Instance => policy_name,
        Ordering::Router => "fcfs",
    };
    let mut policies: Vec<Box<dyn Policy>> = (0..instances)
        .map(|_| per_instance(instance_policy))
        .collect::<Option<_>>()?;
    let mut central = match ordering {
        Ordering::Router => Some(per_instance(policy_name)?),
        Ordering::Instance => None,
    };
    let mut engines: Vec<Engine<'_>> = (0..instances).map(|_| Engine::new(cfg, requests)).collect();
    let mut held: Vec<usize> = Vec::new();
    let mut decision_ns = Vec::with_capacity(requests.len());
    let mut seen = vec![0usize; instances];
    let all: Vec<usize> = (0..instances).collect();
    let mut next = 0usize;
    // The time of the event being handled (a step's end, or an arrival).
    let mut clock = 0.0f64;
    loop {
        let arrival = requests.get(next).map_or(f64::INFINITY, |r| r.arrival);
        let earliest = (0..instances)
            .filter(|&e| engines[e].busy())
            .min_by(|&a, &b| engines[a].now().total_cmp(&engines[b].now()));
        match earliest {
            Some(e) if engines[e].now() <= arrival => {
                if engines[e].step(policies[e].as_mut()) == Step::Idle {
                    if arrival.is_infinite() {
                        // Nothing it holds can ever run (as `engine::simulate` gives up too).
                        break;
                    }
                    engines[e].wait_until(arrival);
                }
                clock = clock.max(engines[e].now());
                learn_completions(
                    e,
                    &engines[e],
                    &mut seen[e],
                    requests,
                    &mut router,
                    &mut central,
                );
            }
            _ if next < requests.len() => {
                let r = &requests[next];
                clock = clock.max(r.arrival);
                for e in engines.iter_mut().filter(|e| !e.busy()) {
                    e.wait_until(r.arrival);
                }
                match central.as_mut() {
                    Some(c) => {
                        c.arrive(r);
                        held.push(next);
                    }
                    None => {
                        let t = Instant::now();
                        let to = router.pick(next, r, &engines, &all);
                        decision_ns.push(t.elapsed().as_nanos() as u64);
                        if engines[to].arrive(next, policies[to].as_mut()) {
                            router.sent(next, to);
                        }
                    }
                }
                next += 1;
            }
            _ if held.is_empty() => break,
            _ => {}
        }
        if let Some(c) = central.as_mut() {
            let dispatched = dispatch(
                clock,
                &mut held,
                c.as_mut(),
                &mut router,
                &mut engines,
                &mut policies,
                requests,
            );
            decision_ns.extend(dispatched);
        }
    }
    let mut stats = RunStats {
        outcomes: Vec::with_capacity(requests.len()),
        preemptions: 0,
        wasted_tokens: 0,
        makespan: 0.0,
        steps: 0,
        refused: 0,
    };
    for e in engines {
        let s = e.finish();
        stats.outcomes.extend(s.outcomes);
        stats.preemptions += s.preemptions;
        stats.wasted_tokens += s.wasted_tokens;
        stats.makespan = stats.makespan.max(s.makespan);
        stats.steps += s.steps;
        stats.refused += s.refused;
    }
    Some(ClusterStats { stats, decision_ns })
}

/// Tell the router (and a central policy) what instance `from` completed since last.
fn learn_completions(
    from: usize,
    e: &Engine<'_>,
    seen: &mut usize,
    requests: &[Request],
    router: &mut Router,
    central: &mut Option<Box<dyn Policy>>,
) {
    for o in e.outcomes_since(*seen) {
        let r = &requests[o.id];
        router.completed(r, from);
        if let Some(c) = central.as_mut() {
            c.complete(r);
        }
    }
    *seen = e.outcomes_len();
}

/// Send held requests, best-ranked first, to instances that would admit them at `now`; the
/// time of each decision.
fn dispatch(
    now: f64,
    held: &mut Vec<usize>,
    central: &mut dyn Policy,
    router: &mut Router,
    engines: &mut [Engine<'_>],
    policies: &mut [Box<dyn Policy>],
    requests: &[Request],
) -> Vec<u64> {
    let mut times = Vec::new();
    while !held.is_empty() {
        let room: Vec<usize> = (0..engines.len())
            .filter(|&e| engines[e].has_room())
            .collect();
        if room.is_empty() {
            break;
        }
        let t = Instant::now();
        let rank = |i: usize| {
            central.rank(&View {
                req: &requests[i],
                generated: 0,
                started: false,
                now,
            })
        };
        let Some((_, pos, i)) = held
            .iter()
            .enumerate()
            .map(|(pos, &i)| (rank(i), pos, i))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)))
        else {
            break;
        };
        let to = router.pick(i, &requests[i], engines, &room);
        held.swap_remove(pos);
        times.push(t.elapsed().as_nanos() as u64);
        if !engines[to].busy() {
            engines[to].wait_until(now);
        }
        if engines[to].arrive(i, policies[to].as_mut()) {
            router.sent(i, to);
        }
    }
    times
}
