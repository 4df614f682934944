//! Why a probe could not run (a backend absent or unusable, a measurement failed) or its table
//! could not be kept or read back (every such error names the file).

use std::path::PathBuf;
use xsched_backend_cuda::CudaError;
use xsched_backend_opencl::OclError;
use xsched_runtime::RuntimeError;

/// Why a probe could not run, or a table could not be kept or read back.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// OpenCL was asked for but is not on this machine.
    #[error("backend opencl is absent")]
    OpenClAbsent(#[source] OclError),
    /// OpenCL is present but cannot be set up for the probe (its driver cannot build or
    /// calibrate the busy kernel).
    #[error("backend opencl is present but cannot be probed")]
    OpenClUnusable(#[source] OclError),
    /// CUDA was asked for but is not on this machine.
    #[error("backend cuda is absent")]
    CudaAbsent(#[source] CudaError),
    /// A backend is present but a probe cannot measure it yet.
    #[error("backend {backend} is present, but probing it is not built yet ({instead})")]
    NotBuilt {
        /// Which.
        backend: &'static str,
        /// What measures it meanwhile.
        instead: &'static str,
    },
    /// A measurement failed.
    #[error("probing {backend}")]
    Run {
        /// Which backend.
        backend: &'static str,
        /// What failed.
        #[source]
        source: RuntimeError,
    },
    /// A table's file could not be read.
    #[error("reading probe table {}", path.display())]
    Read {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not JSON of a probe table (the message names the line, column and field).
    #[error("{} is not a probe table", path.display())]
    Malformed {
        /// Which.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: serde_json::Error,
    },
    /// A table of another format version.
    #[error(
        "probe table {} has format {found}; this xsched reads format {expected} (probe again)",
        path.display()
    )]
    Format {
        /// Which.
        path: PathBuf,
        /// The file's version.
        found: u32,
        /// The version this xsched reads ([`FORMAT`](crate::table::FORMAT)).
        expected: u32,
    },
    /// A directory could not be created or a file written.
    #[error("writing {}", path.display())]
    Write {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The table could not be encoded as JSON.
    #[error("encoding the probe table")]
    Encode(#[source] serde_json::Error),
}
