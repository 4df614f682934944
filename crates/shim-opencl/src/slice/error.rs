//! Why a kernel's launches are not cut: its twin could not be made or used, or the slice budget
//! is unreadable. Each message is the one slicing logs.

use super::rewrite::Refusal;
use std::ffi::NulError;
use xsched_backend_opencl::OclError;
use xsched_backend_opencl::cl3::types::cl_int;

/// What slicing reports (cloned: a twin that could not be made keeps why).
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum SliceError {
    /// The program's source gets no twin.
    #[error("{0}")]
    Refused(Refusal),
    /// A launch with a global offset is never cut.
    #[error("a launch with a non-zero global offset")]
    NonZeroOffset,
    /// The twin is built like the application's program, which has not been built yet.
    #[error("the application has not built its program")]
    NotBuilt,
    /// `clCreateProgramWithSource` refused the twin's source.
    #[error("clCreateProgramWithSource for the twin: {0}")]
    CreateProgram(cl_int),
    /// Build options or a kernel name hold a NUL byte.
    #[error(transparent)]
    Nul(#[from] NulError),
    /// The twin's build failed: its status and the first line of its build log.
    #[error("the twin does not build ({code}): {log}")]
    Build {
        /// `clBuildProgram`'s status.
        code: cl_int,
        /// The first non-empty line of the build log (empty when there is none).
        log: String,
    },
    /// `clCreateKernel` on the twin program failed.
    #[error("clCreateKernel on the twin: {0}")]
    CreateKernel(cl_int),
    /// An application argument could not be set on the twin kernel.
    #[error("clSetKernelArg({index}) on the twin: {code}")]
    SetArgument {
        /// The argument's index.
        index: usize,
        /// `clSetKernelArg`'s status.
        code: cl_int,
    },
    /// The launch's global sizes could not be set as the twin's extra arguments.
    #[error("the launch's sizes on the twin: {0}")]
    Sizes(cl_int),
    /// `clEnqueueNDRangeKernel` of a range failed.
    #[error("clEnqueueNDRangeKernel: {0}")]
    Enqueue(cl_int),
    /// No gate could be made for a range.
    #[error(transparent)]
    Gate(#[from] OclError),
    /// The first range of a cut launch failed.
    #[error("the twin's first range: {0}")]
    FirstRange(#[source] Box<SliceError>),
    /// `XSCHED_SLICE_US` is not a number.
    #[error("`{0}` is not a whole number of microseconds")]
    Budget(String),
}
