//! Copies through pageable host memory, which must not wait behind a gate.
//!
//! An async copy whose host side is pageable memory (plain `malloc` or stack memory, as
//! PyTorch's `.cuda()` and `.item()` use) may block its caller: the driver stages a host-to-device
//! copy through pinned memory after waiting for the stream, and a device-to-host copy returns
//! only once the data is in the caller's memory. Behind a gate that the XQueue opens only after
//! the call returns, either would wait for ever. So such a copy goes to the driver ungated: it
//! still runs in stream order after every gated command before it, which the XQueue launches
//! meanwhile, and the caller blocks as it would without xsched. The scheduler does not see
//! that copy; copies from memory the driver knows (pinned by `cuMemHostAlloc` or registered,
//! device or managed memory) stay scheduled. A driver that reported pageable memory as known
//! (a system where the device reads pageable memory directly, say) would gate such a copy again:
//! `scripts/gpu-check.sh`'s CUDA runtime program copies through pageable memory to show it.

use crate::real::{Status, real_fn};
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Once;
use xsched_backend_cuda::sys::CUdeviceptr;

/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`.
const MEMORY_TYPE: c_int = 2;

/// Whether the driver does not know `address`: pageable host memory (or an address the driver
/// will refuse, which it then refuses without a gate). Also true when the driver lacks
/// `cuPointerGetAttribute`: ungated is the safe side.
fn unknown_to_driver(address: CUdeviceptr) -> bool {
    real_fn!(
        real,
        cuPointerGetAttribute,
        unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> Status
    );
    let Some(get) = real() else {
        return true;
    };
    let mut memory_type: c_uint = 0;
    // SAFETY: `memory_type` is a writable CUmemorytype-sized out-value for this attribute; the
    // driver only reads `address` as a number.
    let status = unsafe { get((&raw mut memory_type).cast(), MEMORY_TYPE, address) };
    status != 0
}

/// The rule for a copy whose host sides are `host` (`gate::Ungated`): ungated, through `copy`,
/// when one of them is pageable (said once per process, at info); else `None` (gated).
pub(crate) fn when_pageable(host: &[CUdeviceptr], copy: &dyn Fn() -> Status) -> Option<Status> {
    if !host.iter().any(|&address| unknown_to_driver(address)) {
        return None;
    }
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        tracing::info!(
            "xsched CUDA shim: a copy through pageable host memory blocks its caller, so it runs \
             in stream order without a gate (unscheduled); pinned memory keeps copies scheduled"
        );
    });
    Some(copy())
}
