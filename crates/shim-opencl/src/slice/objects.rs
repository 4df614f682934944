//! The application's programs and kernels as slicing sees them: a program's twin source and
//! build settings, a kernel's name and current arguments, each with its twin once built (released
//! with it), and a kernel's launch being measured.

use super::error::SliceError;
use super::rewrite::{self, Refusal, Twin};
use std::ffi::c_void;
use xsched_backend_opencl::{Event, cl3};

/// An application program made from source.
pub(crate) struct Program {
    /// Its context (a `cl_context`).
    pub(crate) context: usize,
    /// The application's source.
    pub(crate) text: String,
    /// The twin's source, or why it has none.
    pub(crate) source: Result<Twin, Refusal>,
    /// The devices and options of the application's build (`None` until it builds).
    pub(crate) build: Option<(Vec<usize>, Vec<u8>)>,
    /// The twin program once made and built (a `cl_program`), or why it could not be.
    pub(crate) twin: Option<Result<usize, SliceError>>,
}

impl Program {
    pub(crate) fn new(context: usize, source: &str) -> Program {
        Program {
            context,
            text: source.to_string(),
            source: rewrite::twin(source),
            build: None,
            twin: None,
        }
    }

    pub(crate) fn built(&mut self, devices: Vec<usize>, options: Vec<u8>) {
        self.build = Some((devices, options));
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if let Some(Ok(twin)) = self.twin {
            // SAFETY: the twin program is ours alone; its kernels hold their own references.
            let _ = unsafe { cl3::program::release_program(twin as *mut c_void) };
        }
    }
}

/// One argument as the application last set it.
#[derive(Clone, Debug)]
pub(crate) struct Argument {
    /// `arg_size`.
    pub(crate) size: usize,
    /// The bytes `arg_value` pointed to, or `None` for a NULL value (local memory).
    pub(crate) value: Option<Vec<u8>>,
}

/// An application kernel of a program made from source.
pub(crate) struct AppKernel {
    /// Its program (a `cl_program`).
    pub(crate) program: usize,
    /// Its function name.
    pub(crate) name: Vec<u8>,
    /// Its arguments, by index.
    pub(crate) arguments: Vec<Option<Argument>>,
    /// The twin kernel once made (a `cl_kernel`), or why it could not be.
    pub(crate) twin: Option<Result<usize, SliceError>>,
    /// Its last launch (or slice) being measured, and how many work-groups it ran.
    pub(crate) measuring: Option<(Event, u64)>,
    /// Why it is never cut has been logged.
    pub(crate) refusal_said: bool,
    /// That its launches are cut has been logged.
    pub(crate) cut_said: bool,
}

impl AppKernel {
    pub(crate) fn new(program: usize, name: Vec<u8>) -> AppKernel {
        AppKernel {
            program,
            name,
            arguments: Vec::new(),
            twin: None,
            measuring: None,
            refusal_said: false,
            cut_said: false,
        }
    }

    /// Record argument `index`, and set it on the twin too (a twin that refuses it is dropped,
    /// with the reason).
    pub(crate) fn set_argument(&mut self, index: u32, size: usize, value: Option<&[u8]>) {
        let i = index as usize;
        if self.arguments.len() <= i {
            self.arguments.resize(i + 1, None);
        }
        let argument = Argument {
            size,
            value: value.map(<[u8]>::to_vec),
        };
        if let Some(Ok(twin)) = self.twin
            && let Err(code) = set(twin, index, &argument)
        {
            self.drop_twin(SliceError::SetArgument { index: i, code });
        }
        self.arguments[i] = Some(argument);
    }

    /// Give up the twin, saying why (launches run whole from now on).
    pub(crate) fn drop_twin(&mut self, why: SliceError) {
        if let Some(Ok(twin)) = self.twin.take() {
            // SAFETY: the twin kernel is ours alone.
            let _ = unsafe { cl3::kernel::release_kernel(twin as *mut c_void) };
        }
        self.twin = Some(Err(why));
    }
}

impl Drop for AppKernel {
    fn drop(&mut self) {
        if let Some(Ok(twin)) = self.twin {
            // SAFETY: the twin kernel is ours alone.
            let _ = unsafe { cl3::kernel::release_kernel(twin as *mut c_void) };
        }
    }
}

/// Set `argument` as argument `index` of `kernel` (a `cl_kernel`).
pub(crate) fn set(kernel: usize, index: u32, argument: &Argument) -> Result<(), i32> {
    let value = argument
        .value
        .as_ref()
        .map_or(std::ptr::null(), |v| v.as_ptr().cast::<c_void>());
    // SAFETY: `value` is NULL or points to `size` bytes the application gave for this index.
    unsafe { cl3::kernel::set_kernel_arg(kernel as *mut c_void, index, argument.size, value) }
}
