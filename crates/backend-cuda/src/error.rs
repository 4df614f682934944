//! Typed errors of the CUDA backend: the driver is absent, or a call failed with the driver's
//! status code (kept, so callers can report it or hand it back unchanged).

use cudarc::driver::sys::CUresult;
use thiserror::Error;

/// What the CUDA backend reports.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CudaError {
    /// No usable CUDA here: no driver library, a driver without the entry points xsched needs,
    /// or no device.
    #[error("CUDA is not available: {0}")]
    Unavailable(String),
    /// A driver call returned an error status.
    #[error("{call} failed: {code:?}")]
    Call {
        /// The driver function.
        call: &'static str,
        /// Its status code, unchanged.
        code: CUresult,
    },
}

impl CudaError {
    /// `Ok` for `CUDA_SUCCESS`, else the failed `call` with its code.
    pub fn check(call: &'static str, code: CUresult) -> Result<(), CudaError> {
        if code == CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(CudaError::Call { call, code })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_passes_and_failures_keep_their_code() {
        assert_eq!(CudaError::check("cuInit", CUresult::CUDA_SUCCESS), Ok(()));
        let e = CudaError::check("cuStreamSynchronize", CUresult::CUDA_ERROR_INVALID_HANDLE)
            .expect_err("an error");
        assert!(
            e.to_string().contains("CUDA_ERROR_INVALID_HANDLE")
                && e.to_string().contains("cuStreamSynchronize"),
            "{e}"
        );
    }
}
