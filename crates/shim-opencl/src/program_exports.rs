//! The entry points kernel slicing watches (`slice`): programs made from source and built,
//! kernels made from them, their arguments, and their last release. Each makes the real call
//! first, unchanged, and returns its result; what slicing notes afterwards never changes it, and
//! with slicing off nothing is noted at all.

#![allow(non_snake_case)]

use crate::forward::real_fn;
use crate::slice::slicing;
use opencl_sys::cl_function_types as khronos;
use opencl_sys::{
    CL_INVALID_OPERATION, CL_KERNEL_REFERENCE_COUNT, CL_PROGRAM_BINARIES, CL_PROGRAM_BINARY_SIZES,
    CL_PROGRAM_REFERENCE_COUNT, cl_context, cl_device_id, cl_int, cl_kernel, cl_program,
    cl_program_info, cl_uint,
};
use std::ffi::{CStr, c_char, c_void};
use xsched_backend_opencl::cl3;
use xsched_interpose::guard;

/// Write `code` where the caller asked for it.
///
/// # Safety
/// `errcode_ret` is NULL or writable.
unsafe fn report(errcode_ret: *mut cl_int, code: cl_int) {
    if !errcode_ret.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { errcode_ret.write(code) };
    }
}

/// `clCreateProgramWithSource`: the real program; its source noted for a twin.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateProgramWithSource(
    context: cl_context,
    count: cl_uint,
    strings: *mut *const c_char,
    lengths: *const usize,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let Some(real) = real_fn!(
        clCreateProgramWithSource,
        khronos::clCreateProgramWithSource_t
    ) else {
        // SAFETY: the caller's `errcode_ret`.
        unsafe { report(errcode_ret, CL_INVALID_OPERATION) };
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, unchanged.
    let program = unsafe { real(context, count, strings, lengths, errcode_ret) };
    if let Some(s) = slicing().filter(|_| !program.is_null()) {
        guard::quietly("OpenCL", "noting a program's source", || {
            // SAFETY: the real call accepted these strings, so they are as the API requires.
            let source = unsafe { joined(count, strings, lengths) };
            s.program_created(program as usize, context as usize, &source);
        });
    }
    program
}

/// The `count` strings (each `lengths[i]` bytes, or NUL-terminated where that is 0 or
/// `lengths` is NULL) as one source text.
///
/// # Safety
/// As `clCreateProgramWithSource` requires of its arguments.
unsafe fn joined(count: cl_uint, strings: *mut *const c_char, lengths: *const usize) -> String {
    let mut source = Vec::new();
    for i in 0..count as usize {
        // SAFETY: `count` string pointers, and `count` lengths where `lengths` is not NULL.
        let (s, n) = unsafe {
            (
                *strings.add(i),
                if lengths.is_null() {
                    0
                } else {
                    *lengths.add(i)
                },
            )
        };
        if s.is_null() {
            continue;
        }
        if n == 0 {
            // SAFETY: a NUL-terminated string, as the API requires when no length is given.
            source.extend_from_slice(unsafe { CStr::from_ptr(s) }.to_bytes());
        } else {
            // SAFETY: `n` bytes at `s`, as the API requires.
            source.extend_from_slice(unsafe { std::slice::from_raw_parts(s.cast::<u8>(), n) });
        }
    }
    String::from_utf8_lossy(&source).into_owned()
}

/// `clCreateProgramWithBinary`: the real program; where a binary is one built here from known
/// source (`slice/binaries.rs`), noted as made from that source.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateProgramWithBinary(
    context: cl_context,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    lengths: *const usize,
    binaries: *mut *const ::core::ffi::c_uchar,
    binary_status: *mut cl_int,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let Some(real) = real_fn!(
        clCreateProgramWithBinary,
        khronos::clCreateProgramWithBinary_t
    ) else {
        // SAFETY: the caller's `errcode_ret`.
        unsafe { report(errcode_ret, CL_INVALID_OPERATION) };
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, unchanged.
    let program = unsafe {
        real(
            context,
            num_devices,
            device_list,
            lengths,
            binaries,
            binary_status,
            errcode_ret,
        )
    };
    if let Some(s) = slicing().filter(|_| !program.is_null()) {
        guard::quietly("OpenCL", "noting a program's binary", || {
            // SAFETY: `num_devices` binaries of `lengths` bytes, as the real call accepted.
            let all = unsafe { binaries_of(num_devices as usize, binaries.cast(), lengths) };
            s.program_from_binaries(program as usize, context as usize, &all);
        });
    }
    program
}

/// `n` binaries at `binaries`, each `lengths[i]` bytes (NULL pointers skipped).
///
/// # Safety
/// `binaries` and `lengths` hold `n` entries each; each pointer is NULL or holds its length.
unsafe fn binaries_of<'a>(
    n: usize,
    binaries: *const *const u8,
    lengths: *const usize,
) -> Vec<&'a [u8]> {
    if binaries.is_null() || lengths.is_null() {
        return Vec::new();
    }
    (0..n)
        .filter_map(|i| {
            // SAFETY: `n` entries each, by the caller's contract.
            let (p, len) = unsafe { (*binaries.add(i), *lengths.add(i)) };
            // SAFETY: `len` bytes at a non-null `p`, by the caller's contract.
            (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, len) })
        })
        .collect()
}

/// `clGetProgramInfo`: the real query; the binaries a program made from source hands out are
/// remembered with that source.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clGetProgramInfo(
    program: cl_program,
    param_name: cl_program_info,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> cl_int {
    let Some(real) = real_fn!(clGetProgramInfo, khronos::clGetProgramInfo_t) else {
        return CL_INVALID_OPERATION;
    };
    // SAFETY: the caller's arguments, unchanged.
    let status = unsafe {
        real(
            program,
            param_name,
            param_value_size,
            param_value,
            param_value_size_ret,
        )
    };
    let read = status == 0 && param_name == CL_PROGRAM_BINARIES && !param_value.is_null();
    if let Some(s) = slicing().filter(|_| read) {
        guard::quietly("OpenCL", "noting a program's binaries", || {
            let Ok(sizes) = cl3::program::get_program_info(program, CL_PROGRAM_BINARY_SIZES) else {
                return;
            };
            let sizes = Vec::<usize>::from(sizes);
            let slots = (param_value_size / std::mem::size_of::<*const u8>()).min(sizes.len());
            // SAFETY: the real call filled `slots` buffers of `sizes` bytes at the pointers the
            // caller gave in `param_value`.
            let all = unsafe { binaries_of(slots, param_value.cast(), sizes.as_ptr()) };
            s.binaries_read(program as usize, &all);
        });
    }
    status
}

/// `clBuildProgram`: the real build; its devices and options noted for the twin's.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clBuildProgram(
    program: cl_program,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    options: *const c_char,
    pfn_notify: Option<unsafe extern "C" fn(program: cl_program, user_data: *mut c_void)>,
    user_data: *mut c_void,
) -> cl_int {
    let Some(real) = real_fn!(clBuildProgram, khronos::clBuildProgram_t) else {
        return CL_INVALID_OPERATION;
    };
    // SAFETY: the caller's arguments, unchanged.
    let status = unsafe {
        real(
            program,
            num_devices,
            device_list,
            options,
            pfn_notify,
            user_data,
        )
    };
    if let Some(s) = slicing().filter(|_| status == 0) {
        guard::quietly("OpenCL", "noting a build", || {
            let devices = if device_list.is_null() {
                Vec::new()
            } else {
                // SAFETY: `num_devices` devices, as the real call accepted.
                unsafe { std::slice::from_raw_parts(device_list, num_devices as usize) }
                    .iter()
                    .map(|d| *d as usize)
                    .collect()
            };
            let options = if options.is_null() {
                Vec::new()
            } else {
                // SAFETY: a NUL-terminated string, as the real call accepted.
                unsafe { CStr::from_ptr(options) }.to_bytes().to_vec()
            };
            s.program_built(program as usize, devices, options);
        });
    }
    status
}

/// `clCreateKernel`: the real kernel; its program and name noted.
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateKernel(
    program: cl_program,
    kernel_name: *const c_char,
    errcode_ret: *mut cl_int,
) -> cl_kernel {
    let Some(real) = real_fn!(clCreateKernel, khronos::clCreateKernel_t) else {
        // SAFETY: the caller's `errcode_ret`.
        unsafe { report(errcode_ret, CL_INVALID_OPERATION) };
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, unchanged.
    let kernel = unsafe { real(program, kernel_name, errcode_ret) };
    if let Some(s) = slicing().filter(|_| !kernel.is_null()) {
        guard::quietly("OpenCL", "noting a kernel", || {
            // SAFETY: the real call accepted the name, a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(kernel_name) }.to_bytes().to_vec();
            s.kernel_created(kernel as usize, program as usize, name);
        });
    }
    kernel
}

/// `clSetKernelArg`: the real call; the value noted (and set on the twin too, where one is made).
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clSetKernelArg(
    kernel: cl_kernel,
    arg_index: cl_uint,
    arg_size: usize,
    arg_value: *const c_void,
) -> cl_int {
    let Some(real) = real_fn!(clSetKernelArg, khronos::clSetKernelArg_t) else {
        return CL_INVALID_OPERATION;
    };
    // SAFETY: the caller's arguments, unchanged.
    let status = unsafe { real(kernel, arg_index, arg_size, arg_value) };
    if let Some(s) = slicing().filter(|_| status == 0) {
        guard::quietly("OpenCL", "noting a kernel argument", || {
            // SAFETY: `arg_size` bytes at `arg_value` (the real call accepted them), or NULL.
            let value = (!arg_value.is_null())
                .then(|| unsafe { std::slice::from_raw_parts(arg_value.cast::<u8>(), arg_size) });
            s.argument_set(kernel as usize, arg_index, arg_size, value);
        });
    }
    status
}

/// `clReleaseKernel`: on the application's last reference, slicing forgets the kernel (and
/// releases its twin).
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clReleaseKernel(kernel: cl_kernel) -> cl_int {
    let last = slicing().is_some()
        && cl3::kernel::get_kernel_info(kernel, CL_KERNEL_REFERENCE_COUNT)
            .is_ok_and(|c| u32::from(c) == 1);
    let Some(real) = real_fn!(clReleaseKernel, khronos::clReleaseKernel_t) else {
        return CL_INVALID_OPERATION;
    };
    // SAFETY: the caller's argument, unchanged.
    let status = unsafe { real(kernel) };
    if let Some(s) = slicing().filter(|_| last && status == 0) {
        guard::quietly("OpenCL", "forgetting a kernel", || {
            s.kernel_released(kernel as usize);
        });
    }
    status
}

/// `clReleaseProgram`: on the application's last reference, slicing forgets the program (and
/// releases its twin).
///
/// # Safety
/// As the OpenCL specification requires of the caller.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clReleaseProgram(program: cl_program) -> cl_int {
    let last = slicing().is_some()
        && cl3::program::get_program_info(program, CL_PROGRAM_REFERENCE_COUNT)
            .is_ok_and(|c| u32::from(c) == 1);
    let Some(real) = real_fn!(clReleaseProgram, khronos::clReleaseProgram_t) else {
        return CL_INVALID_OPERATION;
    };
    // SAFETY: the caller's argument, unchanged.
    let status = unsafe { real(program) };
    if let Some(s) = slicing().filter(|_| last && status == 0) {
        guard::quietly("OpenCL", "forgetting a program", || {
            s.program_released(program as usize);
        });
    }
    status
}

#[cfg(test)]
mod tests {
    use opencl_sys::cl_function_types as khronos;

    /// Each export has exactly the type of the OpenCL entry point it stands in for (checked when
    /// the test compiles).
    #[test]
    fn every_export_has_the_khronos_signature() {
        let _: khronos::clCreateProgramWithSource_t = Some(super::clCreateProgramWithSource);
        let _: khronos::clBuildProgram_t = Some(super::clBuildProgram);
        let _: khronos::clCreateProgramWithBinary_t = Some(super::clCreateProgramWithBinary);
        let _: khronos::clGetProgramInfo_t = Some(super::clGetProgramInfo);
        let _: khronos::clCreateKernel_t = Some(super::clCreateKernel);
        let _: khronos::clSetKernelArg_t = Some(super::clSetKernelArg);
        let _: khronos::clReleaseKernel_t = Some(super::clReleaseKernel);
        let _: khronos::clReleaseProgram_t = Some(super::clReleaseProgram);
    }
}
