//! Which engine a request goes to. Routers look at what the scheduler knows of each engine:
//! - `round-robin`: the next engine in turn.
//! - `least-outstanding`: the fewest requests sent there and not finished (the default).
//! - `kv-score`: what Kubernetes inference gateways ship (the Gateway API inference
//!   extension's queue-depth and KV-cache-utilization scorers, equal weights): the highest
//!   `(1 − waiting / most waiting anywhere) + (1 − KV used)`, from what the engines report.
//! - `cost-aware`: the least predicted cost outstanding, `Σ (O²/2 + I·O)` over the requests
//!   admitted there and not finished, O the predicted mean (SageSched's cost model used for
//!   placement); ties to the fewest outstanding.
//! - `prefix-affinity`: the least prefill the request would wait for there: the blocks of its
//!   prompt the engine would prefill (those beyond the prefix sent there before and still
//!   remembered, `prefix.rs`, plus one for the unhashed tail), times the requests that would
//!   share the engine with it (its outstanding, plus one); ties to the fewest outstanding. So a
//!   conversation's next turn goes where its history is cached unless that engine is busier
//!   by more than the cache saves (cache first alone piled turns onto one busy engine while
//!   the other idled). Admission still asks only engines with
//!   room: a turn whose engine is full goes to another rather than wait.
//!
//! Ties go to the lowest-numbered engine.

use std::fmt;
use std::str::FromStr;

/// How an engine is picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Router {
    /// The next in turn.
    RoundRobin,
    /// The fewest outstanding.
    LeastOutstanding,
    /// Queue depth and KV use.
    KvScore,
    /// The least predicted cost outstanding.
    CostAware,
    /// The longest remembered prefix of the prompt.
    PrefixAffinity,
}

/// Every router with its name.
const TABLE: [(Router, &str); 5] = [
    (Router::RoundRobin, "round-robin"),
    (Router::LeastOutstanding, "least-outstanding"),
    (Router::KvScore, "kv-score"),
    (Router::CostAware, "cost-aware"),
    (Router::PrefixAffinity, "prefix-affinity"),
];

/// Every router's name.
pub const NAMES: [&str; 5] = {
    let mut names = [""; 5];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].1;
        i += 1;
    }
    names
};

/// What a router sees of one engine.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineLoad {
    /// Requests sent to it and not finished (admitted, or routed to it and waiting).
    pub outstanding: usize,
    /// Requests waiting for it: in its own queue (as it reported) or the scheduler's queue for
    /// it.
    pub waiting: usize,
    /// Fraction of its KV in use (as it reported; 0 if unknown).
    pub kv_used: f64,
    /// The predicted cost of what it holds.
    pub cost: f64,
    /// Blocks of the request's prompt it would prefill: those beyond its leading blocks sent
    /// there before and remembered, plus one for the unhashed tail (`prefix-affinity` only; 0
    /// otherwise).
    pub uncached_blocks: usize,
}

impl Router {
    /// Its name.
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(r, _)| *r == self)
            .map_or("", |(_, n)| n)
    }

    /// Whether it needs every request's predicted cost.
    pub fn predicts(self) -> bool {
        self == Router::CostAware
    }

    /// Whether it needs every request's prompt prefix.
    pub fn needs_prefix(self) -> bool {
        self == Router::PrefixAffinity
    }

    /// The engine among `candidates` (indices into `loads`, ascending) for the next request;
    /// `turn` is the round-robin position (advanced past the pick). `None` without candidates.
    pub fn pick(
        self,
        candidates: &[usize],
        loads: &[EngineLoad],
        turn: &mut usize,
    ) -> Option<usize> {
        let pick = *self.preference(candidates, loads, *turn).first()?;
        *turn = pick + 1;
        Some(pick)
    }

    /// `candidates` in the order this router prefers them (its pick first), so a caller can take
    /// the first that also has room without asking every engine.
    pub fn preference(self, candidates: &[usize], loads: &[EngineLoad], turn: usize) -> Vec<usize> {
        let mut order = candidates.to_vec();
        let by = |order: &mut Vec<usize>, key: &dyn Fn(&EngineLoad) -> (f64, usize)| {
            order.sort_by(|&a, &b| {
                let (ka, kb) = (key(&loads[a]), key(&loads[b]));
                ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1)).then(a.cmp(&b))
            });
        };
        match self {
            Router::RoundRobin => {
                let from = turn % loads.len().max(1);
                let split = order.partition_point(|&c| c < from);
                order.rotate_left(split);
            }
            Router::LeastOutstanding => by(&mut order, &|l| (l.outstanding as f64, 0)),
            Router::KvScore => {
                let most = candidates
                    .iter()
                    .map(|&c| loads[c].waiting)
                    .max()
                    .unwrap_or(0)
                    .max(1) as f64;
                by(&mut order, &|l| {
                    (-(2.0 - l.waiting as f64 / most - l.kv_used), 0)
                });
            }
            Router::CostAware => by(&mut order, &|l| (l.cost, l.outstanding)),
            Router::PrefixAffinity => by(&mut order, &|l| {
                (
                    l.uncached_blocks as f64 * (l.outstanding as f64 + 1.0),
                    l.outstanding,
                )
            }),
        }
        order
    }
}

impl fmt::Display for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A router name nobody defined: the [`FromStr`] error of [`Router`], which clap's value
/// parsers and `parse()` return (see the crate's "Errors").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown router `{0}`; known: {known}", known = NAMES.join(", "))]
pub struct UnknownRouter(pub String);

impl FromStr for Router {
    type Err = UnknownRouter;

    fn from_str(s: &str) -> Result<Router, UnknownRouter> {
        TABLE
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(r, _)| *r)
            .ok_or_else(|| UnknownRouter(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(outstanding: usize, waiting: usize, kv_used: f64, cost: f64) -> EngineLoad {
        EngineLoad {
            outstanding,
            waiting,
            kv_used,
            cost,
            uncached_blocks: 0,
        }
    }

    #[test]
    fn each_router_picks_by_its_own_measure() {
        let loads = [
            load(1, 0, 0.9, 10.0),
            load(0, 3, 0.1, 500.0),
            load(2, 0, 0.5, 1.0),
        ];
        let all = [0, 1, 2];
        let mut turn = 0;
        assert_eq!(
            Router::LeastOutstanding.pick(&all, &loads, &mut turn),
            Some(1)
        );
        assert_eq!(Router::CostAware.pick(&all, &loads, &mut turn), Some(2));
        assert_eq!(Router::CostAware.pick(&[0, 1], &loads, &mut turn), Some(0));
        // Scores: 0: 1 + 0.1; 1: 0 + 0.9; 2: 1 + 0.5.
        assert_eq!(Router::KvScore.pick(&all, &loads, &mut turn), Some(2));
        assert_eq!(Router::LeastOutstanding.pick(&[], &loads, &mut turn), None);
        let ties = [load(2, 0, 0.0, 0.0), load(1, 0, 0.0, 0.0)];
        assert_eq!(Router::CostAware.pick(&[0, 1], &ties, &mut turn), Some(1));
        assert_eq!(
            Router::PrefixAffinity.pick(&[0, 1], &ties, &mut turn),
            Some(1),
            "nothing cached anywhere: the fewest outstanding"
        );
        // A 9-block prompt: 8 blocks cached on a busy engine, none on an idle one.
        let prefix = |uncached_blocks, outstanding| EngineLoad {
            uncached_blocks,
            ..load(outstanding, 0, 0.0, 0.0)
        };
        assert_eq!(
            Router::PrefixAffinity.pick(&[0, 1], &[prefix(2, 3), prefix(10, 0)], &mut turn),
            Some(0),
            "2 blocks beside 3 others cost less than 10 alone"
        );
        assert_eq!(
            Router::PrefixAffinity.pick(&[0, 1], &[prefix(6, 3), prefix(10, 0)], &mut turn),
            Some(1),
            "too little cached to share a busy engine"
        );
    }

    #[test]
    fn the_preference_order_starts_with_the_pick() {
        let loads = [
            load(3, 0, 0.0, 0.0),
            load(1, 0, 0.0, 0.0),
            load(2, 0, 0.0, 0.0),
        ];
        assert_eq!(
            Router::LeastOutstanding.preference(&[0, 1, 2], &loads, 0),
            [1, 2, 0]
        );
        assert_eq!(
            Router::RoundRobin.preference(&[0, 1, 2], &loads, 2),
            [2, 0, 1]
        );
        assert_eq!(Router::RoundRobin.preference(&[0, 2], &loads, 1), [2, 0]);
    }

    #[test]
    fn round_robin_takes_turns_and_skips_engines_that_are_not_candidates() {
        let loads = [EngineLoad::default(); 3];
        let mut turn = 0;
        let order: Vec<Option<usize>> = (0..4)
            .map(|_| Router::RoundRobin.pick(&[0, 1, 2], &loads, &mut turn))
            .collect();
        assert_eq!(order, [Some(0), Some(1), Some(2), Some(0)]);
        assert_eq!(Router::RoundRobin.pick(&[0, 2], &loads, &mut turn), Some(2));
    }

    #[test]
    fn names_parse_back_and_unknown_ones_list_the_known() {
        for name in NAMES {
            assert_eq!(name.parse::<Router>().map(Router::name), Ok(name));
        }
        let err = "random".parse::<Router>().expect_err("unknown");
        assert!(
            err.to_string()
                .contains("round-robin, least-outstanding, kv-score, cost-aware, prefix-affinity")
        );
    }
}
