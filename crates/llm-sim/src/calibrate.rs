//! Fitting the simulator to a real engine in the hour it was measured, so that a replay of the
//! very requests the engine served, under the policy it served them by, gives the engine's
//! measured mean TTLT; the policies the fit did not see then test it. One measured mean fits
//! one number:
//! - an engine slower than the step-time terms fitted from its gaps says is fitted by the one
//!   term those gaps cannot resolve, β3 (µs per context token a decoding request attends);
//! - an engine faster than they say even with β3 = 0 (the same machine another day, its cores
//!   less shared) is fitted by its whole speed: β0–β2 scaled by one factor, β3 = 0.
//!
//! The mean TTLT of a replay grows with β3 and with the factor (every step lasts longer and the
//! queue with it), so each fit is a bisection, each probe a whole simulated run.

use crate::Request;
use crate::engine::EngineConfig;
use crate::sim::{Rules, Runs, SimError};
use xsched_llm_core::RequestPolicySpec;

/// β3 is sought within 0 and this (µs a token: 100 times what a 2 048-token context at 5 µs
/// a step would cost an 8B model on a GPU).
const MOST_ATTEND_US: f64 = 1_000.0;
/// The factor on β0–β2 is sought within this and 1 (an engine 20 times faster than fitted).
const LEAST_SCALE: f64 = 0.05;
/// Bisection steps: the interval shrinks 2²⁵-fold.
const STEPS: usize = 25;
/// A fit whose mean is this close to the target (relatively) reached it.
const TOLERANCE: f64 = 0.005;

/// What the fit found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepTimeFit {
    /// The fitted β3 (µs per attended token; 0 where the whole speed was fitted).
    pub attend_us: f64,
    /// The factor on β0–β2 (1 unless the engine ran faster than they say).
    pub beta_scale: f64,
    /// The replay's mean TTLT with them (s).
    pub mean_ttlt: f64,
    /// Whether the mean is within 0.5 % of the target: one past either end of the search
    /// ([`LEAST_SCALE`], [`MOST_ATTEND_US`]) is met as nearly as it can be, and not reached.
    pub reached: bool,
}

impl StepTimeFit {
    /// `cfg` with the fitted step time.
    pub fn applied(&self, cfg: &EngineConfig) -> EngineConfig {
        EngineConfig {
            attend_us: self.attend_us,
            beta_us: cfg.beta_us.map(|b| b * self.beta_scale),
            ..cfg.clone()
        }
    }
}

/// The step time of `runs`' engine under which `policy` replays `requests` with a mean TTLT of
/// `target_s`: β3 where the engine's fitted terms are too fast, else their scale.
pub fn fit_step_time(
    runs: &Runs,
    policy: RequestPolicySpec,
    rules: &Rules,
    requests: &[Request],
    target_s: f64,
) -> Result<StepTimeFit, SimError> {
    let mean = |fit: &StepTimeFit| -> Result<f64, SimError> {
        let cfg = fit.applied(runs.cfg);
        let run = Runs { cfg: &cfg, ..*runs }.simulate(policy, rules, requests)?;
        let ttlt: Vec<f64> = run.stats.outcomes.iter().map(|o| o.ttlt).collect();
        Ok(ttlt.iter().sum::<f64>() / ttlt.len().max(1) as f64)
    };
    let with = |attend_us: f64, beta_scale: f64| StepTimeFit {
        attend_us,
        beta_scale,
        mean_ttlt: 0.0,
        reached: false,
    };
    let as_fitted = mean(&with(0.0, 1.0))?;
    if target_s >= as_fitted {
        bisect(0.0, MOST_ATTEND_US, target_s, |x| with(x, 1.0), mean)
    } else {
        bisect(LEAST_SCALE, 1.0, target_s, |x| with(0.0, x), mean)
    }
}

/// The `x` within `lo..=hi` whose fit `at(x)` gives `mean` the `target_s` (the mean grows with
/// `x`), or the nearer end, not reached, where the target lies beyond it.
fn bisect(
    mut lo: f64,
    mut hi: f64,
    target_s: f64,
    at: impl Fn(f64) -> StepTimeFit,
    mean: impl Fn(&StepTimeFit) -> Result<f64, SimError>,
) -> Result<StepTimeFit, SimError> {
    let ended = |x: f64| -> Result<StepTimeFit, SimError> {
        let fit = at(x);
        let mean_ttlt = mean(&fit)?;
        Ok(StepTimeFit {
            mean_ttlt,
            reached: (mean_ttlt - target_s).abs() <= TOLERANCE * target_s,
            ..fit
        })
    };
    let (at_lo, at_hi) = (ended(lo)?, ended(hi)?);
    if target_s <= at_lo.mean_ttlt {
        return Ok(at_lo);
    }
    if target_s >= at_hi.mean_ttlt {
        return Ok(at_hi);
    }
    for _ in 0..STEPS {
        let mid = (lo + hi) / 2.0;
        if mean(&at(mid))? < target_s {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    ended((lo + hi) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Cluster;

    fn requests() -> Vec<Request> {
        (0..30)
            .map(|id| Request {
                id,
                arrival: id as f64 * 0.5,
                embedding: std::sync::Arc::from(vec![1.0f32; 4]),
                prompt: String::new(),
                input_tokens: 100 + 20 * id as u32,
                output_tokens: 50 + 37 * (id as u32 % 7),
                previous_answer_tokens: None,
            })
            .collect()
    }

    fn runs(cfg: &EngineConfig) -> Runs<'_> {
        Runs {
            cfg,
            cluster: Cluster::SINGLE,
            history: 100,
            warm: &[],
        }
    }

    #[test]
    fn the_fit_recovers_the_attention_term_a_run_was_made_with() {
        let base = EngineConfig::preset("smollm2-135m-cpu").expect("preset");
        let truth = EngineConfig {
            attend_us: 7.5,
            ..base.clone()
        };
        let reqs = requests();
        let rules = Rules::default();
        let fcfs = RequestPolicySpec::FCFS;
        let measured = runs(&truth).simulate(fcfs, &rules, &reqs).expect("run");
        let target = measured.stats.outcomes.iter().map(|o| o.ttlt).sum::<f64>()
            / measured.stats.outcomes.len() as f64;
        let fit = fit_step_time(&runs(&base), fcfs, &rules, &reqs, target).expect("fit");
        assert!(fit.reached);
        assert!((fit.attend_us - 7.5).abs() < 0.01, "{fit:?}");
        assert_eq!(fit.beta_scale, 1.0);
        assert!((fit.mean_ttlt - target).abs() < 1e-3 * target, "{fit:?}");
    }

    #[test]
    fn an_engine_faster_than_its_fitted_terms_is_fitted_by_its_whole_speed() {
        let base = EngineConfig::preset("smollm2-135m-cpu").expect("preset");
        let truth = EngineConfig {
            beta_us: base.beta_us.map(|b| b * 0.5),
            ..base.clone()
        };
        let (reqs, rules) = (requests(), Rules::default());
        let fcfs = RequestPolicySpec::FCFS;
        let measured = runs(&truth).simulate(fcfs, &rules, &reqs).expect("run");
        let target = measured.stats.outcomes.iter().map(|o| o.ttlt).sum::<f64>()
            / measured.stats.outcomes.len() as f64;
        let fit = fit_step_time(&runs(&base), fcfs, &rules, &reqs, target).expect("fit");
        assert!(fit.reached, "{fit:?}");
        assert_eq!(fit.attend_us, 0.0);
        assert!((fit.beta_scale - 0.5).abs() < 0.01, "{fit:?}");
        let applied = fit.applied(&base);
        assert!((applied.beta_us[0] - base.beta_us[0] * fit.beta_scale).abs() < 1e-9);
    }

    #[test]
    fn a_target_out_of_reach_is_met_as_nearly_as_it_can_and_said_so() {
        let base = EngineConfig::preset("smollm2-135m-cpu").expect("preset");
        let (reqs, rules) = (requests(), Rules::default());
        let fcfs = RequestPolicySpec::FCFS;
        let fast = fit_step_time(&runs(&base), fcfs, &rules, &reqs, 0.001).expect("fit");
        assert_eq!((fast.attend_us, fast.beta_scale), (0.0, LEAST_SCALE));
        assert!(!fast.reached);
        let slow = fit_step_time(&runs(&base), fcfs, &rules, &reqs, 1e9).expect("fit");
        assert_eq!((slow.attend_us, slow.beta_scale), (MOST_ATTEND_US, 1.0));
        assert!(!slow.reached);
    }
}
