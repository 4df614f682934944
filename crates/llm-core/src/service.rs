//! How long a request takes on an engine, as the aging guard, FastServe's levels and
//! `sagesched-time` need it: from a known step-time fit (the engine simulator), or measured
//! from answers as they end (the gateway, which cannot see inside its engines).
//!
//! Measured rates are moving averages of seconds and of tokens, divided, so long answers
//! weigh as much as they cost: an answer's service (admission to its end) over its output
//! tokens; a stream's prefill (admission to first byte) over its prompt tokens; its decoding
//! (first byte to last) over its output tokens after the first.

use crate::cost::StepFit;

/// The weight of each new answer in the measured rates' moving averages.
const SMOOTHING: f64 = 0.1;

/// How an answer was served, measured by a driver that cannot see the engine's steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Served {
    /// Prompt tokens (as the engine reported them, or estimated).
    pub prompt_tokens: u32,
    /// Output tokens.
    pub output_tokens: u32,
    /// Seconds from admission to the answer's end.
    pub total_s: f64,
    /// Seconds from admission to its first byte, for a stream (`None`: a complete answer).
    pub first_token_s: Option<f64>,
}

/// Seconds per token as moving averages of seconds and of tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Rate(Option<(f64, f64)>);

impl Rate {
    /// A sample of `tokens` taking `seconds`; one of no tokens says nothing of a rate.
    fn add(&mut self, seconds: f64, tokens: f64) {
        if !(tokens > 0.0 && seconds.is_finite() && seconds >= 0.0) {
            return;
        }
        self.0 = Some(match self.0 {
            Some((s, t)) => (s + SMOOTHING * (seconds - s), t + SMOOTHING * (tokens - t)),
            None => (seconds, tokens),
        });
    }

    /// Seconds per token, once measured.
    fn get(self) -> Option<f64> {
        self.0.filter(|(_, t)| *t > 0.0).map(|(s, t)| s / t)
    }
}

/// Rates measured from answers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rates {
    service: Rate,
    prefill: Rate,
    decode: Rate,
}

impl Rates {
    /// Learn from one answer.
    pub fn learn(&mut self, s: &Served) {
        let output = f64::from(s.output_tokens);
        self.service.add(s.total_s, output);
        if let Some(first) = s.first_token_s {
            self.prefill.add(first, f64::from(s.prompt_tokens));
            self.decode.add(s.total_s - first, (output - 1.0).max(0.0));
        }
    }

    /// Seconds of service per output token, once measured.
    pub fn per_output_token(&self) -> Option<f64> {
        self.service.get()
    }

    /// Seconds per prompt token and per output token of streamed answers, once both measured.
    pub fn prefill_decode(&self) -> Option<(f64, f64)> {
        self.prefill.get().zip(self.decode.get())
    }
}

/// Where service times come from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ServiceModel {
    /// A known step-time fit.
    Fit(StepFit),
    /// Measured from answers (starts unmeasured).
    Measured(Rates),
}

impl ServiceModel {
    /// A request's seconds alone on an engine, if known.
    pub fn solo_seconds(&self, input: u32, output: u32) -> Option<f64> {
        match self {
            ServiceModel::Fit(fit) => Some(fit.solo_seconds(input, output)),
            ServiceModel::Measured(r) => r.per_output_token().map(|s| s * f64::from(output)),
        }
    }

    /// Seconds from a request's admission to its first token on an otherwise idle engine, if
    /// known: its prefill (an SLO deadline's lead: `Arrival::ttft_slo`). Measured, the prefill
    /// rate is admission to first byte over prompt tokens, so it holds the first token already.
    pub fn first_token_seconds(&self, input: u32) -> Option<f64> {
        match self {
            ServiceModel::Fit(fit) => Some(fit.solo_seconds(input, 1)),
            ServiceModel::Measured(r) => r
                .prefill_decode()
                .map(|(prefill, _)| prefill * f64::from(input)),
        }
        .filter(|s| s.is_finite() && *s >= 0.0)
    }

    /// How long before a TTFT deadline of `slo` seconds a request of `input` prompt tokens must
    /// start: its first token's time alone, or half the deadline while that is unmeasured.
    /// `None` when the deadline cannot be met even alone (shorter than that time, or not a
    /// time): it then orders nothing, so a client cannot jump its lane by asking the impossible.
    pub fn slo_lead(&self, input: u32, slo: f64) -> Option<f64> {
        if !slo.is_finite() || slo < 0.0 {
            return None;
        }
        match self.first_token_seconds(input) {
            Some(alone) => (alone <= slo).then_some(alone),
            None => Some(slo / 2.0),
        }
    }

    /// Seconds per prompt token and per output token (`sagesched-time`), if known.
    pub fn linear_rates(&self) -> Option<(f64, f64)> {
        match self {
            ServiceModel::Fit(fit) => Some(fit.linear_rates()),
            ServiceModel::Measured(r) => r.prefill_decode(),
        }
    }

    /// Seconds of service a request that prefilled `input` tokens and decoded `generated` has
    /// had (FastServe's levels): under a fit its prefill and one step per token; measured, the
    /// rates (0 until they are known: every request then starts on the top level).
    pub fn service_seconds(&self, input: u32, generated: u32) -> f64 {
        match self {
            ServiceModel::Fit(fit) => fit.service_seconds(input, generated),
            ServiceModel::Measured(r) => r.prefill_decode().map_or(0.0, |(a, b)| {
                a * f64::from(input) + b * f64::from(generated)
            }),
        }
    }

    /// Learn from one answer (a fit learns nothing).
    pub fn learn(&mut self, served: &Served) {
        if let ServiceModel::Measured(r) = self {
            r.learn(served);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(prompt: u32, output: u32, total: f64, first: Option<f64>) -> Served {
        Served {
            prompt_tokens: prompt,
            output_tokens: output,
            total_s: total,
            first_token_s: first,
        }
    }

    #[test]
    fn measured_rates_follow_answers_and_ignore_empty_ones() {
        let mut m = ServiceModel::Measured(Rates::default());
        assert_eq!(m.solo_seconds(10, 10), None);
        for _ in 0..50 {
            m.learn(&served(100, 0, 5.0, Some(5.0)));
        }
        assert_eq!(m.solo_seconds(10, 10), None, "no rate from 0 tokens");
        for _ in 0..200 {
            // 1 ms a prompt token, 2 ms an output token after the first.
            m.learn(&served(100, 11, 0.1 + 0.02, Some(0.1)));
        }
        let (a, b) = m.linear_rates().expect("both measured");
        assert!(
            (a - 0.001).abs() < 1e-9 && (b - 0.002).abs() < 1e-9,
            "{a} {b}"
        );
        let per = 0.12 / 11.0;
        assert!((m.solo_seconds(0, 5).expect("measured") - 5.0 * per).abs() < 1e-9);
    }

    #[test]
    fn a_fit_knows_its_times_at_once() {
        let fit = StepFit {
            beta_us: [1000.0, 10.0, 5.0],
            attend_us: 0.0,
            chunk_tokens: 2048,
        };
        let m = ServiceModel::Fit(fit);
        assert_eq!(m.solo_seconds(100, 3), Some(fit.solo_seconds(100, 3)));
        assert_eq!(m.linear_rates(), Some((10e-6, 1005e-6)));
    }
}
