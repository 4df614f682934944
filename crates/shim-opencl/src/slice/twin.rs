//! The twin of a kernel, made the first time a launch of it is cut (most kernels are never
//! long enough, and their programs never pay a second build): its program from the rewritten
//! source, built like the application's; the kernel of the same name; every argument the
//! application set so far.

use super::error::SliceError;
use super::objects::{AppKernel, Program, set};
use std::ffi::{CString, c_void};
use xsched_backend_opencl::cl3;

/// The twin of `kernel` (a `cl_kernel`), made now if it was not, or why there is none.
pub(crate) fn kernel_twin(
    program: &mut Program,
    kernel: &mut AppKernel,
) -> Result<usize, SliceError> {
    if let Some(made) = &kernel.twin {
        return made.clone();
    }
    let made = program_twin(program).and_then(|p| make_kernel(p, kernel));
    kernel.twin = Some(made.clone());
    made
}

/// The twin of `program`, made and built now if it was not.
fn program_twin(program: &mut Program) -> Result<usize, SliceError> {
    if let Some(made) = &program.twin {
        return made.clone();
    }
    let made = build(program);
    program.twin = Some(made.clone());
    made
}

fn build(program: &Program) -> Result<usize, SliceError> {
    let twin = program
        .source
        .as_ref()
        .map_err(|r| SliceError::Refused(r.clone()))?;
    let (devices, options) = program.build.as_ref().ok_or(SliceError::NotBuilt)?;
    let made = cl3::program::create_program_with_source(
        program.context as *mut c_void,
        &[twin.source.as_str()],
    )
    .map_err(SliceError::CreateProgram)?;
    let devices: Vec<_> = devices.iter().map(|d| *d as *mut c_void).collect();
    let options = CString::new(options.clone())?;
    if let Err(code) =
        cl3::program::build_program(made, &devices, &options, None, std::ptr::null_mut())
    {
        let log = devices
            .first()
            .and_then(|d| {
                cl3::program::get_program_build_info(made, *d, opencl_sys::CL_PROGRAM_BUILD_LOG)
                    .ok()
            })
            .map(String::from)
            .unwrap_or_default();
        // SAFETY: the program just made is ours alone.
        let _ = unsafe { cl3::program::release_program(made) };
        let first = log.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(SliceError::Build {
            code,
            log: first.to_string(),
        });
    }
    Ok(made as usize)
}

fn make_kernel(program: usize, kernel: &AppKernel) -> Result<usize, SliceError> {
    let name = CString::new(kernel.name.clone())?;
    let twin = cl3::kernel::create_kernel(program as *mut c_void, &name)
        .map_err(SliceError::CreateKernel)?;
    for (index, argument) in kernel.arguments.iter().enumerate() {
        let Some(argument) = argument else { continue };
        if let Err(code) = set(twin as usize, index as u32, argument) {
            // SAFETY: the kernel just made is ours alone.
            let _ = unsafe { cl3::kernel::release_kernel(twin) };
            return Err(SliceError::SetArgument { index, code });
        }
    }
    Ok(twin as usize)
}
