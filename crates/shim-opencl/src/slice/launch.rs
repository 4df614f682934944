//! A kernel launch on a scheduled queue with slicing on: the kernel's last launch measured (the
//! device's own start and end), then this one run whole, or cut into consecutive work-group
//! ranges of its dimension with the most groups, each range a launch of the twin kernel behind a
//! gate of its own and one XQueue command, so the XQueue may stop between any two. The
//! application gets the last range's event, which completes after every range (in-order queue).

use super::calls::{Measured, device_time, enqueue, gated, raw_list, set_sizes, whole_now};
use super::error::SliceError;
use super::objects::{AppKernel, Program};
use super::shape::{NdRange, Shape};
use super::state::{Slicing, lock, slicing};
use super::twin;
use crate::gate::{self, Call};
use crate::state::scheduled;
use cl3::types::{cl_event, cl_int, cl_kernel};
use std::sync::Arc;
use xsched_backend_opencl::{Event, OclQueue, cl3};
use xsched_core::slice::GridPlan;
use xsched_core::{CommandMeta, Nanos};
use xsched_interpose::guard;
use xsched_runtime::XQueue;

/// How this launch runs.
enum Plan {
    /// As the application asked, with this predicted length if known.
    Whole(Option<Nanos>),
    /// Cut into ranges of the twin.
    Cut(Cut),
}

/// One cut launch: `count` ranges of `each` groups of dimension `dim`, launches of `twin`, each
/// predicted to take about `estimate`.
struct Cut {
    twin: usize,
    dim: usize,
    each: usize,
    count: usize,
    estimate: Nanos,
}

/// Launch through slicing when it is on and the queue is scheduled and the kernel is one it
/// knows; `None` leaves the launch to the ordinary path.
///
/// # Safety
/// The call's and `nd`'s pointers are as OpenCL allows.
pub(crate) unsafe fn enqueue_kernel(call: &Call, nd: &NdRange) -> Option<cl_int> {
    let s = slicing()?;
    let xqueue = scheduled(call.queue)?;
    // SAFETY: the caller's pointers, as OpenCL allows.
    let shape = unsafe { Shape::read(nd) }?;
    if call.wait_list.is_null() != (call.num_events == 0) || !s.knows(nd.kernel) {
        return None;
    }
    let waits = if call.num_events == 0 {
        Vec::new()
    } else {
        // SAFETY: non-null with `num_events` entries (checked above; the caller's contract).
        unsafe { std::slice::from_raw_parts(call.wait_list, call.num_events as usize) }.to_vec()
    };
    // SAFETY: the application's arguments, unchanged.
    let whole = |list: &[cl_event]| unsafe { enqueue(call.queue, nd.kernel, nd, &shape, list) };
    // SAFETY: the call's pointers are passed on unchanged.
    let forward = || unsafe { gate::forward(call, &|n, l| whole(raw_list(n, l))) };
    Some(guard::call_made(
        "OpenCL",
        |made| s.launch(&xqueue, call, nd, &shape, &waits, made),
        &forward,
    ))
}

impl Slicing {
    fn knows(&self, kernel: cl_kernel) -> bool {
        lock(&self.kernels).contains_key(&(kernel as usize))
    }

    /// Measure, plan and enqueue, under the objects' locks (programs, then kernels).
    fn launch(
        &self,
        xqueue: &Arc<XQueue<OclQueue>>,
        call: &Call,
        nd: &NdRange,
        shape: &Shape,
        waits: &[cl_event],
        made: &dyn Fn(cl_int) -> cl_int,
    ) -> cl_int {
        let mut programs = lock(&self.programs);
        let mut kernels = lock(&self.kernels);
        let key = nd.kernel as usize;
        let Some(kernel) = kernels.get_mut(&key) else {
            return made(whole_now(call, nd, shape, waits));
        };
        self.measure(key, kernel);
        let plan = match programs.get_mut(&kernel.program) {
            Some(program) => self.plan(key, program, kernel, shape),
            None => Plan::Whole(None),
        };
        match plan {
            Plan::Whole(estimate) => {
                launch_whole(xqueue, call, nd, shape, waits, estimate, kernel, made)
            }
            Plan::Cut(cut) => launch_cut(xqueue, call, nd, shape, waits, &cut, kernel, made),
        }
    }

    /// The kernel's last launch, measured if it ended.
    fn measure(&self, key: usize, kernel: &mut AppKernel) {
        let Some((event, groups)) = &kernel.measuring else {
            return;
        };
        match device_time(event) {
            Measured::Pending => {}
            Measured::Took(took) => {
                lock(&self.planner).observe(key as u64, *groups, took);
                kernel.measuring = None;
            }
            Measured::Unknown => kernel.measuring = None,
        }
    }

    fn plan(
        &self,
        key: usize,
        program: &mut Program,
        kernel: &mut AppKernel,
        shape: &Shape,
    ) -> Plan {
        let independent = program.source.as_ref().is_ok_and(|t| t.items_independent);
        let Some(units) = shape.units(independent) else {
            return Plan::Whole(None);
        };
        let (dim, each, count, estimate, whole) =
            match lock(&self.planner).plan_grid(key as u64, units.map(|u| u as u64)) {
                GridPlan::Whole { estimate } => return Plan::Whole(estimate),
                GridPlan::Cut {
                    dim,
                    each,
                    count,
                    estimate,
                    whole,
                } => (dim, each as usize, count as usize, estimate, whole),
            };
        let refusal = if shape.offset_zero {
            twin::kernel_twin(program, kernel).err()
        } else {
            Some(SliceError::NonZeroOffset)
        };
        if let Some(why) = refusal {
            if !kernel.refusal_said {
                kernel.refusal_said = true;
                let name = String::from_utf8_lossy(&kernel.name);
                tracing::warn!("kernel {name} is long but runs whole: {why}");
            }
            return Plan::Whole(Some(whole));
        }
        if !kernel.cut_said {
            kernel.cut_said = true;
            let name = String::from_utf8_lossy(&kernel.name);
            tracing::info!(
                "kernel {name}: a launch of {units:?} units cut into {count} ranges of {each} \
                 along dimension {dim}"
            );
        }
        match &kernel.twin {
            Some(Ok(twin)) => Plan::Cut(Cut {
                twin: *twin,
                dim,
                each,
                count,
                estimate,
            }),
            _ => Plan::Whole(Some(whole)),
        }
    }
}

/// The launch as the application asked, behind one gate; measured if nothing is being.
#[allow(clippy::too_many_arguments)]
fn launch_whole(
    xqueue: &XQueue<OclQueue>,
    call: &Call,
    nd: &NdRange,
    shape: &Shape,
    waits: &[cl_event],
    estimate: Option<Nanos>,
    kernel: &mut AppKernel,
    made: &dyn Fn(cl_int) -> cl_int,
) -> cl_int {
    let meta = CommandMeta::with_estimate(estimate.unwrap_or_default());
    // SAFETY: the application's arguments, unchanged.
    let real = |list: &[cl_event]| unsafe { enqueue(call.queue, nd.kernel, nd, shape, list) };
    match gated(xqueue, waits, real, meta) {
        Err(e) => {
            tracing::warn!("{e}: launch forwarded unscheduled");
            made(whole_now(call, nd, shape, waits))
        }
        Ok(Err(code)) => made(code),
        Ok(Ok(event)) => {
            made(0);
            if kernel.measuring.is_none() {
                let units = shape.units(true).map_or(1, |g| g.iter().product::<usize>());
                kernel.measuring = event.retained().ok().map(|e| (e, units as u64));
            }
            // SAFETY: `event_out` is the application's, NULL or writable.
            unsafe { gate::give(event, call.event_out) };
            0
        }
    }
}

/// The launch cut into `cut.count` ranges of the twin, each behind its own gate. A twin the
/// library refuses at the first range is given up and the launch runs whole; a range refused
/// later (ranges before it already enqueued, which cannot be taken back) fails the call.
#[allow(clippy::too_many_arguments)]
fn launch_cut(
    xqueue: &XQueue<OclQueue>,
    call: &Call,
    nd: &NdRange,
    shape: &Shape,
    waits: &[cl_event],
    cut: &Cut,
    kernel: &mut AppKernel,
    made: &dyn Fn(cl_int) -> cl_int,
) -> cl_int {
    if let Err(code) = set_sizes(cut.twin, nd.kernel, shape) {
        kernel.drop_twin(SliceError::Sizes(code));
        return launch_whole(xqueue, call, nd, shape, waits, None, kernel, made);
    }
    let mut last = None;
    for i in 0..cut.count {
        let w = if i == 0 { waits } else { &[] };
        match enqueue_range(xqueue, call, nd, shape, cut, i, w) {
            Ok(event) => {
                if i == 0 {
                    made(0);
                }
                last = Some(event);
            }
            Err(why) if i == 0 => {
                kernel.drop_twin(SliceError::FirstRange(Box::new(why)));
                return launch_whole(xqueue, call, nd, shape, waits, None, kernel, made);
            }
            Err(why) => {
                tracing::error!("range {i} of {} of a cut launch: {why}", cut.count);
                return made(opencl_sys::CL_OUT_OF_RESOURCES);
            }
        }
    }
    let Some(event) = last else { return made(0) };
    if kernel.measuring.is_none() {
        let others = shape
            .units(true)
            .map_or(1, |g| g.iter().product::<usize>() / g[cut.dim]);
        kernel.measuring = event
            .retained()
            .ok()
            .map(|e| (e, (cut.each * others) as u64));
    }
    // SAFETY: `event_out` is the application's, NULL or writable.
    unsafe { gate::give(event, call.event_out) };
    0
}

/// Range `i` of a cut launch, enqueued behind its gate and submitted; its event.
fn enqueue_range(
    xqueue: &XQueue<OclQueue>,
    call: &Call,
    nd: &NdRange,
    shape: &Shape,
    cut: &Cut,
    i: usize,
    waits: &[cl_event],
) -> Result<Event, SliceError> {
    let unit = shape.unit(cut.dim);
    let units = shape.global[cut.dim] / unit;
    let start = i * cut.each;
    let mut offset = [0usize; 3];
    offset[cut.dim] = start * unit;
    let mut global = shape.global;
    global[cut.dim] = cut.each.min(units - start) * unit;
    let range = Shape {
        dims: shape.dims,
        global,
        local: shape.local,
        offset_zero: start == 0,
    };
    let twin = cut.twin as cl_kernel;
    let ranged = NdRange {
        kernel: twin,
        work_dim: nd.work_dim,
        offset: offset.as_ptr(),
        global: std::ptr::null(),
        local: std::ptr::null(),
    };
    // SAFETY: the application's queue, the twin kernel (the application's arguments), and a
    // range inside the launch's grid.
    let real = |list: &[cl_event]| unsafe { enqueue(call.queue, twin, &ranged, &range, list) };
    match gated(
        xqueue,
        waits,
        real,
        CommandMeta::with_estimate(cut.estimate),
    ) {
        Ok(Ok(event)) => Ok(event),
        Ok(Err(code)) => Err(SliceError::Enqueue(code)),
        Err(e) => Err(SliceError::Gate(e)),
    }
}
