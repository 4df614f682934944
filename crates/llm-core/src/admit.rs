//! Admission that respects KV memory: SageSched's hybridity carried from the order into
//! admission. We call the rule **expected-peak admission**.
//!
//! An engine admits a request by itself as soon as it has a free slot and KV blocks for the
//! prompt's first chunk (vLLM). The answer's tokens then need blocks step by step, and when
//! the pool runs dry the engine preempts a request by recompute: its KV is dropped and it
//! prefills again later. Admitting by rank makes this worse (a shortest-first order keeps
//! taking requests in while memory is tight, and the victims come back first), so where KV
//! binds it thrashes.
//!
//! The rule: admit a request to an engine only if the *expected* KV occupancy of the engine's
//! requests and the new one, projected forward step by step, never exceeds the engine's KV
//! capacity times a learned headroom. Each request's occupancy is its context (prompt and
//! generated tokens, plus half a block for rounding) growing one token a step until it ends;
//! when it ends is its predicted remaining-length distribution (the atoms beyond what it has
//! generated, renormalized), so a request contributes `P(still running at step t) × (context +
//! t)`. The expected occupancy is piecewise linear and rising between the atoms' ends, so its
//! peak is at one of them: one pass over every atom by descending end finds it (O(n log n)
//! for n atoms of all the engine's requests). A request the engine preempted counts with its
//! whole context (it will prefill it again).
//!
//! The headroom corrects the predictions from what the engine does: every preemption the engine
//! reports shrinks it by [`SHRINK`], every request that completes without a preemption on its
//! engine since the last one grows it by [`GROW`], within [`MIN_HEADROOM`]..[`MAX_HEADROOM`]
//! (from 1). Predictions that run short cause preemptions and tighten admission; predictions
//! that run long leave memory idle, which nothing preempts, so the headroom climbs past 1.
//! An engine with nothing admitted always takes the next request (nothing else could free
//! memory for it).

/// Multiplier of the headroom at each reported preemption.
pub const SHRINK: f64 = 0.97;
/// Added to the headroom per completion without a preemption.
pub const GROW: f64 = 0.001;
/// The least headroom.
pub const MIN_HEADROOM: f64 = 0.5;
/// The most headroom (over-commit when predictions run long).
pub const MAX_HEADROOM: f64 = 1.5;

/// One request's part in the projection: its context now and its remaining output as
/// (tokens, probability) atoms.
pub(crate) struct KvOccupant<I> {
    /// Tokens it holds (or will hold again) in KV now.
    pub context: f64,
    /// Its remaining output distribution.
    pub remaining: I,
}

/// The peak of the expected KV occupancy (tokens) of `occupants`, each growing a token a step
/// until it ends, `block` tokens to a KV block.
pub(crate) fn expected_peak<I: Iterator<Item = (f64, f64)>>(
    occupants: impl Iterator<Item = KvOccupant<I>>,
    block: u32,
    scratch: &mut Vec<(f64, f64, f64)>,
) -> f64 {
    let half_block = f64::from(block) / 2.0;
    // (end, probability, context) of every atom.
    scratch.clear();
    for o in occupants {
        let context = o.context + half_block;
        scratch.extend(o.remaining.map(|(d, p)| (d.max(1.0), p, context)));
    }
    scratch.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
    // Sweeping ends downwards: `a` = Σ P(running at d) × context, `b` = Σ P(running at d).
    let (mut a, mut b, mut peak) = (0.0f64, 0.0f64, 0.0f64);
    let mut k = 0;
    while k < scratch.len() {
        let end = scratch[k].0;
        while k < scratch.len() && scratch[k].0 == end {
            a += scratch[k].1 * scratch[k].2;
            b += scratch[k].1;
            k += 1;
        }
        // Just before the step `end`, each request still running holds context + end - 1.
        peak = peak.max(a + b * (end - 1.0));
    }
    peak
}

/// The learned headroom of one engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Headroom {
    value: f64,
    /// Whether a completion may grow it (no preemption since it last shrank... and then one
    /// completion per growth step).
    calm: bool,
}

impl Default for Headroom {
    fn default() -> Headroom {
        Headroom {
            value: 1.0,
            calm: true,
        }
    }
}

impl Headroom {
    /// Its value.
    pub fn get(&self) -> f64 {
        self.value
    }

    /// The engine preempted a request.
    pub(crate) fn preempted(&mut self) {
        self.value = (self.value * SHRINK).max(MIN_HEADROOM);
        self.calm = false;
    }

    /// A request completed on the engine; `pressed`: admission was held back by memory since
    /// the last completion (only then is more headroom worth anything).
    pub(crate) fn completed(&mut self, pressed: bool) {
        if self.calm && pressed {
            self.value = (self.value + GROW).min(MAX_HEADROOM);
        }
        self.calm = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(context: f64, end: f64) -> KvOccupant<std::iter::Once<(f64, f64)>> {
        KvOccupant {
            context,
            remaining: std::iter::once((end, 1.0)),
        }
    }

    #[test]
    fn known_lengths_give_the_exact_peak() {
        let mut s = Vec::new();
        // Alone: context 100 grows to 100 + 9 just before its 10th step.
        assert_eq!(
            expected_peak([point(100.0, 10.0)].into_iter(), 0, &mut s),
            109.0
        );
        // Two: at step 4 both run (100+4 + 50+4 = 158, well 100+3+50+3 just before the end of
        // the short one), after it only the long one (100 + 9).
        let two = [point(100.0, 10.0), point(50.0, 4.0)];
        assert_eq!(expected_peak(two.into_iter(), 0, &mut s), 156.0);
        let late = [point(10.0, 100.0), point(50.0, 4.0)];
        assert_eq!(expected_peak(late.into_iter(), 0, &mut s), 109.0);
    }

    #[test]
    fn a_spread_prediction_counts_each_end_by_its_probability() {
        let mut s = Vec::new();
        let spread = KvOccupant {
            context: 0.0,
            remaining: [(10.0, 0.5), (100.0, 0.5)].into_iter(),
        };
        // Just before 10: 9 with certainty; just before 100: 99 with probability 1/2.
        let peak = expected_peak(std::iter::once(spread), 0, &mut s);
        assert!((peak - 49.5).abs() < 1e-12, "{peak}");
        // Blocks round up by half a block each.
        assert_eq!(
            expected_peak([point(0.0, 1.0)].into_iter(), 16, &mut s),
            8.0
        );
    }

    #[test]
    fn the_headroom_shrinks_at_preemptions_and_grows_only_when_memory_held_requests_back() {
        let mut h = Headroom::default();
        h.completed(false);
        assert_eq!(h.get(), 1.0);
        h.preempted();
        assert!((h.get() - SHRINK).abs() < 1e-12);
        h.completed(true);
        assert!(
            (h.get() - SHRINK).abs() < 1e-12,
            "the first completion after only calms"
        );
        h.completed(true);
        assert!((h.get() - SHRINK - GROW).abs() < 1e-12);
        for _ in 0..100 {
            h.preempted();
        }
        assert_eq!(h.get(), MIN_HEADROOM);
        for _ in 0..10_000 {
            h.completed(true);
        }
        assert_eq!(h.get(), MAX_HEADROOM);
    }
}
