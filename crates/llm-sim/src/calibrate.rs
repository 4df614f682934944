//! Fitting the simulator to a real engine in the hour it was measured: the one step-time term
//! its inter-token gaps cannot resolve, β3 (µs per context token a decoding request attends),
//! chosen so that a replay of the very requests the engine served, under the policy it served
//! them by, gives the engine's measured mean TTLT. The other terms stay as fitted from the
//! gaps; the policies the fit did not see then test it.
//!
//! The mean TTLT of a replay grows with β3 (every step lasts longer and the queue with it), so
//! the fit is a bisection on it, each probe a whole simulated run.

use crate::Request;
use crate::engine::EngineConfig;
use crate::sim::{Rules, Runs, SimError};
use xsched_llm_core::RequestPolicySpec;

/// β3 is sought within 0 and this (µs a token: 100 times what a 2 048-token context at 5 µs
/// a step would cost an 8B model on a GPU).
const MOST_ATTEND_US: f64 = 1_000.0;
/// Bisection steps: the interval shrinks to `MOST_ATTEND_US / 2²⁵` (3·10⁻⁵ µs).
const STEPS: usize = 25;
/// A fit whose mean is this close to the target (relatively) reached it.
const TOLERANCE: f64 = 0.005;

/// What the fit found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttendFit {
    /// The fitted β3 (µs per attended token).
    pub attend_us: f64,
    /// The replay's mean TTLT with it (s).
    pub mean_ttlt: f64,
    /// Whether the mean is within 0.5 % of the target: one below the replay's mean with β3 = 0
    /// (or above it at [`MOST_ATTEND_US`]) is met as nearly as β3 can, and not reached.
    pub reached: bool,
}

/// The β3 of `runs`' engine under which `policy` replays `requests` with a mean TTLT of
/// `target_s`.
pub fn fit_attend(
    runs: &Runs,
    policy: RequestPolicySpec,
    rules: &Rules,
    requests: &[Request],
    target_s: f64,
) -> Result<AttendFit, SimError> {
    let mean = |attend_us: f64| -> Result<f64, SimError> {
        let cfg = EngineConfig {
            attend_us,
            ..runs.cfg.clone()
        };
        let run = Runs { cfg: &cfg, ..*runs }.simulate(policy, rules, requests)?;
        let ttlt: Vec<f64> = run.stats.outcomes.iter().map(|o| o.ttlt).collect();
        Ok(ttlt.iter().sum::<f64>() / ttlt.len().max(1) as f64)
    };
    let (mut lo, mut hi) = (0.0, MOST_ATTEND_US);
    let (at_lo, at_hi) = (mean(lo)?, mean(hi)?);
    if target_s <= at_lo || target_s >= at_hi {
        let (attend_us, mean_ttlt) = if target_s <= at_lo {
            (lo, at_lo)
        } else {
            (hi, at_hi)
        };
        return Ok(AttendFit {
            attend_us,
            mean_ttlt,
            reached: false,
        });
    }
    for _ in 0..STEPS {
        let mid = (lo + hi) / 2.0;
        if mean(mid)? < target_s {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let attend_us = (lo + hi) / 2.0;
    let mean_ttlt = mean(attend_us)?;
    Ok(AttendFit {
        attend_us,
        mean_ttlt,
        reached: (mean_ttlt - target_s).abs() <= TOLERANCE * target_s,
    })
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
        let fit = fit_attend(&runs(&base), fcfs, &rules, &reqs, target).expect("fit");
        assert!(fit.reached);
        assert!((fit.attend_us - 7.5).abs() < 0.01, "{fit:?}");
        assert!((fit.mean_ttlt - target).abs() < 1e-3 * target, "{fit:?}");
    }

    #[test]
    fn a_target_out_of_reach_is_met_as_nearly_as_it_can_and_said_so() {
        let base = EngineConfig::preset("smollm2-135m-cpu").expect("preset");
        let (reqs, rules) = (requests(), Rules::default());
        let fit =
            fit_attend(&runs(&base), RequestPolicySpec::FCFS, &rules, &reqs, 0.001).expect("fit");
        assert_eq!((fit.attend_us, fit.reached), (0.0, false));
    }
}
