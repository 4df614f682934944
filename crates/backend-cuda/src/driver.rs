//! Finding the CUDA driver, and the devices it offers, without ever letting cudarc panic.
//!
//! cudarc (with `dynamic-loading`) opens libcuda on its first call and panics if the library or
//! a symbol is missing. So before any cudarc call the backend opens the library itself and checks
//! every entry point it uses ([`probe`]); only then does it call `cuInit`. On a machine without a
//! driver the probe fails with [`CudaError::Unavailable`] and nothing else runs: the binary starts
//! and `xsched devices` lists CUDA as absent.

use crate::error::CudaError;
use cudarc::driver::sys;
use std::ffi::{c_char, c_int};
use std::sync::OnceLock;
use xsched_core::{Capabilities, DeviceId, Level};

/// CUDA device `ordinal` is `DeviceId(FIRST_DEVICE_ID + ordinal)`: the same in every process on
/// the machine (for one `CUDA_VISIBLE_DEVICES`), apart from the CPU and OpenCL devices' ids.
pub const FIRST_DEVICE_ID: u16 = 0x200;

/// The library names cudarc tries that exist on Linux, in its order.
const LIBRARIES: [&str; 2] = ["libcuda.so", "libcuda.so.1"];

/// Every driver entry point the backend calls (cudarc resolves them lazily; a missing one would
/// panic there).
const SYMBOLS: [&str; 20] = [
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxGetDevice",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamWaitValue32_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
    "cuMemHostAlloc",
    "cuMemHostGetDevicePointer_v2",
    "cuMemFreeHost",
    "cuStreamSynchronize",
];

/// The driver library, opened once and kept open so cudarc's own open finds the same one.
static PROBE: OnceLock<Result<libloading::Library, CudaError>> = OnceLock::new();

fn open() -> Result<libloading::Library, CudaError> {
    let mut errors = Vec::new();
    for name in LIBRARIES {
        // SAFETY: loading the CUDA driver runs its initialisers, which have no preconditions
        // (cudarc loads the same library the same way).
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => {
                let missing: Vec<&str> = SYMBOLS
                    .iter()
                    .copied()
                    // SAFETY: only the symbol's presence is checked; nothing is called.
                    .filter(|s| unsafe { lib.get::<*const ()>(s.as_bytes()) }.is_err())
                    .collect();
                if missing.is_empty() {
                    return Ok(lib);
                }
                errors.push(format!("{name} lacks {}", missing.join(", ")));
            }
            Err(e) => {
                let why = std::error::Error::source(&e).map_or(e.to_string(), ToString::to_string);
                errors.push(why);
            }
        }
    }
    Err(CudaError::Unavailable(format!(
        "no usable CUDA driver ({})",
        errors.join("; ")
    )))
}

/// Check that a usable driver is here and initialise it (`cuInit`). Every other function of this
/// crate calls it first; it is cheap after the first time.
pub fn probe() -> Result<(), CudaError> {
    let lib = PROBE.get_or_init(open);
    if let Err(e) = lib {
        return Err(e.clone());
    }
    static INIT: OnceLock<Result<(), CudaError>> = OnceLock::new();
    INIT.get_or_init(|| {
        // SAFETY: the library and `cuInit` were found by the probe above; flags must be 0.
        let code = unsafe { sys::cuInit(0) };
        CudaError::check("cuInit", code)
            .map_err(|e| CudaError::Unavailable(format!("the driver does not start: {e}")))
    })
    .clone()
}

/// One CUDA device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaDevice {
    /// xsched's id for it.
    pub id: DeviceId,
    /// The driver's ordinal.
    pub ordinal: c_int,
    /// Its name (`cuDeviceGetName`).
    pub name: String,
    /// Whether it can hold queued work behind stream memory waits (Level 2).
    pub stream_memops: bool,
}

/// xsched's id of device `ordinal`.
pub fn device_id(ordinal: c_int) -> DeviceId {
    let offset = u16::try_from(ordinal).unwrap_or(u16::MAX - FIRST_DEVICE_ID);
    DeviceId(FIRST_DEVICE_ID.saturating_add(offset))
}

fn attribute(attr: sys::CUdevice_attribute, dev: sys::CUdevice) -> Result<c_int, CudaError> {
    let mut value: c_int = 0;
    // SAFETY: the driver was probed; `value` is a valid out-pointer.
    let code = unsafe { sys::cuDeviceGetAttribute(&mut value, attr, dev) };
    CudaError::check("cuDeviceGetAttribute", code)?;
    Ok(value)
}

/// Whether device `dev` supports the gate: host memory mapped into the device, and stream memory
/// waits (the v2 entry points need no driver option from CUDA 12 on; before, the device attribute
/// says). A stream confirms it with a first wait when it is created.
pub(crate) fn has_stream_memops(dev: sys::CUdevice) -> Result<bool, CudaError> {
    use sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1,
    };
    let maps = attribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, dev)? == 1;
    let memops = attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, dev)? == 1;
    Ok(maps && (memops || driver_version()? >= 12000))
}

/// The driver's CUDA version (`12040` for 12.4).
pub fn driver_version() -> Result<c_int, CudaError> {
    let mut version: c_int = 0;
    // SAFETY: probed by the callers; `version` is a valid out-pointer.
    let code = unsafe { sys::cuDriverGetVersion(&mut version) };
    CudaError::check("cuDriverGetVersion", code)?;
    Ok(version)
}

/// Every CUDA device here; [`CudaError::Unavailable`] when the driver or a device is missing.
pub fn devices() -> Result<Vec<CudaDevice>, CudaError> {
    probe()?;
    let mut count: c_int = 0;
    // SAFETY: probed; `count` is a valid out-pointer.
    CudaError::check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    if count == 0 {
        return Err(CudaError::Unavailable("no CUDA device found".into()));
    }
    (0..count)
        .map(|ordinal| {
            let mut dev: sys::CUdevice = 0;
            // SAFETY: probed; `dev` is a valid out-pointer and `ordinal` < count.
            CudaError::check("cuDeviceGet", unsafe {
                sys::cuDeviceGet(&mut dev, ordinal)
            })?;
            let mut name = [0 as c_char; 256];
            // SAFETY: the buffer holds `len` bytes; the driver NUL-terminates within it.
            let code = unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 255, dev) };
            CudaError::check("cuDeviceGetName", code)?;
            // SAFETY: NUL-terminated by the driver within the zeroed buffer.
            let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            Ok(CudaDevice {
                id: device_id(ordinal),
                ordinal,
                name,
                stream_memops: has_stream_memops(dev)?,
            })
        })
        .collect()
}

/// The CUDA backend's capability table: Level 2 where the device has stream memory operations,
/// else Level 1 only.
pub fn capabilities(stream_memops: bool) -> Capabilities {
    Capabilities {
        max_level: if stream_memops {
            Level::Deactivate
        } else {
            Level::Block
        },
        native_arbitration: "driver: streams of one context share the device; contexts of \
                             different processes are time-sliced by the GPU"
            .into(),
        preemption_unit: if stream_memops {
            "command (Level 2: queued commands wait behind a closed stream memory gate)".into()
        } else {
            "none (Level 1: launched commands drain)".into()
        },
        keeps_state: false,
        hardware_priority: true,
    }
}
