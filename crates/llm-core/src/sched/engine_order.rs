//! Ordering at the engine ([`Config::engine_order`](super::Config::engine_order)): an engine
//! with a priority queue of its own (vLLM's `--scheduling-policy priority`, which orders its
//! waiting requests by a `priority` number, lower first, and picks its KV-preemption victims by
//! it) is sent each request at once, up to a bound on what it holds, with a number that puts the
//! request where the policy would. The engine's continuous batching and KV admission then act on
//! the policy's order with no concurrency for the scheduler to guess; the bound only guards the
//! engine against overload.
//!
//! The engine reads the number once, when the request arrives, so the number must age by
//! itself: it is a virtual deadline, the request's arrival plus `horizon` times where its rank
//! stands against a reference request's (0 the best, 0.5 alike, towards 1 the worst), plus `horizon` times
//! where its tenant's service stands among the tenants' (0 the least served). A request is
//! therefore passed only by requests that arrive within twice `horizon` after it: none waits
//! for ever. Within that, requests arriving together are in the policy's order (FCFS, whose
//! ranks are all alike, stays FCFS). A TTFT deadline's guard caps the number, and the class is
//! its major part: a higher class always gets a lower number than a lower class.

/// How an engine that orders by priority is used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineOrder {
    /// Requests sent to one engine and not done, at most (running and waiting there).
    pub holds: usize,
    /// Seconds by which the worst-ranked request of the most-served tenant may be passed.
    pub horizon_s: f64,
}

impl Default for EngineOrder {
    fn default() -> EngineOrder {
        EngineOrder {
            holds: 256,
            horizon_s: 60.0,
        }
    }
}

/// The span of one class in the engine's numbers: milliseconds of virtual deadline (31 years).
pub const CLASS_SPAN_MS: i64 = 1_000_000_000_000;
/// Classes beyond ±this map like it (so the numbers stay within 64 bits).
pub const CLASS_LIMIT: i32 = 1000;

/// The engine's number for a request of `class` with virtual deadline `key_s` (seconds on the
/// scheduler's clock): `-class · CLASS_SPAN_MS + key in ms`, lower first.
pub fn engine_priority(class: i32, key_s: f64) -> i64 {
    let class = i64::from(class.clamp(-CLASS_LIMIT, CLASS_LIMIT));
    let ms = (key_s.max(0.0) * 1000.0)
        .round()
        .min((CLASS_SPAN_MS - 1) as f64) as i64;
    -class * CLASS_SPAN_MS + ms
}

/// Where `rank` stands against `reference` (the rank of a request of [`REFERENCE_TOKENS`](crate::job::REFERENCE_TOKENS) in
/// and out): `g(r) / (g(r) + g(reference))` with `g(r) = r + √(r² + 1)` (that is `e^asinh r`),
/// from 0 (far better) through 0.5 (alike) towards 1 (far worse). `g` is positive and strictly
/// increasing over every real rank, so the map keeps the policy's order whatever the ranks'
/// signs (the `priority` order's `-priority`, a Gittins index negated) and however the mix of
/// requests changes; for ranks far above 1 (SageSched's token costs) it is `r / (r + reference)`
/// within a part in `r²`.
pub(super) fn place(rank: f64, reference: f64) -> f64 {
    // e^asinh r, without cancellation for negative r.
    let g = |r: f64| {
        let root = r.hypot(1.0);
        if r < 0.0 { 1.0 / (root - r) } else { r + root }
    };
    if rank.is_nan() || rank == f64::INFINITY {
        return 1.0;
    }
    if rank == f64::NEG_INFINITY {
        return 0.0;
    }
    let (r, m) = (g(rank), g(reference));
    if !m.is_finite() {
        return 0.0;
    }
    if r.is_finite() { r / (r + m) } else { 1.0 }
}

/// A request's virtual deadline (see the module docs).
pub(super) fn virtual_deadline(
    order: &EngineOrder,
    arrival: f64,
    rank_place: f64,
    tenant_lead: f64,
    deadline_at: Option<f64>,
) -> f64 {
    let key = arrival + order.horizon_s * (rank_place + tenant_lead);
    deadline_at.map_or(key, |d| key.min(d.max(arrival)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_higher_class_always_gets_a_lower_number() {
        assert!(engine_priority(1, 1e9) < engine_priority(0, 0.0));
        assert!(engine_priority(0, 1e9) < engine_priority(-1, 0.0));
        assert_eq!(engine_priority(0, 1.2345), 1235);
        // Far classes map like the limit, and nothing overflows.
        assert_eq!(
            engine_priority(i32::MAX, 5.0),
            engine_priority(CLASS_LIMIT, 5.0)
        );
        assert!(engine_priority(i32::MIN, f64::INFINITY) > 0);
    }

    #[test]
    fn a_rank_is_placed_against_the_reference() {
        assert_eq!(place(10.0, 10.0), 0.5);
        assert!(
            (place(3000.0, 1000.0) - 0.75).abs() < 1e-6,
            "r / (r + m) for large ranks"
        );
        assert_eq!(place(0.0, 0.0), 0.5);
        assert_eq!(place(f64::INFINITY, 1.0), 1.0);
        assert_eq!(place(f64::NEG_INFINITY, 1.0), 0.0);
        // A negated index: the higher index (better) is placed lower.
        assert!(place(-1.0, -0.5) < 0.5 && place(-0.1, -0.5) > 0.5);
        // The `priority` order's ranks, -priority, against the standard class's 0.
        let (p5, p0, m5) = (place(-5.0, 0.0), place(0.0, 0.0), place(5.0, 0.0));
        assert!(p5 < p0 && p0 < m5, "priority 5, 0, -5: {p5} {p0} {m5}");
    }

    proptest::proptest! {
        /// Whatever the signs and magnitudes, a better rank is never placed after a worse one
        /// (beyond a rounding of the last bit), and the engine's number keeps that order for
        /// requests of one class arriving together (beyond a millisecond's rounding).
        #[test]
        fn the_rank_to_place_map_is_monotone_for_every_rank(
            a in -1e12f64..1e12,
            b in -1e12f64..1e12,
            small in -10.0f64..10.0,
            reference in -1e9f64..1e9,
            arrival in 0.0f64..1e6,
            class in -2000i32..2000,
        ) {
            let o = EngineOrder::default();
            for (x, y) in [(a, b), (small, b), (a, small), (small, small * 0.5)] {
                let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
                let (p, q) = (place(lo, reference), place(hi, reference));
                proptest::prop_assert!(
                    p <= q + 1e-12,
                    "{lo} at {p}, {hi} at {q} (reference {reference})"
                );
                proptest::prop_assert!((0.0..=1.0).contains(&p) && (0.0..=1.0).contains(&q));
                let key = |pl| virtual_deadline(&o, arrival, pl, 0.0, None);
                proptest::prop_assert!(
                    engine_priority(class, key(p)) <= engine_priority(class, key(q)) + 1
                );
            }
        }
    }

    #[test]
    fn a_later_arrival_passes_only_within_the_horizon() {
        let o = EngineOrder {
            holds: 8,
            horizon_s: 10.0,
        };
        let worst = virtual_deadline(&o, 0.0, 1.0, 0.0, None);
        assert!(virtual_deadline(&o, 9.9, 0.0, 0.0, None) < worst);
        assert!(virtual_deadline(&o, 10.1, 0.0, 0.0, None) > worst);
        // A deadline's guard caps it, never before its arrival.
        assert_eq!(virtual_deadline(&o, 3.0, 1.0, 0.0, Some(4.0)), 4.0);
        assert_eq!(virtual_deadline(&o, 3.0, 1.0, 0.0, Some(1.0)), 3.0);
        // The most-served tenant's requests go a horizon later.
        assert_eq!(virtual_deadline(&o, 0.0, 0.5, 1.0, None), 15.0);
    }
}
