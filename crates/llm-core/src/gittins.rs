//! The Gittins index of a discrete distribution of remaining work, given the work attained.
//!
//! For a job whose total size S takes values s₁ < … < sₙ with probabilities pᵢ and that has
//! received a units of service, the Gittins index is
//! `G(a) = max over Δ > 0 of P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]`:
//! the best completion probability per unit of expected work over any service quantum.
//! Serving the highest index minimizes mean completion time for known size distributions; a
//! single atom gives `1 / (s − a)`, i.e. SRPT. The maximum is attained at an atom, so one
//! ascending pass over the atoms beyond `a` computes it (O(n)); see ../shared/docs/PAPERS.md §3.

/// A discrete distribution of job size.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeDistribution {
    /// (size, probability) by ascending size; probabilities sum to 1.
    atoms: Vec<(f64, f64)>,
}

impl SizeDistribution {
    /// From samples of equal weight (sorted and merged here). `None` if there are none or any
    /// is not a finite positive number.
    pub fn from_samples(samples: &[f64]) -> Option<SizeDistribution> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite() || *s <= 0.0) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let w = 1.0 / sorted.len() as f64;
        let mut atoms: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
        for s in sorted {
            match atoms.last_mut() {
                Some(last) if last.0 == s => last.1 += w,
                _ => atoms.push((s, w)),
            }
        }
        Some(SizeDistribution { atoms })
    }

    /// From samples, ignoring any that are not finite and positive; a point at `fallback` (at
    /// least 1) when none remain. Never fails.
    pub fn from_valid_samples(samples: &[f64], fallback: f64) -> SizeDistribution {
        let valid: Vec<f64> = samples
            .iter()
            .copied()
            .filter(|s| s.is_finite() && *s > 0.0)
            .collect();
        SizeDistribution::from_samples(&valid).unwrap_or_else(|| SizeDistribution {
            atoms: vec![(fallback.max(1.0), 1.0)],
        })
    }

    /// The same probabilities over sizes `f(s)`; `f` should be increasing and positive (values
    /// that are not finite and positive are dropped, and the rest renormalized).
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Option<SizeDistribution> {
        let mut atoms: Vec<(f64, f64)> = self
            .atoms
            .iter()
            .map(|&(s, p)| (f(s), p))
            .filter(|(s, _)| s.is_finite() && *s > 0.0)
            .collect();
        atoms.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: f64 = atoms.iter().map(|(_, p)| p).sum();
        if atoms.is_empty() || total <= 0.0 {
            return None;
        }
        atoms.iter_mut().for_each(|a| a.1 /= total);
        Some(SizeDistribution { atoms })
    }

    /// A single known size.
    pub fn point(size: f64) -> Option<SizeDistribution> {
        SizeDistribution::from_samples(&[size])
    }

    /// The atoms, ascending.
    pub fn atoms(&self) -> &[(f64, f64)] {
        &self.atoms
    }

    /// The mean size.
    pub fn mean(&self) -> f64 {
        self.atoms.iter().map(|(s, p)| s * p).sum()
    }

    /// The largest size with positive probability.
    pub fn max(&self) -> f64 {
        self.atoms.last().map_or(0.0, |a| a.0)
    }

    /// The Gittins index after `attained` units of service. A job that has outlived its
    /// distribution's support (`attained >= max`) has unknown remaining work; the index then
    /// treats it as needing as much again as it has received (`1 / max(attained, 1)`), so a
    /// long-running job loses priority gradually instead of jumping to the front.
    pub fn gittins(&self, attained: f64) -> f64 {
        let beyond = self.atoms.iter().position(|(s, _)| *s > attained);
        let Some(j) = beyond else {
            return 1.0 / attained.max(1.0);
        };
        let tail = &self.atoms[j..];
        let total: f64 = tail.iter().map(|(_, p)| p).sum();
        let mut mass = 0.0; // M_k
        let mut work_below = 0.0; // Σ_{i ≤ k} pᵢ (sᵢ − a)
        let mut best = 0.0f64;
        for &(s, p) in tail {
            mass += p;
            work_below += p * (s - attained);
            let expected = work_below + (s - attained) * (total - mass);
            if expected > 0.0 {
                best = best.max(mass / expected);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, evaluated directly over a fine grid of quanta plus every atom.
    fn brute_force(d: &SizeDistribution, a: f64) -> f64 {
        let alive: Vec<(f64, f64)> = d.atoms().iter().copied().filter(|(s, _)| *s > a).collect();
        let total: f64 = alive.iter().map(|(_, p)| p).sum();
        let mut quanta: Vec<f64> = alive.iter().map(|(s, _)| s - a).collect();
        let top = d.max() - a;
        quanta.extend((1..=400).map(|i| top * f64::from(i) / 400.0));
        quanta
            .into_iter()
            .filter(|q| *q > 0.0)
            .map(|q| {
                let done: f64 = alive
                    .iter()
                    .filter(|(s, _)| s - a <= q)
                    .map(|(_, p)| p)
                    .sum();
                let work: f64 = alive.iter().map(|(s, p)| p * (s - a).min(q)).sum();
                (done / total) / (work / total)
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn a_single_atom_is_srpt() {
        let d = SizeDistribution::point(100.0).expect("valid");
        assert!((d.gittins(0.0) - 0.01).abs() < 1e-12);
        assert!((d.gittins(60.0) - 1.0 / 40.0).abs() < 1e-12);
        let short = SizeDistribution::point(10.0).expect("valid");
        assert!(short.gittins(0.0) > d.gittins(0.0), "shorter first");
    }

    #[test]
    fn outliving_the_support_falls_back_gradually() {
        let d = SizeDistribution::from_samples(&[10.0, 20.0]).expect("valid");
        assert_eq!(d.gittins(20.0), 1.0 / 20.0);
        assert!(d.gittins(40.0) < d.gittins(20.0));
        assert!(SizeDistribution::from_samples(&[]).is_none());
        assert!(SizeDistribution::from_samples(&[1.0, f64::NAN]).is_none());
    }

    proptest! {
        #[test]
        fn matches_the_brute_force_definition(
            sizes in proptest::collection::vec(1u32..2000, 1..12),
            attained_frac in 0.0f64..0.99,
        ) {
            let samples: Vec<f64> = sizes.iter().map(|&s| f64::from(s)).collect();
            let d = SizeDistribution::from_samples(&samples).expect("valid");
            let a = d.max() * attained_frac;
            let fast = d.gittins(a);
            let slow = brute_force(&d, a);
            prop_assert!((fast - slow).abs() <= 1e-9 * fast.max(1.0), "{} vs {}", fast, slow);
        }
    }
}
