//! Which OpenCL devices this machine has, the ids xsched gives them, and the backend's
//! capability table.

use crate::demote;
use crate::error::OclError;
use cl3::device::CL_DEVICE_TYPE_ALL;
use cl3::types::cl_device_id;
use opencl3::device::Device;
use std::sync::Mutex;
use xsched_core::{Capabilities, DeviceId, Level};

/// OpenCL device `i` (in the order of all platforms' devices) is `DeviceId(FIRST_DEVICE_ID + i)`:
/// the same in every process on the machine, and apart from the CPU device's small ids.
pub const FIRST_DEVICE_ID: u16 = 0x100;

/// One OpenCL device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OclDevice {
    /// xsched's id for it.
    pub id: DeviceId,
    /// The device's name (`CL_DEVICE_NAME`).
    pub name: String,
    /// Its platform's name (`CL_PLATFORM_NAME`).
    pub platform: String,
    /// The device is this machine's CPU (`CL_DEVICE_TYPE_CPU`): its kernels run on this
    /// process's threads.
    pub cpu: bool,
}

/// The OpenCL backend's capability table for a device; `cpu` says whether it is this
/// machine's CPU. A CPU device offers Level 2 by thread priority where this process may undo
/// a demotion (see `demote.rs`); every other device, Level 1.
pub fn capabilities(cpu: bool) -> Capabilities {
    let native_arbitration = "driver: queues of different contexts and processes run as the \
                              driver decides (POCL on CPU: concurrently, OS-time-sliced)"
        .into();
    if cpu && demote::available() {
        return Capabilities {
            max_level: Level::Deactivate,
            native_arbitration,
            preemption_unit: "none (Level 2 by thread priority: a deactivated process's device \
                              threads run SCHED_IDLE, on idle CPU only, until reactivated)"
                .into(),
            keeps_state: false,
            hardware_priority: false,
        };
    }
    let preemption_unit = if cpu {
        "none (Level 1: launched commands drain; Level 2 by thread priority needs CAP_SYS_NICE \
         or RLIMIT_NICE >= 20 to undo a demotion)"
    } else {
        "none (Level 1: launched commands drain)"
    };
    Capabilities {
        max_level: Level::Block,
        native_arbitration,
        preemption_unit: preemption_unit.into(),
        keeps_state: false,
        hardware_priority: false,
    }
}

/// Whether `raw` is a CPU device (a failed query counts as not).
pub(crate) fn is_cpu(raw: cl_device_id) -> bool {
    cl3::device::get_device_info(raw, cl3::device::CL_DEVICE_TYPE)
        .map(|t| u64::from(t) & cl3::device::CL_DEVICE_TYPE_CPU != 0)
        .unwrap_or(false)
}

/// Held while this process lists devices. POCL 3.1 sets its devices up in the first
/// `clGetDeviceIDs`, and a second thread's call at that moment can return devices not yet set
/// up, whose first `clGetDeviceInfo` then crashes. One listing at a time, the second waits for
/// the setup to end.
static LISTING: Mutex<()> = Mutex::new(());

fn all_raw() -> Result<Vec<cl_device_id>, OclError> {
    // Nothing the lock guards can be left half-done by a panic.
    let _one = LISTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let platforms =
        cl3::platform::get_platform_ids().map_err(|c| OclError::call("clGetPlatformIDs", c))?;
    let mut all = Vec::new();
    for p in platforms {
        match cl3::device::get_device_ids(p, CL_DEVICE_TYPE_ALL) {
            Ok(mut ids) => all.append(&mut ids),
            Err(cl3::error_codes::CL_DEVICE_NOT_FOUND) => {}
            Err(c) => return Err(OclError::call("clGetDeviceIDs", c)),
        }
    }
    Ok(all)
}

fn id_at(index: usize) -> DeviceId {
    let offset = u16::try_from(index).unwrap_or(u16::MAX - FIRST_DEVICE_ID);
    DeviceId(FIRST_DEVICE_ID.saturating_add(offset))
}

/// Every OpenCL device here; [`OclError::Unavailable`] when the library or a platform is missing.
pub fn devices() -> Result<Vec<OclDevice>, OclError> {
    let raw = all_raw()?;
    if raw.is_empty() {
        return Err(OclError::Unavailable("no OpenCL device found".into()));
    }
    raw.into_iter()
        .enumerate()
        .map(|(i, d)| {
            let device = Device::new(d);
            let name = device
                .name()
                .map_err(|e| OclError::call("clGetDeviceInfo", e.0))?;
            let platform = device
                .platform()
                .and_then(|p| opencl3::platform::Platform::new(p).name())
                .map_err(|e| OclError::call("clGetPlatformInfo", e.0))?;
            Ok(OclDevice {
                id: id_at(i),
                name,
                platform,
                cpu: is_cpu(d),
            })
        })
        .collect()
}

/// The id of the device `raw`.
pub fn device_id_of(raw: cl_device_id) -> Result<DeviceId, OclError> {
    all_raw()?
        .iter()
        .position(|&d| d == raw)
        .map(id_at)
        .ok_or(OclError::Call {
            call: "clGetDeviceIDs",
            code: cl3::error_codes::CL_INVALID_DEVICE,
        })
}
