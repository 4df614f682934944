//! The scheduler as a state machine: inputs in, decisions out, exact in virtual time.

mod admission;
mod ordering;
mod pausing;
mod routing;

use xsched_llm_core::service::{Rates, Served, ServiceModel};
use xsched_llm_core::{
    Arrival, Config, Decision, EngineLimits, Input, Placement, RequestPolicySpec, RequestScheduler,
    Router, SizeDistribution,
};

fn limits(concurrency: usize, kv_tokens: Option<u64>) -> EngineLimits {
    EngineLimits {
        concurrency,
        kv_tokens,
        block_tokens: 16,
    }
}

fn config(policy: &str, engines: Vec<EngineLimits>) -> Config {
    Config {
        policy: policy.parse::<RequestPolicySpec>().expect("policy"),
        engines,
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
        max_waiting: 1000,
        service: ServiceModel::Measured(Rates::default()),
        can_pause: true,
        knows_truth: true,
        fairness: xsched_llm_core::Fairness::default(),
        learn_concurrency: false,
        engine_order: None,
    }
}

fn scheduler(policy: &str, concurrency: usize) -> RequestScheduler {
    RequestScheduler::new(config(policy, vec![limits(concurrency, None)])).expect("valid")
}

/// A request of `input` prompt tokens predicted to answer exactly `tokens`.
fn arrival(id: u64, input: u32, tokens: f64) -> Input {
    Input::Arrived(Arrival {
        id,
        input_tokens: input,
        max_tokens: None,
        priority: 0,
        tenant: 0,
        lengths: SizeDistribution::point(tokens),
        ..Default::default()
    })
}

/// An answer of `output` tokens after a `prompt`-token prompt, `total` seconds from admission
/// (its first token after `first`).
fn served(prompt: u32, output: u32, total: f64, first: Option<f64>) -> Input {
    Input::Served(Served {
        prompt_tokens: prompt,
        output_tokens: output,
        total_s: total,
        first_token_s: first,
    })
}

fn decisions(s: &mut RequestScheduler) -> Vec<Decision> {
    std::iter::from_fn(|| s.poll_decision()).collect()
}

fn admitted(s: &mut RequestScheduler) -> Vec<u64> {
    decisions(s)
        .into_iter()
        .filter_map(|d| match d {
            Decision::Admit { id, .. } => Some(id),
            _ => None,
        })
        .collect()
}

/// Hold the one slot with request 0, queue `rest`, then free slots one by one: the admission
/// order.
fn order_after(s: &mut RequestScheduler, rest: &[Input]) -> Vec<u64> {
    s.handle(0.0, arrival(0, 10, 10.0)).expect("new");
    assert_eq!(admitted(s), [0]);
    for a in rest {
        s.handle(0.0, a.clone()).expect("new");
    }
    let mut order = Vec::new();
    let mut running = 0;
    for k in 0..rest.len() {
        s.handle(1.0 + k as f64, Input::Done { id: running })
            .expect("known");
        let next = admitted(s);
        assert_eq!(next.len(), 1, "one slot frees, one request runs");
        running = next[0];
        order.push(running);
    }
    order
}
