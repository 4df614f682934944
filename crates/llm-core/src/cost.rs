//! What serving a request costs: SageSched's resource-bound cost `C = O²/2 + I·O`, and an
//! engine's step-time fit, from which a request's time alone on the engine follows.

/// The cost of serving `o` output tokens after an `i`-token prompt: `O²/2 + I·O` (SageSched:
/// both the KV memory held over the decode steps and the compute reduce to it).
pub fn cost(i: u32, o: u32) -> f64 {
    let (i, o) = (f64::from(i), f64::from(o));
    o * o / 2.0 + i * o
}

/// An engine's step time `β0 + β1·prefill + β2·decode + β3·attended` (µs), and the prefill
/// chunk a step takes at most (its token budget).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepFit {
    /// `[β0, β1, β2]`: µs per step, per prefilled token, per decoded token.
    pub beta_us: [f64; 3],
    /// β3: µs per context token a decoding request attends.
    pub attend_us: f64,
    /// Tokens a step processes at most (`max_num_batched_tokens`).
    pub chunk_tokens: u32,
}

impl StepFit {
    /// Seconds a request takes on an otherwise empty engine: its prompt in chunks of the token
    /// budget, then one decode step per further token, each attending the context so far.
    pub fn solo_seconds(&self, input: u32, output: u32) -> f64 {
        let [b0, b1, b2] = self.beta_us;
        let (i, decodes) = (f64::from(input), f64::from(output.saturating_sub(1)));
        let chunks = f64::from(input.div_ceil(self.chunk_tokens.max(1)).max(1));
        let prefill = chunks * b0 + b1 * i;
        // Decode k (1-based) attends the prompt and k tokens.
        let attended = decodes * i + decodes * (decodes + 1.0) / 2.0;
        (prefill + decodes * (b0 + b2) + self.attend_us * attended) / 1e6
    }

    /// Seconds of service FastServe counts for a request that prefilled `input` tokens and
    /// decoded `generated`: its prefill, and one step per decoded token.
    pub fn service_seconds(&self, input: u32, generated: u32) -> f64 {
        (self.beta_us[1] * f64::from(input) + self.beta_us[0] * f64::from(generated)) / 1e6
    }

    /// Seconds per prompt token and per output token of the linear model `a·I + b·O`
    /// (`sagesched-time` under a fit): a prefilled token's β1, a decoded token's step.
    pub fn linear_rates(&self) -> (f64, f64) {
        (
            self.beta_us[1] / 1e6,
            (self.beta_us[0] + self.beta_us[2]) / 1e6,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_quadratic_in_output_and_linear_in_input() {
        assert_eq!(cost(0, 10), 50.0);
        assert_eq!(cost(100, 10), 1050.0);
        assert_eq!(cost(100, 0), 0.0);
    }

    #[test]
    fn time_alone_counts_chunks_steps_and_attention() {
        let fit = StepFit {
            beta_us: [1000.0, 10.0, 5.0],
            attend_us: 0.5,
            chunk_tokens: 100,
        };
        // 250 prompt tokens: 3 chunks; 2 decodes attending 251 and 252 tokens.
        let want = (3.0 * 1000.0 + 2500.0 + 2.0 * 1005.0 + 0.5 * 503.0) / 1e6;
        assert!((fit.solo_seconds(250, 3) - want).abs() < 1e-12);
        assert!((fit.service_seconds(10, 2) - 2100.0 / 1e6).abs() < 1e-15);
    }
}
