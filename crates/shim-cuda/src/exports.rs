//! The driver entry points the shim replaces, each with the exact C signature of the real one
//! (both the plain and the `_ptsz` per-thread-default-stream variant, as the driver exports
//! them). Everything else goes to the driver untouched. Events stay the driver's and follow the
//! gated commands in their stream; the shim only notes on which stream each is recorded, so
//! that a stream waiting on another's event is not left behind gates while the recording
//! stream is suspended (`Shim::before_wait`).

#![allow(non_snake_case)]

use crate::first_launch;
use crate::gate;
use crate::pageable;
use crate::real::real_fn;
use crate::real::{NOT_FOUND, Status};
use crate::state::{Key, shim};
use std::ffi::{c_int, c_uchar, c_uint, c_void};
use xsched_backend_cuda::sys::{
    CUcontext, CUdeviceptr, CUevent, CUfunction, CUgraph, CUgraphExec, CUlaunchConfig, CUmodule,
    CUstream,
};
use xsched_interpose::guard;

/// The `gate::Ungated` rule a `scheduled!` entry point names, or the always-gated one.
macro_rules! ungated_rule {
    () => {
        &gate::always_gated
    };
    ($rule:expr) => {
        &$rule
    };
}

/// Defines an exported entry point scheduled through its stream's XQueue.
///
/// With `ungated = |call| rule` (a `gate::Ungated` on its arguments), the rule may make
/// the call itself without a gate: a copy through pageable host memory (`pageable.rs`), a
/// kernel's launches until it is loaded or under `CUDA_LAUNCH_BLOCKING=1` (`first_launch.rs`).
macro_rules! scheduled {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*), ptsz = $ptsz:expr, stream = |$($s:ident),*| $stream:expr
     $(, ungated = $ungated:expr)?) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the CUDA driver API requires of the caller.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> Status {
            real_fn!(real, $name, unsafe extern "C" fn($($ty),*) -> Status);
            let forward = || match real() {
                // SAFETY: the application's arguments, unchanged, to the real entry point.
                Some(f) => unsafe { f($($arg),*) },
                None => NOT_FOUND,
            };
            let ungated: gate::Ungated = ungated_rule!($($ungated)?);
            let stream = (|$($s: $ty),*| $stream)($($arg),*);
            gate::submit(stream, $ptsz, &forward, ungated)
        }
    };
}

scheduled!(
    /// `cuLaunchKernel`, scheduled (ungated until the kernel is loaded, and under
    /// `CUDA_LAUNCH_BLOCKING=1`).
    cuLaunchKernel(f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
        shared: c_uint, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void),
    ptsz = false, stream = |_f, _gx, _gy, _gz, _bx, _by, _bz, _shared, stream, _params, _extra| Some(stream),
    ungated = |launch| first_launch::launch_rule(f as usize, launch)
);
scheduled!(
    /// `cuLaunchKernel_ptsz`, scheduled.
    cuLaunchKernel_ptsz(f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
        shared: c_uint, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void),
    ptsz = true, stream = |_f, _gx, _gy, _gz, _bx, _by, _bz, _shared, stream, _params, _extra| Some(stream),
    ungated = |launch| first_launch::launch_rule(f as usize, launch)
);
scheduled!(
    /// `cuLaunchKernelEx`, scheduled (on the stream its configuration names; ungated until the
    /// kernel is loaded).
    cuLaunchKernelEx(config: *const CUlaunchConfig, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void),
    ptsz = false,
    // SAFETY: `config` is NULL or points to a launch configuration, by the caller's contract.
    stream = |config, _f, _params, _extra| unsafe { config.as_ref() }.map(|c| c.hStream),
    ungated = |launch| first_launch::launch_rule(f as usize, launch)
);
scheduled!(
    /// `cuLaunchKernelEx_ptsz`, scheduled.
    cuLaunchKernelEx_ptsz(config: *const CUlaunchConfig, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void),
    ptsz = true,
    // SAFETY: `config` is NULL or points to a launch configuration, by the caller's contract.
    stream = |config, _f, _params, _extra| unsafe { config.as_ref() }.map(|c| c.hStream),
    ungated = |launch| first_launch::launch_rule(f as usize, launch)
);
scheduled!(
    /// `cuMemcpyHtoDAsync`, scheduled (ungated from pageable memory).
    cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, stream: CUstream),
    ptsz = false, stream = |_d, _s, _n, stream| Some(stream),
    ungated = |copy| pageable::when_pageable(&[src as CUdeviceptr], copy)
);
scheduled!(
    /// `cuMemcpyHtoDAsync_ptsz`, scheduled.
    cuMemcpyHtoDAsync_v2_ptsz(dst: CUdeviceptr, src: *const c_void, n: usize, stream: CUstream),
    ptsz = true, stream = |_d, _s, _n, stream| Some(stream),
    ungated = |copy| pageable::when_pageable(&[src as CUdeviceptr], copy)
);
scheduled!(
    /// `cuMemcpyDtoHAsync`, scheduled (ungated into pageable memory).
    cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, stream: CUstream),
    ptsz = false, stream = |_d, _s, _n, stream| Some(stream),
    ungated = |copy| pageable::when_pageable(&[dst as CUdeviceptr], copy)
);
scheduled!(
    /// `cuMemcpyDtoHAsync_ptsz`, scheduled.
    cuMemcpyDtoHAsync_v2_ptsz(dst: *mut c_void, src: CUdeviceptr, n: usize, stream: CUstream),
    ptsz = true, stream = |_d, _s, _n, stream| Some(stream),
    ungated = |copy| pageable::when_pageable(&[dst as CUdeviceptr], copy)
);
scheduled!(
    /// `cuMemcpyDtoDAsync`, scheduled.
    cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream),
    ptsz = false, stream = |_d, _s, _n, stream| Some(stream)
);
scheduled!(
    /// `cuMemcpyDtoDAsync_ptsz`, scheduled.
    cuMemcpyDtoDAsync_v2_ptsz(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream),
    ptsz = true, stream = |_d, _s, _n, stream| Some(stream)
);
scheduled!(
    /// `cuMemcpyAsync` (unified addressing), scheduled (ungated through pageable memory).
    cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream),
    ptsz = false, stream = |_d, _s, _n, stream| Some(stream),
    ungated = |copy| pageable::when_pageable(&[dst, src], copy)
);
scheduled!(
    /// `cuMemcpyAsync_ptsz`, scheduled.
    cuMemcpyAsync_ptsz(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream),
    ptsz = true, stream = |_d, _s, _n, stream| Some(stream),
    ungated = |copy| pageable::when_pageable(&[dst, src], copy)
);
scheduled!(
    /// `cuMemsetD8Async`, scheduled.
    cuMemsetD8Async(dst: CUdeviceptr, value: c_uchar, n: usize, stream: CUstream),
    ptsz = false, stream = |_d, _v, _n, stream| Some(stream)
);
scheduled!(
    /// `cuMemsetD8Async_ptsz`, scheduled.
    cuMemsetD8Async_ptsz(dst: CUdeviceptr, value: c_uchar, n: usize, stream: CUstream),
    ptsz = true, stream = |_d, _v, _n, stream| Some(stream)
);

scheduled!(
    /// `cuGraphLaunch`, scheduled as one command: the whole graph waits behind one gate, so a
    /// suspended queue holds its graphs back like its kernels (vLLM and PyTorch run most of
    /// their decode steps as graphs). A launch on a stream being captured passes through: the
    /// capture records it, nothing runs.
    cuGraphLaunch(graph: CUgraphExec, stream: CUstream),
    ptsz = false, stream = |_graph, stream| Some(stream)
);
scheduled!(
    /// `cuGraphLaunch_ptsz`, scheduled.
    cuGraphLaunch_ptsz(graph: CUgraphExec, stream: CUstream),
    ptsz = true, stream = |_graph, stream| Some(stream)
);

/// Defines an exported entry point that does `$before(key)` on the xsched side, then forwards.
macro_rules! observed {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*), $what:literal, |$key:ident| $before:expr, stream = |$($s:ident),*| $stream:expr, ptsz = $ptsz:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the CUDA driver API requires of the caller.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> Status {
            real_fn!(real, $name, unsafe extern "C" fn($($ty),*) -> Status);
            let stream: CUstream = (|$($s: $ty),*| $stream)($($arg),*);
            guard::quietly("CUDA", $what, || {
                if let Some(shim) = shim() {
                    let $key = Key::of(stream, $ptsz);
                    let _: () = $before(shim);
                }
            });
            match real() {
                // SAFETY: the application's arguments, unchanged, to the real entry point.
                Some(f) => unsafe { f($($arg),*) },
                None => NOT_FOUND,
            }
        }
    };
}

observed!(
    /// `cuStreamSynchronize`: waits for the stream's XQueue (so queued commands are launched
    /// promptly), then for the stream itself.
    cuStreamSynchronize(stream: CUstream), "synchronizing a stream",
    |key| |s: &'static crate::state::Shim| if let Some(q) = s.stream(key) { let _ = q.wait_all(); },
    stream = |stream| stream, ptsz = false
);
observed!(
    /// `cuStreamSynchronize_ptsz`: as `cuStreamSynchronize`.
    cuStreamSynchronize_ptsz(stream: CUstream), "synchronizing a stream",
    |key| |s: &'static crate::state::Shim| if let Some(q) = s.stream(key) { let _ = q.wait_all(); },
    stream = |stream| stream, ptsz = true
);
observed!(
    /// `cuStreamDestroy`: drains the stream's XQueue (every command the application issued
    /// runs), forgets it, and destroys the stream.
    cuStreamDestroy_v2(stream: CUstream), "destroying a stream",
    |key| |s: &crate::state::Shim| s.forget(key),
    stream = |stream| stream, ptsz = false
);
observed!(
    /// `cuStreamBeginCapture`: the stream passes through unscheduled while it is captured.
    cuStreamBeginCapture_v2(stream: CUstream, mode: c_int), "starting a capture",
    |key| |s: &crate::state::Shim| s.set_capturing(key, true),
    stream = |stream, _mode| stream, ptsz = false
);
observed!(
    /// `cuStreamBeginCapture_ptsz`: as `cuStreamBeginCapture`.
    cuStreamBeginCapture_v2_ptsz(stream: CUstream, mode: c_int), "starting a capture",
    |key| |s: &crate::state::Shim| s.set_capturing(key, true),
    stream = |stream, _mode| stream, ptsz = true
);
observed!(
    /// `cuStreamEndCapture`: the stream is scheduled again.
    cuStreamEndCapture(stream: CUstream, graph: *mut CUgraph), "ending a capture",
    |key| |s: &crate::state::Shim| s.set_capturing(key, false),
    stream = |stream, _graph| stream, ptsz = false
);
observed!(
    /// `cuStreamEndCapture_ptsz`: as `cuStreamEndCapture`.
    cuStreamEndCapture_ptsz(stream: CUstream, graph: *mut CUgraph), "ending a capture",
    |key| |s: &crate::state::Shim| s.set_capturing(key, false),
    stream = |stream, _graph| stream, ptsz = true
);
observed!(
    /// `cuEventRecord`: notes the stream the event follows.
    cuEventRecord(event: CUevent, stream: CUstream), "recording an event",
    |key| |s: &'static crate::state::Shim| s.recorded(event as usize, key),
    stream = |_event, stream| stream, ptsz = false
);
observed!(
    /// `cuEventRecord_ptsz`: as `cuEventRecord`.
    cuEventRecord_ptsz(event: CUevent, stream: CUstream), "recording an event",
    |key| |s: &'static crate::state::Shim| s.recorded(event as usize, key),
    stream = |_event, stream| stream, ptsz = true
);
observed!(
    /// `cuEventRecordWithFlags`: as `cuEventRecord`.
    cuEventRecordWithFlags(event: CUevent, stream: CUstream, flags: c_uint), "recording an event",
    |key| |s: &'static crate::state::Shim| s.recorded(event as usize, key),
    stream = |_event, stream, _flags| stream, ptsz = false
);
observed!(
    /// `cuEventRecordWithFlags_ptsz`: as `cuEventRecord`.
    cuEventRecordWithFlags_ptsz(event: CUevent, stream: CUstream, flags: c_uint), "recording an event",
    |key| |s: &'static crate::state::Shim| s.recorded(event as usize, key),
    stream = |_event, stream, _flags| stream, ptsz = true
);
observed!(
    /// `cuStreamWaitEvent`: first waits for the recording stream's commands before the record
    /// when another scheduled stream recorded it (`Shim::before_wait`), then makes the wait.
    cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: c_uint), "waiting on an event",
    |key| |s: &'static crate::state::Shim| s.before_wait(event as usize, key),
    stream = |stream, _event, _flags| stream, ptsz = false
);
observed!(
    /// `cuStreamWaitEvent_ptsz`: as `cuStreamWaitEvent`.
    cuStreamWaitEvent_ptsz(stream: CUstream, event: CUevent, flags: c_uint), "waiting on an event",
    |key| |s: &'static crate::state::Shim| s.before_wait(event as usize, key),
    stream = |stream, _event, _flags| stream, ptsz = true
);

/// `cuEventDestroy`: forgets where the event was recorded, then destroys it.
///
/// # Safety
/// As the CUDA driver API requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy_v2(event: CUevent) -> Status {
    real_fn!(
        real,
        cuEventDestroy_v2,
        unsafe extern "C" fn(CUevent) -> Status
    );
    guard::quietly("CUDA", "forgetting an event", || {
        if let Some(shim) = shim() {
            shim.event_destroyed(event as usize);
        }
    });
    match real() {
        // SAFETY: the application's argument, unchanged, to the real entry point.
        Some(f) => unsafe { f(event) },
        None => NOT_FOUND,
    }
}

/// `cuCtxDestroy`: drains and forgets the context's default streams (the legacy one and every
/// thread's per-thread one), then destroys the context.
///
/// # Safety
/// As the CUDA driver API requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDestroy_v2(context: CUcontext) -> Status {
    real_fn!(
        real,
        cuCtxDestroy_v2,
        unsafe extern "C" fn(CUcontext) -> Status
    );
    guard::quietly("CUDA", "releasing a context's streams", || {
        if let Some(shim) = shim() {
            shim.forget_context(context as usize);
        }
    });
    // A context created later may get this one's address: none of its kernels is loaded.
    first_launch::across_unload(|| match real() {
        // SAFETY: the application's argument, unchanged, to the real entry point.
        Some(f) => unsafe { f(context) },
        None => NOT_FOUND,
    })
}

/// Defines an exported unload (of a module or a library): a kernel handed out later at a freed
/// kernel's address counts as not loaded (`first_launch::across_unload`).
macro_rules! unloading {
    ($(#[$doc:meta])* $name:ident($arg:ident: $ty:ty)) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the CUDA driver API requires of the caller.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($arg: $ty) -> Status {
            real_fn!(real, $name, unsafe extern "C" fn($ty) -> Status);
            first_launch::across_unload(|| match real() {
                // SAFETY: the application's argument, unchanged, to the real entry point.
                Some(f) => unsafe { f($arg) },
                None => NOT_FOUND,
            })
        }
    };
}

unloading!(
    /// `cuModuleUnload`: its kernels' addresses may be handed out again.
    cuModuleUnload(module: CUmodule)
);
unloading!(
    /// `cuLibraryUnload`: its kernels' addresses may be handed out again.
    cuLibraryUnload(library: *mut c_void)
);

/// Defines an exported stream creation that schedules the new stream (reading `XSCHED_*` now),
/// `raise` above the process's priority.
macro_rules! creation {
    ($(#[$doc:meta])* $name:ident(out: *mut CUstream $(, $arg:ident: $ty:ty)*), raise = |$($r:ident),*| $raise:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the CUDA driver API requires of the caller.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(out: *mut CUstream $(, $arg: $ty)*) -> Status {
            real_fn!(real, $name, unsafe extern "C" fn(*mut CUstream $(, $ty)*) -> Status);
            // SAFETY: the application's arguments, unchanged, to the real entry point.
            let status = real().map_or(NOT_FOUND, |f| unsafe { f(out $(, $arg)*) });
            if status == 0 && !out.is_null() {
                // SAFETY: the driver wrote the new stream to the caller's `out`.
                let stream = unsafe { out.read() };
                let raise: i32 = (|$($r: $ty),*| $raise)($($arg),*);
                guard::quietly("CUDA", "scheduling a new stream", || {
                    if let Some(s) = shim() {
                        let _ = s.adopt_at(Key::of(stream, false), raise);
                    }
                });
            }
            status
        }
    };
}

creation!(
    /// `cuStreamCreate`: the new stream becomes an XQueue at the process's priority.
    cuStreamCreate(out: *mut CUstream, flags: c_uint), raise = |_flags| 0
);
creation!(
    /// `cuStreamCreateWithPriority`: the new stream becomes an XQueue, its CUDA priority mapped
    /// onto the process's (CUDA's lower numbers are more urgent: priority `p` raises the
    /// queue's by `-p`, so a process's streams keep CUDA's order among themselves). A positive
    /// priority, which CUDA clamps to its least urgent (0), raises nothing.
    cuStreamCreateWithPriority(out: *mut CUstream, flags: c_uint, priority: c_int),
    raise = |_flags, priority| priority.saturating_neg().max(0)
);
