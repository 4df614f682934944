//! Which upstream a request goes to, among those with a free slot (the ShareGPT issue's cluster
//! study's routers, as the gateway can run them):
//! - `round-robin`: the next upstream in turn that has a free slot.
//! - `least-outstanding`: the fewest requests in flight (the default).
//! - `cost-aware`: the least predicted cost outstanding, `Σ (O²/2 + I·O)` over the requests in
//!   flight there, O the predictor's mean (SageSched's cost model used for placement); ties go
//!   to the fewest in flight.
//!
//! Every router picks only among upstreams below the concurrency limit, so a router decides
//! where a request goes and the limit decides when.

use crate::admission::Upstreams;

/// How an upstream is picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Router {
    /// The next in turn.
    RoundRobin,
    /// The fewest in flight.
    LeastOutstanding,
    /// The least predicted cost outstanding.
    CostAware,
}

/// Every router's name.
pub const NAMES: &[&str] = &["round-robin", "least-outstanding", "cost-aware"];

impl Router {
    /// Its name (`--router`).
    pub fn name(self) -> &'static str {
        match self {
            Router::RoundRobin => "round-robin",
            Router::LeastOutstanding => "least-outstanding",
            Router::CostAware => "cost-aware",
        }
    }

    /// The upstream for the next request (advancing the round-robin turn), or `None` when every
    /// one holds `concurrency` requests.
    pub(crate) fn pick(self, up: &Upstreams, concurrency: usize) -> Option<usize> {
        let n = up.in_flight.len();
        let free = |u: &usize| up.in_flight[*u] < concurrency;
        match self {
            Router::RoundRobin => (0..n).map(|k| (up.turn + k) % n).find(free),
            Router::LeastOutstanding => (0..n).filter(free).min_by_key(|&u| up.in_flight[u]),
            Router::CostAware => (0..n).filter(free).min_by(|&a, &b| {
                up.outstanding[a]
                    .total_cmp(&up.outstanding[b])
                    .then(up.in_flight[a].cmp(&up.in_flight[b]))
            }),
        }
    }

    /// A request went to `upstream`: the round-robin turn moves past it.
    pub(crate) fn sent(self, up: &mut Upstreams, upstream: usize) {
        if self == Router::RoundRobin {
            up.turn = (upstream + 1) % up.in_flight.len().max(1);
        }
    }
}

impl std::str::FromStr for Router {
    type Err = String;

    fn from_str(s: &str) -> Result<Router, String> {
        match s {
            "round-robin" => Ok(Router::RoundRobin),
            "least-outstanding" => Ok(Router::LeastOutstanding),
            "cost-aware" => Ok(Router::CostAware),
            _ => Err(format!("unknown router `{s}`; known: {}", NAMES.join(", "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstreams(in_flight: &[usize], outstanding: &[f64]) -> Upstreams {
        Upstreams {
            in_flight: in_flight.to_vec(),
            outstanding: outstanding.to_vec(),
            turn: 0,
        }
    }

    #[test]
    fn each_router_picks_by_its_own_measure_among_free_upstreams() {
        let up = upstreams(&[1, 0, 2], &[10.0, 500.0, 1.0]);
        assert_eq!(Router::LeastOutstanding.pick(&up, 4), Some(1));
        assert_eq!(Router::CostAware.pick(&up, 4), Some(2));
        // Upstream 2 is full at a limit of 2: the least cost among the others.
        assert_eq!(Router::CostAware.pick(&up, 2), Some(0));
        assert_eq!(Router::LeastOutstanding.pick(&up, 0), None);
        let ties = upstreams(&[2, 1], &[0.0, 0.0]);
        assert_eq!(
            Router::CostAware.pick(&ties, 4),
            Some(1),
            "ties: fewest in flight"
        );
    }

    #[test]
    fn round_robin_takes_turns_and_skips_full_upstreams() {
        let mut up = upstreams(&[0, 0, 0], &[0.0; 3]);
        let mut order = Vec::new();
        for _ in 0..4 {
            let u = Router::RoundRobin.pick(&up, 1).expect("a free one");
            up.in_flight[u] += 1;
            Router::RoundRobin.sent(&mut up, u);
            order.push(u);
            up.in_flight[u] -= 1;
        }
        assert_eq!(order, [0, 1, 2, 0]);
        up.in_flight[1] = 1;
        assert_eq!(Router::RoundRobin.pick(&up, 1), Some(2), "1 is full");
    }

    #[test]
    fn names_parse_back_and_unknown_ones_list_the_known() {
        for name in NAMES {
            assert_eq!(name.parse::<Router>().map(Router::name), Ok(*name));
        }
        let err = "random".parse::<Router>().expect_err("unknown");
        assert!(
            err.contains("round-robin, least-outstanding, cost-aware"),
            "{err}"
        );
    }
}
