//! What a run predicts for each arrival: the history predictor or the length model (learning
//! online from every completed request), the prior, the truth, or the truth with noise, as the
//! policy's `PredictionSource` says.

use crate::Request;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use xsched_llm_core::predict::{Features, Predictor, prior};
use xsched_llm_core::{PredictionSource, SizeDistribution};

/// Predictions as a policy's source makes them.
pub(super) struct Oracle {
    pub(super) source: PredictionSource,
    /// The learner (`None` where the policy learns nothing, or the history holds nothing).
    pub(super) history: Option<Box<dyn Predictor>>,
}

impl Oracle {
    pub(super) fn lengths(&self, r: &Request) -> Option<SizeDistribution> {
        match self.source {
            PredictionSource::None | PredictionSource::History | PredictionSource::Model => {
                self.history.as_ref().map(|h| h.predict(&features(r)))
            }
            PredictionSource::Prior => Some(prior()),
            PredictionSource::Truth => SizeDistribution::point(f64::from(r.output_tokens.max(1))),
            PredictionSource::Noisy(sigma) => Some(noisy_truth(r, sigma)),
        }
    }

    pub(super) fn learn(&mut self, r: &Request) {
        if let Some(h) = self.history.as_mut() {
            h.learn(features(r), r.output_tokens);
        }
    }
}

fn features(r: &Request) -> Features {
    Features {
        embedding: r.embedding.clone(),
        prompt: r.prompt.as_str().into(),
        previous_answer_tokens: r.previous_answer_tokens,
    }
}

/// The noisy-oracle prediction: ten samples of the true length × `exp(N(0, σ²))` (Box–Muller,
/// seeded by the request id, so runs repeat); one atom at the truth when σ is 0.
fn noisy_truth(req: &Request, sigma: f64) -> SizeDistribution {
    let truth = f64::from(req.output_tokens.max(1));
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
