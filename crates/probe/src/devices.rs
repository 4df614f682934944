//! Device discovery: the real backends of this build and their devices (or, per backend, why
//! it is absent here), each with its capability table, and this machine's name as a probe table
//! records it. `xsched devices` lists them beside the last probe's figures of the same device,
//! which [`ListedDevice::probed`] finds.

use crate::table::{BackendProbe, ProbeTable};
use xsched_core::Capabilities;

/// A real device of this build, or one backend's absence.
#[derive(Clone, Debug)]
pub struct ListedDevice {
    /// `cpu`, `opencl:0`, `cuda:1`; a backend's bare name when it is absent.
    pub key: String,
    /// The device's name, or why the backend is absent (`absent: ...`).
    pub name: String,
    /// Whether it can be used here.
    pub available: bool,
    /// What the backend offers on it.
    pub caps: Capabilities,
}

impl ListedDevice {
    /// The backend's name (`opencl` for `opencl:0`).
    pub fn backend(&self) -> &str {
        self.key.split(':').next().unwrap_or_default()
    }

    /// The figures `table` measured on this device, if it is this machine's and has them. A
    /// probe measures a backend's first device only.
    pub fn probed<'a>(&self, table: &'a ProbeTable) -> Option<&'a BackendProbe> {
        let backend = self.backend();
        let first = self.key == backend || self.key == format!("{backend}:0");
        table.backends.iter().find(|p| {
            self.available
                && first
                && p.backend == backend
                && (backend == "cpu" || self.name.starts_with(&p.device))
                && table.machine == machine()
        })
    }
}

/// The real devices of this build: the CPU device, each OpenCL device and each CUDA device (or
/// one absent entry per backend saying why, when its library, driver or devices are missing).
pub fn discover() -> Vec<ListedDevice> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut all = vec![ListedDevice {
        key: "cpu".into(),
        name: format!("built-in CPU device ({cpus} hardware threads here; workers configurable)"),
        available: true,
        caps: xsched_backend_cpu::CpuDevice::capabilities(),
    }];
    match xsched_backend_opencl::devices() {
        Ok(devices) => all.extend(devices.into_iter().enumerate().map(|(i, d)| ListedDevice {
            key: format!("opencl:{i}"),
            name: format!("{} ({})", d.name, d.platform),
            available: true,
            caps: xsched_backend_opencl::capabilities(d.cpu),
        })),
        Err(e) => all.push(ListedDevice {
            key: "opencl".into(),
            name: format!("absent: {e}"),
            available: false,
            caps: xsched_backend_opencl::capabilities(false),
        }),
    }
    match xsched_backend_cuda::devices() {
        Ok(devices) => all.extend(devices.into_iter().map(|d| ListedDevice {
            key: format!("cuda:{}", d.ordinal),
            name: d.name,
            available: true,
            caps: xsched_backend_cuda::capabilities(d.stream_memops),
        })),
        Err(e) => all.push(ListedDevice {
            key: "cuda".into(),
            name: format!("absent: {e}"),
            available: false,
            caps: xsched_backend_cuda::capabilities(true),
        }),
    }
    all
}

/// This machine, as a probe table names it (CPU model and cores available).
pub fn machine() -> String {
    format!(
        "{}, {} cores available",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, usize::from)
    )
}

/// The CPU model, as the kernel reports it.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The running kernel's release.
pub(crate) fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::FORMAT;

    fn device(key: &str, name: &str) -> ListedDevice {
        ListedDevice {
            key: key.into(),
            name: name.into(),
            available: true,
            caps: xsched_backend_cpu::CpuDevice::capabilities(),
        }
    }

    fn table(machine: String) -> ProbeTable {
        let probe = |backend: &str, device: &str| BackendProbe {
            backend: backend.into(),
            device: device.into(),
            runtime: "r".into(),
            levels: Vec::new(),
        };
        ProbeTable {
            format: FORMAT,
            taken_unix_s: 0,
            machine,
            xsched: "0".into(),
            samples: 1,
            repeats: 1,
            backends: vec![probe("cpu", "built-in"), probe("opencl", "pthread-cpu")],
        }
    }

    #[test]
    fn a_device_finds_its_backends_figures_from_this_machine_only() {
        let here = table(machine());
        let cpu = device("cpu", "built-in CPU device");
        assert_eq!(cpu.probed(&here).map(|p| p.backend.as_str()), Some("cpu"));
        let first = device("opencl:0", "pthread-cpu (Portable Computing Language)");
        assert_eq!(first.backend(), "opencl");
        assert_eq!(
            first.probed(&here).map(|p| p.device.as_str()),
            Some("pthread-cpu")
        );
        let second = device("opencl:1", "pthread-cpu (another platform)");
        assert!(second.probed(&here).is_none(), "a probe measures the first");
        let elsewhere = table("another machine".into());
        assert!(cpu.probed(&elsewhere).is_none());
        let absent = ListedDevice {
            available: false,
            ..device("cuda", "absent: no driver")
        };
        assert!(absent.probed(&here).is_none());
    }
}
