//! One kernel launch as the application asked for it: `clEnqueueNDRangeKernel`'s own arguments,
//! and the shape read from them (its sizes, and the units a cut may not split).

use cl3::types::{cl_kernel, cl_uint};
use xsched_backend_opencl::cl3;

/// `clEnqueueNDRangeKernel`'s own arguments.
pub(crate) struct NdRange {
    pub(crate) kernel: cl_kernel,
    pub(crate) work_dim: cl_uint,
    pub(crate) offset: *const usize,
    pub(crate) global: *const usize,
    pub(crate) local: *const usize,
}

/// A launch's shape, read from its arguments.
pub(super) struct Shape {
    pub(super) dims: usize,
    pub(super) global: [usize; 3],
    pub(super) local: Option<[usize; 3]>,
    pub(super) offset_zero: bool,
}

impl Shape {
    /// # Safety
    /// `nd`'s pointers are NULL or point to `work_dim` sizes.
    pub(super) unsafe fn read(nd: &NdRange) -> Option<Shape> {
        let dims = nd.work_dim as usize;
        if !(1..=3).contains(&dims) || nd.global.is_null() {
            return None;
        }
        // SAFETY: `work_dim` sizes each, by the caller's contract.
        let at = |p: *const usize| unsafe { std::slice::from_raw_parts(p, dims) };
        let mut global = [1; 3];
        global[..dims].copy_from_slice(at(nd.global));
        let local = (!nd.local.is_null()).then(|| {
            let mut l = [1; 3];
            l[..dims].copy_from_slice(at(nd.local));
            l
        });
        let offset_zero = nd.offset.is_null() || at(nd.offset).iter().all(|&o| o == 0);
        Some(Shape {
            dims,
            global,
            local,
            offset_zero,
        })
    }

    /// The units a cut may not split, in each dimension: work-groups, where the launch has a
    /// local size that divides it; single work-items, where it has none and `items_independent`
    /// (no work-item depends on its group); else `None`.
    pub(super) fn units(&self, items_independent: bool) -> Option<[usize; 3]> {
        let Some(local) = self.local else {
            return items_independent.then_some(self.global);
        };
        let mut g = [1; 3];
        for d in 0..3 {
            if local[d] == 0 || !self.global[d].is_multiple_of(local[d]) {
                return None;
            }
            g[d] = self.global[d] / local[d];
        }
        Some(g)
    }

    /// The work-items in one unit of dimension `d`.
    pub(super) fn unit(&self, d: usize) -> usize {
        self.local.map_or(1, |l| l[d])
    }
}
