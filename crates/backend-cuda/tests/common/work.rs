//! The test kernel `work(unsigned us, unsigned *out, unsigned tag)` (`work.ptx`): spins `us`
//! microseconds, then appends `tag` to `out` (`out[0]` counts). The fake driver implements it
//! natively and ignores the PTX; a real GPU runs the PTX.

#![allow(dead_code)] // each test crate uses part of it

use std::ffi::{CString, c_void};
use xsched_backend_cuda::{CudaCommand, CudaError, sys};

pub fn check(call: &'static str, code: sys::CUresult) {
    CudaError::check(call, code).unwrap_or_else(|e| panic!("{e}"));
}

/// The `work` kernel and an output buffer of `n` tags.
pub struct Work {
    func: usize,
    out: sys::CUdeviceptr,
    n: usize,
}

impl Work {
    /// Load the kernel (in the current context) and a zeroed buffer for `n` tags.
    pub fn new(n: usize) -> Work {
        let ptx = CString::new(include_str!("work.ptx")).expect("no NUL");
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: a context is current (CudaStream::new); `ptx` is NUL-terminated PTX text.
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast())
        });
        let mut func: sys::CUfunction = std::ptr::null_mut();
        let name = CString::new("work").expect("no NUL");
        // SAFETY: `module` was loaded above; `func` is a valid out-pointer.
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut func, module, name.as_ptr())
        });
        let bytes = (n + 1) * 4;
        let mut out: sys::CUdeviceptr = 0;
        // SAFETY: a context is current; `out` is a valid out-pointer.
        check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut out, bytes) });
        // SAFETY: `out` holds `bytes` bytes.
        check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(out, 0, bytes) });
        Work {
            func: func as usize,
            out,
            n,
        }
    }

    /// A command running `work(us, out, tag)` on whichever stream launches it.
    pub fn command(&self, us: u32, tag: u32) -> CudaCommand {
        self.command_on(us, tag, 1, 1)
    }

    /// `work` on `blocks` blocks of `threads` threads (enough to fill the device).
    pub fn command_on(&self, us: u32, tag: u32, blocks: u32, threads: u32) -> CudaCommand {
        let (func, out) = (self.func, self.out);
        let enqueue = move |stream: sys::CUstream| {
            let func = func as sys::CUfunction;
            let (mut us, mut out, mut tag) = (us, out, tag);
            let mut params: [*mut c_void; 3] = [
                (&raw mut us).cast(),
                (&raw mut out).cast(),
                (&raw mut tag).cast(),
            ];
            // SAFETY: `func` is the loaded `work` kernel; `params` points at its three
            // arguments, which the driver copies before returning.
            let code = unsafe {
                sys::cuLaunchKernel(
                    func,
                    blocks,
                    1,
                    1,
                    threads,
                    1,
                    1,
                    0,
                    stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            };
            CudaError::check("cuLaunchKernel", code)
        };
        CudaCommand::Enqueue(Box::new(enqueue))
    }

    /// The tags in execution order.
    pub fn tags(&self) -> Vec<u32> {
        let mut host = vec![0u32; self.n + 1];
        // SAFETY: `host` holds n + 1 u32s, the buffer's size.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), self.out, host.len() * 4)
        });
        let count = host[0] as usize;
        host[1..=count.min(self.n)].to_vec()
    }
}
