//! What slicing knows for the whole process, and how the shim's hooks tell it: the planner, the
//! application's programs and kernels (`objects.rs`), and the queue property slicing needs.

use super::binaries;
use super::error::SliceError;
use super::objects::{AppKernel, Program};
use opencl_sys::{
    CL_QUEUE_PROFILING_ENABLE, CL_QUEUE_PROPERTIES, cl_command_queue_properties,
    cl_queue_properties,
};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use xsched_core::Nanos;
use xsched_core::slice::SlicePlanner;

/// What slicing knows, for the whole process.
pub(crate) struct Slicing {
    pub(super) planner: Mutex<SlicePlanner>,
    pub(super) programs: Mutex<HashMap<usize, Program>>,
    pub(super) kernels: Mutex<HashMap<usize, AppKernel>>,
}

static SLICING: OnceLock<Option<Slicing>> = OnceLock::new();

/// Slicing, if `XSCHED_SLICE_US` turns it on (a bad value is said once and turns it off).
pub(crate) fn slicing() -> Option<&'static Slicing> {
    SLICING
        .get_or_init(|| {
            std::env::var_os("XSCHED_SLICE_US")?;
            // The shim's logging starts with it: a bad value must be said, not lost.
            let _ = crate::state::shim();
            from_env()
        })
        .as_ref()
}

/// Slicing as `XSCHED_SLICE_US` sets it.
fn from_env() -> Option<Slicing> {
    match budget_from_env() {
        Ok(Some(budget)) => {
            tracing::info!("xsched OpenCL shim: kernel slicing on, slices of at most {budget}");
            Some(Slicing {
                planner: Mutex::new(SlicePlanner::new(budget)),
                programs: Mutex::new(HashMap::new()),
                kernels: Mutex::new(HashMap::new()),
            })
        }
        Ok(None) => None,
        Err(why) => {
            tracing::error!("XSCHED_SLICE_US: {why}; kernel slicing off");
            None
        }
    }
}

/// The slice budget `XSCHED_SLICE_US` names (`None`: unset or 0, slicing off).
fn budget_from_env() -> Result<Option<Nanos>, SliceError> {
    let Ok(text) = std::env::var("XSCHED_SLICE_US") else {
        return Ok(None);
    };
    let us: u64 = text
        .trim()
        .parse()
        .map_err(|_| SliceError::Budget(text.clone()))?;
    Ok((us > 0).then(|| Nanos(us.saturating_mul(1_000))))
}

/// `CL_QUEUE_PROFILING_ENABLE` where slicing is on (it measures launches by the device's own
/// times), else nothing: what a new queue's properties gain.
pub(crate) fn profiling() -> cl_command_queue_properties {
    if slicing().is_some() {
        CL_QUEUE_PROFILING_ENABLE
    } else {
        0
    }
}

/// A copy of a `clCreateCommandQueueWithProperties` list with profiling on, where slicing is on
/// (`None`: use the caller's list as it is).
///
/// # Safety
/// `list` is NULL or a zero-terminated list of name, value pairs.
pub(crate) unsafe fn with_profiling(
    list: *const cl_queue_properties,
) -> Option<Vec<cl_queue_properties>> {
    slicing()?;
    let mut out = Vec::new();
    let mut found = false;
    let mut i = 0;
    while !list.is_null() {
        // SAFETY: pairs up to the terminating 0, by the caller's contract.
        let name = unsafe { *list.add(i) };
        if name == 0 {
            break;
        }
        // SAFETY: as above: every name has its value.
        let mut value = unsafe { *list.add(i + 1) };
        if name == cl_queue_properties::from(CL_QUEUE_PROPERTIES) {
            value |= CL_QUEUE_PROFILING_ENABLE;
            found = true;
        }
        out.extend([name, value]);
        i += 2;
    }
    if !found {
        out.extend([
            cl_queue_properties::from(CL_QUEUE_PROPERTIES),
            CL_QUEUE_PROFILING_ENABLE,
        ]);
    }
    out.push(0);
    Some(out)
}

/// A lock that a panic elsewhere does not make unusable (the data stays consistent: every
/// update under these locks is a single insert, remove or field write).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Slicing {
    /// A program the application made from source (`source`: its strings joined).
    pub(crate) fn program_created(&self, program: usize, context: usize, source: &str) {
        lock(&self.programs).insert(program, Program::new(context, source));
    }

    /// The application read `program`'s binaries: remember the source behind them.
    pub(crate) fn binaries_read(&self, program: usize, binaries: &[&[u8]]) {
        if let Some(p) = lock(&self.programs).get(&program) {
            for binary in binaries.iter().filter(|b| !b.is_empty()) {
                binaries::remember(binary, &p.text);
            }
        }
    }

    /// The application made `program` from `binaries`: one whose source is known is noted as
    /// if made from it.
    pub(crate) fn program_from_binaries(&self, program: usize, context: usize, binaries: &[&[u8]]) {
        if let Some(source) = binaries.iter().find_map(|b| binaries::source_of(b)) {
            self.program_created(program, context, &source);
        }
    }

    /// The application built `program` with `options` for `devices`.
    pub(crate) fn program_built(&self, program: usize, devices: Vec<usize>, options: Vec<u8>) {
        if let Some(p) = lock(&self.programs).get_mut(&program) {
            p.built(devices, options);
        }
    }

    /// The application made `kernel`, named `name`, from `program`.
    pub(crate) fn kernel_created(&self, kernel: usize, program: usize, name: Vec<u8>) {
        if lock(&self.programs).contains_key(&program) {
            lock(&self.kernels).insert(kernel, AppKernel::new(program, name));
        }
    }

    /// The application set argument `index` of `kernel` (`value`: `size` bytes, or none).
    pub(crate) fn argument_set(
        &self,
        kernel: usize,
        index: u32,
        size: usize,
        value: Option<&[u8]>,
    ) {
        if let Some(k) = lock(&self.kernels).get_mut(&kernel) {
            k.set_argument(index, size, value);
        }
    }

    /// The application let go of `kernel` for good.
    pub(crate) fn kernel_released(&self, kernel: usize) {
        if let Some(k) = lock(&self.kernels).remove(&kernel) {
            lock(&self.planner).forget(kernel as u64);
            drop(k);
        }
    }

    /// The application let go of `program` for good.
    pub(crate) fn program_released(&self, program: usize) {
        lock(&self.programs).remove(&program);
    }
}
