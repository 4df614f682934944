//! Whether a request fits an engine now: a free slot (its concurrency), the room the engine last
//! reported for its next step (prefill tokens and free KV blocks for the prompt's first chunk),
//! under [`KvAdmission::Peak`] the expected-peak rule of `crate::admit`, and the classes' rules
//! that keep sheddable requests off an engine. An engine that orders its own queue bounds only
//! what it holds. A pure function of the engine's account and the requests on it, so the round
//! can ask it for any set of requests it might pause.

use super::engines::EngineView;
use super::{Config, Fairness};
use crate::admit::{KvOccupant, expected_peak};
use crate::job::Job;
use crate::policy::KvAdmission;
use std::collections::BTreeMap;

/// The answer to whether a request fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fit {
    Fits,
    /// It does not.
    No,
    /// Expected-peak admission holds it back (the engine's headroom learns of it).
    Pressed,
}

/// What a fit depends on beside the engine and the requests.
pub(super) struct FitRules<'a> {
    pub(super) config: &'a Config,
    /// Whether requests above the standard class are about ([`super::HIGH_CLASS_WINDOW`]).
    pub(super) high_class_about: bool,
}

/// Whether `job` fits `engine` were `paused` (running there) not; `jobs` holds every request.
pub(super) fn fit(
    engine: &EngineView,
    job: &Job,
    jobs: &BTreeMap<u64, Job>,
    paused: &[u64],
    rules: &FitRules,
    scratch: &mut Vec<(f64, f64, f64)>,
) -> Fit {
    if !engine.serves() {
        return Fit::No;
    }
    if engine.orders {
        // The engine orders and batches; only what it holds is bounded.
        let holds = rules.config.engine_order.map_or(usize::MAX, |o| o.holds);
        return fit_if(engine.admitted.len() - paused.len() < holds);
    }
    let fairness = &rules.config.fairness;
    if job.priority < 0
        && (engine.admitted.iter()).any(|a| {
            jobs.get(a)
                .is_some_and(|j| keeps_sheddables_off(fairness, j, rules.high_class_about))
        })
    {
        return Fit::No;
    }
    if !room(engine, job, jobs, paused) {
        return Fit::No;
    }
    if rules.config.policy.admission == KvAdmission::Peak
        && let Some(cap) = engine.limits.kv_tokens
        && engine.admitted.len() > paused.len()
    {
        let others = (engine.admitted.iter())
            .filter(|a| !paused.contains(a))
            .filter_map(|a| jobs.get(a));
        let occupants = others.chain(std::iter::once(job)).map(|j| KvOccupant {
            context: f64::from(j.context()),
            remaining: j.remaining(),
        });
        let peak = expected_peak(occupants, engine.limits.block_tokens, scratch);
        if peak > engine.headroom.get() * cap as f64 {
            return Fit::Pressed;
        }
    }
    Fit::Fits
}

fn fit_if(fits: bool) -> Fit {
    if fits { Fit::Fits } else { Fit::No }
}

/// Whether `engine` has a slot, a step's room and the KV blocks for `job`'s first chunk, were
/// `paused` not running.
fn room(engine: &EngineView, job: &Job, jobs: &BTreeMap<u64, Job>, paused: &[u64]) -> bool {
    let block = u64::from(engine.limits.block_tokens);
    let freed: u64 = (paused.iter())
        .filter_map(|p| jobs.get(p))
        .map(|p| u64::from(p.context()).div_ceil(block) * block)
        .sum();
    if engine.admitted.len() - paused.len() >= engine.concurrency() {
        return false;
    }
    let step = (engine.report.step_tokens).map(|t| t.saturating_add(paused.len() as u32));
    if step == Some(0) {
        return false;
    }
    let chunk = u64::from(step.map_or(job.context(), |t| t.min(job.context())));
    (engine.report.kv_free_tokens).is_none_or(|free| free + freed >= chunk.div_ceil(block) * block)
}

/// Whether running request `j` keeps sheddable requests off its engine
/// ([`Fairness::sheddable_apart`], [`Fairness::sheddable_after_first_token`]), with requests
/// above the standard class about or not.
pub(super) fn keeps_sheddables_off(fairness: &Fairness, j: &Job, high_class_about: bool) -> bool {
    let prefilling = j.generated == 0 && fairness.sheddable_after_first_token;
    if j.priority > 0 {
        fairness.sheddable_apart || prefilling
    } else {
        j.priority < 0 && j.reports_first_token && prefilling && high_class_about
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SizeDistribution;
    use crate::policy::RequestPolicySpec;
    use crate::sched::arrival::job_of;
    use crate::sched::{Arrival, EngineLimits, EngineOrder, Placement};
    use crate::service::{Rates, ServiceModel};

    fn config(policy: &str, kv_tokens: Option<u64>) -> Config {
        Config {
            policy: policy.parse::<RequestPolicySpec>().expect("policy"),
            engines: vec![EngineLimits {
                concurrency: 4,
                kv_tokens,
                block_tokens: 16,
            }],
            router: crate::Router::LeastOutstanding,
            placement: Placement::WhenFree,
            max_waiting: 100,
            service: ServiceModel::Measured(Rates::default()),
            can_pause: true,
            knows_truth: true,
            fairness: Fairness::default(),
            learn_concurrency: false,
            engine_order: None,
        }
    }

    fn job(config: &Config, input: u32, output: f64, priority: i32) -> Job {
        let a = Arrival {
            input_tokens: input,
            priority,
            lengths: SizeDistribution::point(output),
            ..Default::default()
        };
        job_of(a, 0.0, 0, config.policy, &config.service)
    }

    fn fits(
        config: &Config,
        engine: &EngineView,
        jobs: &BTreeMap<u64, Job>,
        paused: &[u64],
    ) -> Fit {
        let rules = FitRules {
            config,
            high_class_about: false,
        };
        fit(engine, &jobs[&0], jobs, paused, &rules, &mut Vec::new())
    }

    #[test]
    fn pausing_a_request_frees_its_kv_blocks_and_its_slot_for_the_head() {
        let config = config("fcfs", Some(1024));
        let mut engine = EngineView::new(config.engines[0], &config);
        let jobs = BTreeMap::from([
            (0, job(&config, 40, 10.0, 0)),
            (1, job(&config, 33, 10.0, 0)),
        ]);
        engine.admitted = vec![1];
        // 40 tokens take 3 blocks of 16; 32 free tokens are 2.
        engine.report.kv_free_tokens = Some(32);
        assert_eq!(fits(&config, &engine, &jobs, &[]), Fit::No);
        // Request 1's 33 tokens hold 3 blocks: paused, 80 are free.
        assert_eq!(fits(&config, &engine, &jobs, &[1]), Fit::Fits);
        // No step room at all, and a full engine, hold it back whatever the KV.
        engine.report.kv_free_tokens = None;
        engine.report.step_tokens = Some(0);
        assert_eq!(fits(&config, &engine, &jobs, &[]), Fit::No);
        engine.report.step_tokens = None;
        engine.admitted = vec![1, 2, 3, 4];
        assert_eq!(fits(&config, &engine, &jobs, &[]), Fit::No);
        assert_eq!(fits(&config, &engine, &jobs, &[1]), Fit::Fits);
    }

    #[test]
    fn expected_peak_admission_presses_where_the_engine_would_run_out() {
        let config = config("fcfs:admit=peak", Some(256));
        let mut engine = EngineView::new(config.engines[0], &config);
        let jobs = BTreeMap::from([
            (0, job(&config, 64, 200.0, 0)),
            (1, job(&config, 64, 200.0, 0)),
        ]);
        engine.admitted = vec![1];
        // Together they grow to about 528 tokens of the 256.
        assert_eq!(fits(&config, &engine, &jobs, &[]), Fit::Pressed);
        // Alone on the engine, nothing is predicted against it.
        assert_eq!(fits(&config, &engine, &jobs, &[1]), Fit::Fits);
    }

    #[test]
    fn an_engine_that_orders_is_bounded_only_by_what_it_holds() {
        let mut config = config("fcfs", Some(16));
        config.engine_order = Some(EngineOrder {
            holds: 2,
            ..EngineOrder::default()
        });
        let mut engine = EngineView::new(config.engines[0], &config);
        let jobs = BTreeMap::from([(0, job(&config, 4000, 10.0, 0))]);
        engine.report.kv_free_tokens = Some(0);
        engine.admitted = vec![1];
        assert_eq!(fits(&config, &engine, &jobs, &[]), Fit::Fits);
        engine.admitted = vec![1, 2];
        assert_eq!(fits(&config, &engine, &jobs, &[]), Fit::No);
        engine.up = false;
        engine.admitted.clear();
        assert_eq!(fits(&config, &engine, &jobs, &[]), Fit::No);
    }

    #[test]
    fn a_higher_class_prefilling_keeps_sheddables_off_and_sheddables_only_while_it_is_about() {
        let config = config("fcfs", None);
        let fairness = Fairness::with_eviction(crate::sched::Eviction::One);
        let mut high = job(&config, 10, 10.0, 1);
        assert!(keeps_sheddables_off(&fairness, &high, false));
        high.generated = 1;
        assert!(!keeps_sheddables_off(&fairness, &high, true));
        let mut low = job(&config, 10, 10.0, -1);
        low.reports_first_token = true;
        assert!(!keeps_sheddables_off(&fairness, &low, false));
        assert!(keeps_sheddables_off(&fairness, &low, true));
        let all = Fairness::with_eviction(crate::sched::Eviction::All);
        assert!(keeps_sheddables_off(&all, &high, false));
    }
}
