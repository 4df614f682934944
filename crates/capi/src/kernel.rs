//! The built-in kernels as C handles; their results are read back as checksums.

use crate::ffi::{give, guard, handle, take, write};
use crate::status::{Failure, XschedStatus};
use std::sync::Arc;
use std::time::Duration;
use xsched_backend_cpu::Kernel;
use xsched_backend_cpu::kernels::{MatMul, Saxpy, Spin};

/// A built-in kernel; submit it any number of times, read its result after waiting.
pub struct XschedKernel {
    pub(crate) kernel: Arc<dyn Kernel>,
    result: Option<Result>,
}

enum Result {
    MatMul(Arc<MatMul>),
    Saxpy(Arc<Saxpy>),
}

/// The most f32 values one built-in kernel may hold (2^27: 512 MiB). A larger request is
/// refused with `XSCHED_STATUS_INVALID_ARGUMENT` rather than attempted: a failed allocation
/// would abort the host program.
pub const XSCHED_KERNEL_MAX_FLOATS: u64 = 1 << 27;

/// Refuse a kernel of `floats` values (`what` says how they were counted).
fn check_size(floats: u64, what: &str) -> std::result::Result<(), Failure> {
    if floats > XSCHED_KERNEL_MAX_FLOATS {
        return Err(Failure::new(
            XschedStatus::InvalidArgument,
            format!(
                "{what} = {floats} floats exceeds the limit of {XSCHED_KERNEL_MAX_FLOATS} (512 MiB)"
            ),
        ));
    }
    Ok(())
}

/// A calibrated spin of `duration_us` microseconds in 50 µs checkpointed tiles.
///
/// # Safety
/// `out` must be valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_kernel_spin(
    duration_us: u64,
    out: *mut *mut XschedKernel,
) -> XschedStatus {
    guard(|| {
        let kernel = Arc::new(Spin::new(Duration::from_micros(duration_us)));
        let k = XschedKernel {
            kernel,
            result: None,
        };
        // SAFETY: `out` is valid for writes by contract.
        unsafe { give(out, k, "out") }
    })
}

/// An n × n f32 matrix multiply of inputs generated from `seed`, one tile per `rows_per_tile`
/// output rows. Its three matrices must fit in `XSCHED_KERNEL_MAX_FLOATS` (n up to 6688), else
/// `XSCHED_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` must be valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_kernel_matmul(
    n: u32,
    rows_per_tile: u32,
    seed: u64,
    out: *mut *mut XschedKernel,
) -> XschedStatus {
    guard(|| {
        check_size(3 * u64::from(n) * u64::from(n), "3·n²")?;
        let m = Arc::new(MatMul::new(n as usize, rows_per_tile as usize, seed));
        let k = XschedKernel {
            kernel: m.clone(),
            result: Some(Result::MatMul(m)),
        };
        // SAFETY: `out` is valid for writes by contract.
        unsafe { give(out, k, "out") }
    })
}

/// `y = a·x + y` over `len` elements generated from `seed`, one tile per `chunk` elements. Not
/// idempotent: every run adds `a·x` again. Its two vectors must fit in
/// `XSCHED_KERNEL_MAX_FLOATS`, else `XSCHED_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` must be valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_kernel_saxpy(
    len: u32,
    chunk: u32,
    a: f32,
    seed: u64,
    out: *mut *mut XschedKernel,
) -> XschedStatus {
    guard(|| {
        check_size(2 * u64::from(len), "2·len")?;
        let s = Arc::new(Saxpy::new(len as usize, chunk as usize, a, seed));
        let k = XschedKernel {
            kernel: s.clone(),
            result: Some(Result::Saxpy(s)),
        };
        // SAFETY: `out` is valid for writes by contract.
        unsafe { give(out, k, "out") }
    })
}

/// The sum of a matmul's or saxpy's output (0 for spin), for comparing runs.
///
/// # Safety
/// `kernel` must be NULL or a live kernel handle; `out` valid for writing one double.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_kernel_checksum(
    kernel: *const XschedKernel,
    out: *mut f64,
) -> XschedStatus {
    guard(|| {
        // SAFETY: by contract, NULL or a live handle.
        let k = unsafe { handle(kernel, "kernel") }?;
        let values = match &k.result {
            Some(Result::MatMul(m)) => m.result(),
            Some(Result::Saxpy(s)) => s.result(),
            None => Vec::new(),
        };
        let sum = values.iter().map(|&v| f64::from(v)).sum();
        // SAFETY: `out` is valid for writes by contract.
        unsafe { write(out, sum, "out") }
    })
}

/// Destroy a kernel handle (NULL is ignored). Submitted runs keep their own reference.
///
/// # Safety
/// `kernel` must be NULL or a kernel handle, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_kernel_destroy(kernel: *mut XschedKernel) -> XschedStatus {
    guard(|| {
        // SAFETY: by contract, a live kernel handle or NULL.
        drop(unsafe { take(kernel) });
        Ok(())
    })
}
