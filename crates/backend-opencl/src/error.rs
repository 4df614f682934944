//! Typed errors of the OpenCL backend: the library or a device is absent, or a call failed with
//! the vendor's status code (kept as is, so callers can hand it back unchanged).

use cl3::types::cl_int;
use thiserror::Error;

/// What the OpenCL backend reports.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OclError {
    /// No usable OpenCL here: libOpenCL.so.1 is not installed, or no platform (ICD) is.
    #[error("OpenCL is not available: {0}")]
    Unavailable(String),
    /// An OpenCL call returned an error status.
    #[error("{call} failed: {} ({code})", cl3::error_codes::error_text(*.code))]
    Call {
        /// The OpenCL function.
        call: &'static str,
        /// Its status code, unchanged.
        code: cl_int,
    },
}

impl OclError {
    /// `call` failed with `code`; the library being absent becomes [`OclError::Unavailable`].
    pub fn call(call: &'static str, code: cl_int) -> OclError {
        match code {
            cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED => {
                OclError::Unavailable("cannot load libOpenCL.so.1 (install an ICD loader)".into())
            }
            cl3::error_codes::CL_PLATFORM_NOT_FOUND_KHR => {
                OclError::Unavailable("no OpenCL platform is installed (no ICD)".into())
            }
            code => OclError::Call { call, code },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kept_and_absence_is_named() {
        let e = OclError::call("clFinish", cl3::error_codes::CL_INVALID_COMMAND_QUEUE);
        assert_eq!(
            e,
            OclError::Call {
                call: "clFinish",
                code: -36
            }
        );
        assert!(e.to_string().contains("CL_INVALID_COMMAND_QUEUE"), "{e}");
        let gone = OclError::call(
            "clGetPlatformIDs",
            cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED,
        );
        assert!(matches!(gone, OclError::Unavailable(_)));
    }
}
