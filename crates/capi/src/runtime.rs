//! Runtimes and devices.

use crate::ffi::{give, guard, take};
use crate::status::{Failure, XschedStatus};
use std::ffi::{CStr, c_char};
use xsched_backend_cpu::CpuDevice;
use xsched_runtime::{Runtime, RuntimeConfig, WhoSchedules};

/// A runtime: creates queues and, in local mode, runs the scheduler thread.
pub struct XschedRuntime(pub(crate) Runtime);

/// A device queues are created on (the built-in CPU device).
pub struct XschedDevice(pub(crate) CpuDevice);

/// Create a runtime configured from `XSCHED_SCHEDULER`, `XSCHED_POLICY` and `XSCHED_SOCKET`
/// (default: local scheduler, `hpf`).
///
/// # Safety
/// `out` must be valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_runtime_create(out: *mut *mut XschedRuntime) -> XschedStatus {
    guard(|| {
        let rt = Runtime::from_env()?;
        // SAFETY: `out` is valid for writes by this function's contract.
        unsafe { give(out, XschedRuntime(rt), "out") }
    })
}

/// Create a runtime with an explicit scheduler mode (0 = app, 1 = local, 2 = global) and policy
/// name (NULL for `hpf`). An unknown policy, in any mode, is `XSCHED_STATUS_INVALID_ARGUMENT`
/// with a message naming the known ones (`xsched_last_error`).
///
/// # Safety
/// `policy` must be NULL or a NUL-terminated string; `out` valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_runtime_create_with(
    scheduler: u32,
    policy: *const c_char,
    out: *mut *mut XschedRuntime,
) -> XschedStatus {
    guard(|| {
        let scheduler = match scheduler {
            0 => WhoSchedules::App,
            1 => WhoSchedules::Local,
            2 => WhoSchedules::Global,
            n => {
                return Err(Failure::new(
                    XschedStatus::InvalidArgument,
                    format!("scheduler mode {n}: expected 0 (app), 1 (local) or 2 (global)"),
                ));
            }
        };
        let mut config = RuntimeConfig {
            scheduler,
            ..RuntimeConfig::default()
        };
        if !policy.is_null() {
            // SAFETY: non-null `policy` is a NUL-terminated string by contract.
            let name = unsafe { CStr::from_ptr(policy) };
            config.policy = name
                .to_str()
                .map_err(|_| Failure::new(XschedStatus::InvalidArgument, "policy is not UTF-8"))?
                .parse()?;
        }
        let rt = Runtime::new(config)?;
        // SAFETY: `out` is valid for writes by contract.
        unsafe { give(out, XschedRuntime(rt), "out") }
    })
}

/// Destroy a runtime (NULL is ignored). Queues created from it keep working, unscheduled.
///
/// # Safety
/// `rt` must be NULL or a runtime from `xsched_runtime_create*`, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_runtime_destroy(rt: *mut XschedRuntime) -> XschedStatus {
    guard(|| {
        // SAFETY: by contract, a live runtime handle or NULL.
        drop(unsafe { take(rt) });
        Ok(())
    })
}

/// Create a CPU device with `workers` threads (0 means 1).
///
/// # Safety
/// `out` must be valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_device_create_cpu(
    workers: u32,
    out: *mut *mut XschedDevice,
) -> XschedStatus {
    guard(|| {
        let device = CpuDevice::new(workers.max(1) as usize)?;
        // SAFETY: `out` is valid for writes by contract.
        unsafe { give(out, XschedDevice(device), "out") }
    })
}

/// Destroy a device (NULL is ignored). Commands it still holds fail.
///
/// # Safety
/// `device` must be NULL or a device from `xsched_device_create_cpu`, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn xsched_device_destroy(device: *mut XschedDevice) -> XschedStatus {
    guard(|| {
        // SAFETY: by contract, a live device handle or NULL.
        drop(unsafe { take(device) });
        Ok(())
    })
}
