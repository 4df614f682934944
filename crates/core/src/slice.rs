//! How big a slice of a long kernel is: a device that cannot stop a running kernel can still be
//! preempted between slices of it (Hummingbird's idea; the OpenCL shim cuts a launch into
//! consecutive work-group ranges, docs/KERNEL-SLICING.md). Cutting is the shim's job; *whether*
//! to cut and *how small* is decided here, from each kernel's measured cost per work-group and
//! the preemption target, so the simulator and the shim decide alike.
//!
//! A kernel's first launch runs whole and is measured; a launch whose predicted length is within
//! the budget runs whole; a longer one is cut into the fewest equal slices of at most the budget,
//! never more than [`MAX_SLICES`].

use crate::time::Nanos;
use std::collections::HashMap;

/// The most slices one launch is cut into: each slice costs a launch and a gate, so a launch
/// predicted to take thousands of budgets is cut into slices longer than the budget instead.
pub const MAX_SLICES: u64 = 1024;

/// Weight of a new sample in a kernel's measured cost per work-group (exponential average).
const NEW_SAMPLE_PER_4: u64 = 1;

/// How one launch is to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlicePlan {
    /// In one piece: no history yet, or short enough.
    Whole,
    /// In consecutive ranges of `groups` work-groups each (the last may be shorter), `count` in
    /// all, each predicted to take `estimate`.
    Slices {
        /// Work-groups per slice.
        groups: u64,
        /// Number of slices.
        count: u64,
        /// Predicted length of one full slice.
        estimate: Nanos,
    },
}

/// How a launch over a grid of units (work-groups, or work-items where the kernel allows) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridPlan {
    /// In one piece, predicted to take `estimate` where the kernel ran before.
    Whole {
        /// The launch's predicted length.
        estimate: Option<Nanos>,
    },
    /// Cut along dimension `dim` (the one with the most units) into `count` ranges of `each`
    /// units of it (every other dimension whole; the last range may be shorter).
    Cut {
        /// The dimension cut.
        dim: usize,
        /// Units of `dim` per range.
        each: u64,
        /// Number of ranges.
        count: u64,
        /// Predicted length of one full range.
        estimate: Nanos,
        /// Predicted length of the whole launch.
        whole: Nanos,
    },
}

/// The slice planner of one process: each kernel's measured cost, and the budget.
#[derive(Clone, Debug)]
pub struct SlicePlanner {
    budget: Nanos,
    per_group: HashMap<u64, Nanos>,
}

impl SlicePlanner {
    /// A planner cutting launches into slices of at most `budget` (zero: never cut).
    pub fn new(budget: Nanos) -> SlicePlanner {
        SlicePlanner {
            budget,
            per_group: HashMap::new(),
        }
    }

    /// The budget a slice is held to.
    pub fn budget(&self) -> Nanos {
        self.budget
    }

    /// A launch of `kernel` (the driver's key for it) over `groups` work-groups: how it runs.
    pub fn plan(&self, kernel: u64, groups: u64) -> SlicePlan {
        let Some(&per_group) = self.per_group.get(&kernel) else {
            return SlicePlan::Whole;
        };
        if self.budget == Nanos::ZERO || groups < 2 || per_group == Nanos::ZERO {
            return SlicePlan::Whole;
        }
        if per_group.0.saturating_mul(groups) <= self.budget.0 {
            return SlicePlan::Whole;
        }
        // As many groups as fit the budget (at least one), unless that makes too many slices.
        let mut each = (self.budget.0 / per_group.0).max(1);
        if groups.div_ceil(each) > MAX_SLICES {
            each = groups.div_ceil(MAX_SLICES);
        }
        SlicePlan::Slices {
            groups: each,
            count: groups.div_ceil(each),
            estimate: Nanos(per_group.0.saturating_mul(each)),
        }
    }

    /// A launch of `kernel` over a grid of `units` (per dimension, unused ones 1): whole, or cut
    /// along its dimension with the most units into ranges that [`SlicePlanner::plan`] sizes.
    pub fn plan_grid(&self, kernel: u64, units: [u64; 3]) -> GridPlan {
        let total: u64 = units.iter().product();
        let cost = |n: u64| self.per_group(kernel).map(|c| Nanos(c.0.saturating_mul(n)));
        let whole = GridPlan::Whole {
            estimate: cost(total),
        };
        let SlicePlan::Slices {
            groups: per_slice, ..
        } = self.plan(kernel, total)
        else {
            return whole;
        };
        let dim = (0..3).max_by_key(|&d| units[d]).unwrap_or(0);
        let others = total / units[dim].max(1);
        let each = (per_slice / others.max(1)).max(1);
        let count = units[dim].div_ceil(each);
        if count < 2 {
            return whole;
        }
        GridPlan::Cut {
            dim,
            each,
            count,
            estimate: cost(each * others).unwrap_or_default(),
            whole: cost(total).unwrap_or_default(),
        }
    }

    /// A launch (or a slice) of `kernel` over `groups` work-groups took `took` on the device.
    pub fn observe(&mut self, kernel: u64, groups: u64, took: Nanos) {
        if groups == 0 {
            return;
        }
        let sample = took.0 / groups;
        let cost = self.per_group.entry(kernel).or_insert(Nanos(sample));
        cost.0 = (cost.0 * (4 - NEW_SAMPLE_PER_4) + sample * NEW_SAMPLE_PER_4) / 4;
    }

    /// The measured cost of one work-group of `kernel`, if it ran before.
    pub fn per_group(&self, kernel: u64) -> Option<Nanos> {
        self.per_group.get(&kernel).copied()
    }

    /// `kernel` is gone: forget its history.
    pub fn forget(&mut self, kernel: u64) {
        self.per_group.remove(&kernel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const US: u64 = 1_000;

    #[test]
    fn a_first_launch_runs_whole_and_is_measured() {
        let mut p = SlicePlanner::new(Nanos(500 * US));
        assert_eq!(p.plan(7, 1000), SlicePlan::Whole);
        p.observe(7, 1000, Nanos(10_000 * US));
        assert_eq!(p.per_group(7), Some(Nanos(10 * US)));
        assert_eq!(
            p.plan(7, 1000),
            SlicePlan::Slices {
                groups: 50,
                count: 20,
                estimate: Nanos(500 * US)
            }
        );
    }

    #[test]
    fn a_short_launch_a_single_group_or_no_budget_runs_whole() {
        let mut p = SlicePlanner::new(Nanos(500 * US));
        p.observe(1, 10, Nanos(100 * US));
        assert_eq!(p.plan(1, 50), SlicePlan::Whole, "500 us: within the budget");
        assert_eq!(p.plan(1, 1), SlicePlan::Whole, "one group cannot be cut");
        let mut off = SlicePlanner::new(Nanos::ZERO);
        off.observe(1, 10, Nanos(100 * US));
        assert_eq!(off.plan(1, 1_000_000), SlicePlan::Whole);
    }

    #[test]
    fn a_very_long_launch_is_cut_into_at_most_max_slices() {
        let mut p = SlicePlanner::new(Nanos(US));
        p.observe(1, 1, Nanos(US));
        match p.plan(1, 1_000_000) {
            SlicePlan::Slices { count, groups, .. } => {
                assert!(count <= MAX_SLICES, "{count}");
                assert!(groups * count >= 1_000_000);
            }
            SlicePlan::Whole => panic!("cut"),
        }
    }

    #[test]
    fn the_measured_cost_follows_new_launches() {
        let mut p = SlicePlanner::new(Nanos(US));
        p.observe(1, 10, Nanos(100 * US));
        p.observe(1, 10, Nanos(500 * US));
        assert_eq!(p.per_group(1), Some(Nanos(20 * US)), "a quarter of the way");
        p.forget(1);
        assert_eq!(p.per_group(1), None);
        assert_eq!(p.plan(1, 100), SlicePlan::Whole);
    }

    #[test]
    fn a_grid_is_cut_along_its_longest_dimension_whole_rows_at_a_time() {
        let mut p = SlicePlanner::new(Nanos(100 * US));
        assert_eq!(
            p.plan_grid(3, [8, 64, 1]),
            GridPlan::Whole { estimate: None },
            "no history"
        );
        p.observe(3, 1, Nanos(10 * US));
        // 8 groups a row of dimension 1 cost 80 us: one row fits the 100 us budget.
        assert_eq!(
            p.plan_grid(3, [8, 64, 1]),
            GridPlan::Cut {
                dim: 1,
                each: 1,
                count: 64,
                estimate: Nanos(80 * US),
                whole: Nanos(5_120 * US),
            }
        );
        // Rows wider than the budget are still cut one row at a time.
        assert!(matches!(
            p.plan_grid(3, [64, 16, 1]),
            GridPlan::Cut {
                dim: 0,
                each: 1,
                count: 64,
                ..
            }
        ));
        assert_eq!(
            p.plan_grid(3, [4, 2, 1]),
            GridPlan::Whole {
                estimate: Some(Nanos(80 * US))
            }
        );
    }

    proptest! {
        /// Every plan covers every group exactly once, in at most MAX_SLICES slices, each within
        /// the budget unless the slice count bound or a single group's cost forbids it.
        #[test]
        fn slices_cover_the_launch_and_respect_the_budget(
            per_group_us in 1u64..5_000,
            groups in 1u64..200_000,
            budget_us in 1u64..20_000,
        ) {
            let mut p = SlicePlanner::new(Nanos(budget_us * US));
            p.observe(9, 1, Nanos(per_group_us * US));
            match p.plan(9, groups) {
                SlicePlan::Whole => {
                    prop_assert!(groups < 2 || per_group_us * groups <= budget_us);
                }
                SlicePlan::Slices { groups: each, count, estimate } => {
                    prop_assert!((2..=MAX_SLICES).contains(&count));
                    prop_assert!(each * count >= groups && each * (count - 1) < groups);
                    prop_assert_eq!(estimate, Nanos(each * per_group_us * US));
                    let capped = groups.div_ceil((budget_us / per_group_us).max(1)) > MAX_SLICES;
                    prop_assert!(estimate.0 <= budget_us * US || each == 1 || capped);
                }
            }
        }
    }
}
