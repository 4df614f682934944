//! Profiles of the ten XPUs of the XSched evaluation (shared/docs/XPU-PROFILES.md).
//!
//! Each number carries its provenance: `Published` (read from the paper or its artifact),
//! `Derived` (computed from published figures, the formula in the note) or `Estimated` (not
//! published; our assumption, stated). Nothing here was measured on the real device.
//!
//! Derivations used throughout:
//! - fg request = `commands` x mean command time ~ published standalone P50;
//! - sync cost ~ published "Sync" overhead x mean command time (synchronizing after every
//!   command costs that much per command), minus the launch cost;
//! - Level-2 deactivate cost ~ published Level-2 preemption P99 minus the command length.

use crate::device::Arbitration;
use serde::Serialize;
use xsched_core::{Capabilities, LaunchConfig, Level, Nanos};

/// Where a parameter's value comes from.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(tag = "source", content = "note", rename_all = "lowercase")]
pub enum Source {
    /// Stated in the paper or its artifact.
    Published(&'static str),
    /// Computed from published figures.
    Derived(&'static str),
    /// Not published: our assumption.
    Estimated(&'static str),
}

/// A value with its provenance.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Param<T> {
    /// The value.
    pub value: T,
    /// Its provenance.
    #[serde(flatten)]
    pub source: Source,
}

const fn p<T>(value: T, source: Source) -> Param<T> {
    Param { value, source }
}

const fn us(v: u64) -> Nanos {
    Nanos::from_us(v)
}

/// The foreground request the paper ran on a device.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FgShape {
    /// Commands per request.
    pub commands: Param<u32>,
    /// Shortest command.
    pub cmd_min: Param<Nanos>,
    /// Longest command (equal to `cmd_min` for fixed-length commands).
    pub cmd_max: Param<Nanos>,
    /// Arrival rate at 20 % of peak, requests per second.
    pub rate_per_s: Param<f64>,
}

impl FgShape {
    /// Mean command time.
    pub fn cmd_mean(&self) -> Nanos {
        Nanos((self.cmd_min.value.0 + self.cmd_max.value.0) / 2)
    }
}

/// One simulated XPU.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// Short key used in scenarios (`gv100`).
    pub key: &'static str,
    /// Full name.
    pub name: &'static str,
    /// Vendor runtime the paper used.
    pub platform: &'static str,
    /// Highest preemption level the paper implemented on it.
    pub max_level: Param<Level>,
    /// Native arbitration between processes.
    pub arbitration: Param<Arbitration>,
    /// CPU cost of one launch call.
    pub launch: Param<Nanos>,
    /// Extra CPU cost per command through an XQueue (interception, bookkeeping).
    pub intercept: Param<Nanos>,
    /// From a synchronization point completing to the launcher observing it.
    pub sync: Param<Nanos>,
    /// Level 2: time for a deactivate to take effect.
    pub deactivate: Param<Nanos>,
    /// Level 3: time for an interrupt to stop the running command.
    pub interrupt: Param<Nanos>,
    /// Level 3: time to restore an interrupted queue.
    pub restore: Param<Nanos>,
    /// The in-flight threshold / batch the paper used for fixed priority.
    pub launch_config: Param<(u32, u32)>,
    /// The bandwidth-partition time slice the paper used.
    pub bandwidth_slice: Param<Nanos>,
    /// The foreground workload.
    pub fg: FgShape,
}

/// The `serde` view of `Arbitration` for profile listings.
impl Serialize for Arbitration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

impl Profile {
    /// The capability table of the simulated device.
    pub fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_level: self.max_level.value,
            native_arbitration: self.arbitration.value.label(),
            preemption_unit: match self.max_level.value {
                Level::Block => "none (drain in-flight commands)",
                Level::Deactivate => "command (queued commands held)",
                Level::Interrupt => "instruction (running command stopped)",
            }
            .into(),
            keeps_state: self.max_level.value == Level::Interrupt,
            hardware_priority: false,
        }
    }

    /// The paper's launch config for this device.
    pub fn launch_config(&self) -> LaunchConfig {
        let (t, b) = self.launch_config.value;
        LaunchConfig::new(t, b).expect("profile configs are valid (unit-tested)")
    }
}

/// The cost of a level the device does not have.
const NO_LEVEL_2: Param<Nanos> = p(Nanos::ZERO, Source::Published("no Level 2"));
const NO_LEVEL_3: Param<Nanos> = p(Nanos::ZERO, Source::Published("no Level 3"));

const FIG: Source = Source::Published("XPU-PROFILES.md table");
const STD_INTERCEPT: Source =
    Source::Estimated("one function call and queue push through the shim");
const SA_SPLIT: Source = Source::Derived("commands x mean command time = published standalone P50");

/// All ten profiles, in the paper's order.
pub fn all() -> Vec<Profile> {
    vec![
        Profile {
            key: "gv100",
            name: "NVIDIA GV100 (Volta)",
            platform: "CUDA + TensorRT",
            max_level: p(Level::Interrupt, FIG),
            arbitration: p(
                Arbitration::TimeSlice {
                    slice: us(1000),
                    switch: us(25),
                },
                Source::Estimated("time-slice groups; 1 ms slice and 25 us switch assumed"),
            ),
            launch: p(us(4), Source::Estimated("typical cuLaunchKernel CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(16),
                Source::Derived("Sync 35 % x 57.5 us mean command - launch"),
            ),
            deactivate: p(
                us(70),
                Source::Derived("Lv2 preemption 0.57 ms at 0.5 ms commands"),
            ),
            interrupt: p(us(32), Source::Published("Lv3 preemption P99 32 us")),
            restore: p(
                us(20),
                Source::Estimated("context restore, same order as interrupt"),
            ),
            launch_config: p((16, 8), FIG),
            bandwidth_slice: p(us(5000), Source::Published("reference default slice 5 ms")),
            fg: FgShape {
                commands: p(114, SA_SPLIT),
                cmd_min: p(us(2), Source::Published("command duration 2-113 us")),
                cmd_max: p(us(113), Source::Published("command duration 2-113 us")),
                rate_per_s: p(30.7, FIG),
            },
        },
        Profile {
            key: "k40m",
            name: "NVIDIA K40m (Kepler)",
            platform: "CUDA",
            max_level: p(Level::Deactivate, FIG),
            arbitration: p(
                Arbitration::TimeSlice {
                    slice: us(1000),
                    switch: us(25),
                },
                Source::Estimated("equal share published; time slicing assumed as on GV100"),
            ),
            launch: p(us(5), Source::Estimated("typical cuLaunchKernel CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(96),
                Source::Derived("Sync 54 % x 187 us mean command - launch"),
            ),
            deactivate: p(
                us(20),
                Source::Derived("Lv2 preemption 0.52 ms at 0.5 ms commands"),
            ),
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((16, 8), FIG),
            bandwidth_slice: p(us(5000), Source::Published("reference default slice 5 ms")),
            fg: FgShape {
                commands: p(150, Source::Estimated("ResNet-152 layer count order")),
                cmd_min: p(us(150), SA_SPLIT),
                cmd_max: p(us(224), SA_SPLIT),
                rate_per_s: p(7.1, FIG),
            },
        },
        Profile {
            key: "mi50",
            name: "AMD MI50",
            platform: "HIP (ROCm)",
            max_level: p(Level::Block, FIG),
            arbitration: p(
                Arbitration::Concurrent { speedup: 1.14 },
                Source::Published("two processes concurrently, native total 1.14x"),
            ),
            launch: p(us(5), Source::Estimated("typical hipLaunchKernel CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(30),
                Source::Derived("Sync 18 % x 195 us mean command - launch"),
            ),
            deactivate: NO_LEVEL_2,
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((16, 8), FIG),
            bandwidth_slice: p(us(5000), Source::Published("reference default slice 5 ms")),
            fg: FgShape {
                commands: p(150, Source::Estimated("ResNet-152 layer count order")),
                cmd_min: p(us(156), SA_SPLIT),
                cmd_max: p(us(234), SA_SPLIT),
                rate_per_s: p(7.0, FIG),
            },
        },
        Profile {
            key: "igpu",
            name: "Intel Arc iGPU (Core Ultra 9 185H)",
            platform: "Level Zero",
            max_level: p(Level::Block, FIG),
            arbitration: p(
                Arbitration::TimeSlice {
                    slice: us(1000),
                    switch: us(50),
                },
                Source::Estimated("equal share published; time slicing assumed"),
            ),
            launch: p(
                us(8),
                Source::Estimated("Level Zero append + execute CPU cost"),
            ),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(274),
                Source::Derived("Sync 151 % x 187 us mean command - launch"),
            ),
            deactivate: NO_LEVEL_2,
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((16, 8), FIG),
            bandwidth_slice: p(us(20_000), Source::Published("BP 1/1 with 20 ms slice")),
            fg: FgShape {
                commands: p(150, Source::Estimated("ResNet-152 layer count order")),
                cmd_min: p(us(150), SA_SPLIT),
                cmd_max: p(us(224), SA_SPLIT),
                rate_per_s: p(6.5, FIG),
            },
        },
        Profile {
            key: "npu3720",
            name: "Intel NPU 3720 (Meteor Lake)",
            platform: "Level Zero / OpenVINO, modified driver",
            max_level: p(Level::Deactivate, FIG),
            arbitration: p(Arbitration::Fifo, Source::Published("FCFS, non-preemptive")),
            launch: p(
                us(10),
                Source::Estimated("OpenVINO infer-request submit CPU cost"),
            ),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(575),
                Source::Derived("Sync 65 % x 900 us mean command - launch"),
            ),
            deactivate: p(
                us(50),
                Source::Estimated("firmware queue suspend, tens of us"),
            ),
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((4, 2), Source::Published("FP bg Lv2 4/2")),
            bandwidth_slice: p(us(5000), Source::Published("reference default slice 5 ms")),
            fg: FgShape {
                commands: p(26, SA_SPLIT),
                cmd_min: p(
                    us(800),
                    Source::Derived("Lv1 4.1 ms at thr 4, Lv2 0.85 ms: ~0.9 ms"),
                ),
                cmd_max: p(
                    us(1000),
                    Source::Derived("Lv1 4.1 ms at thr 4, Lv2 0.85 ms: ~0.9 ms"),
                ),
                rate_per_s: p(8.8, FIG),
            },
        },
        Profile {
            key: "ascend910b",
            name: "Huawei Ascend 910B3",
            platform: "AscendCL",
            max_level: p(Level::Block, FIG),
            arbitration: p(
                Arbitration::Concurrent { speedup: 1.20 },
                Source::Published("concurrent, native total 1.20x"),
            ),
            launch: p(us(10), Source::Estimated("aclrtLaunch CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(154),
                Source::Derived("Sync 78 % x 210 us mean command - launch"),
            ),
            deactivate: NO_LEVEL_2,
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((3, 1), Source::Published("FP bg 3/1")),
            bandwidth_slice: p(us(800), Source::Published("BP 800 us slice")),
            fg: FgShape {
                commands: p(10, Source::Published("10 commands per request")),
                cmd_min: p(us(210), Source::Derived("~210 us average")),
                cmd_max: p(us(210), Source::Derived("~210 us average")),
                rate_per_s: p(145.0, FIG),
            },
        },
        Profile {
            key: "dla",
            name: "NVIDIA DLA (Jetson AGX Orin)",
            platform: "cuDLA",
            max_level: p(Level::Block, FIG),
            arbitration: p(
                Arbitration::Fifo,
                Source::Estimated("equal share published; FIFO assumed as on Orin's other ASICs"),
            ),
            launch: p(us(10), Source::Estimated("cuDLA submit CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(24),
                Source::Derived("Sync 8.2 % x 420 us mean command - launch"),
            ),
            deactivate: NO_LEVEL_2,
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((2, 1), Source::Published("FP bg 2/1")),
            bandwidth_slice: p(us(5000), Source::Published("reference default slice 5 ms")),
            fg: FgShape {
                commands: p(8, Source::Published("8 commands per request")),
                cmd_min: p(
                    us(180),
                    Source::Derived("95-661 us stated, 420 us average: centred range"),
                ),
                cmd_max: p(us(661), Source::Published("longest command 661 us")),
                rate_per_s: p(42.7, FIG),
            },
        },
        Profile {
            key: "ofa",
            name: "NVIDIA OFA (Orin)",
            platform: "VPI",
            max_level: p(Level::Block, FIG),
            arbitration: p(
                Arbitration::Concurrent { speedup: 1.06 },
                Source::Published("native total 1.06x"),
            ),
            launch: p(us(10), Source::Estimated("VPI submit CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(1049),
                Source::Derived("Sync 38.5 % x 2750 us mean command - launch"),
            ),
            deactivate: NO_LEVEL_2,
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((4, 2), Source::Published("FP bg 4/2")),
            bandwidth_slice: p(us(30_000), Source::Published("BP 30 ms slice")),
            fg: FgShape {
                commands: p(8, Source::Published("8 commands per request")),
                cmd_min: p(us(2750), Source::Derived("~2750 us")),
                cmd_max: p(us(2750), Source::Derived("~2750 us")),
                rate_per_s: p(9.0, FIG),
            },
        },
        Profile {
            key: "pva",
            name: "NVIDIA PVA (Orin)",
            platform: "VPI",
            max_level: p(Level::Block, FIG),
            arbitration: p(Arbitration::Fifo, Source::Published("FCFS")),
            launch: p(us(10), Source::Estimated("VPI submit CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(84),
                Source::Derived("Sync 10.3 % x 912 us mean command - launch"),
            ),
            deactivate: NO_LEVEL_2,
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p((2, 1), Source::Published("FP bg 2/1")),
            bandwidth_slice: p(us(50_000), Source::Published("BP 50 ms slice")),
            fg: FgShape {
                commands: p(8, Source::Estimated("frame processed as 8 tiles")),
                cmd_min: p(us(912), SA_SPLIT),
                cmd_max: p(us(912), SA_SPLIT),
                rate_per_s: p(2.0, FIG),
            },
        },
        Profile {
            key: "vu9p",
            name: "Xilinx VU9P FPGA",
            platform: "OpenCL",
            max_level: p(Level::Block, FIG),
            arbitration: p(
                Arbitration::Concurrent { speedup: 1.24 },
                Source::Published("native total 1.24x"),
            ),
            launch: p(us(10), Source::Estimated("clEnqueueNDRangeKernel CPU cost")),
            intercept: p(Nanos(500), STD_INTERCEPT),
            sync: p(
                us(275),
                Source::Derived("Sync 17 % x 1675 us mean command - launch"),
            ),
            deactivate: NO_LEVEL_2,
            interrupt: NO_LEVEL_3,
            restore: NO_LEVEL_3,
            launch_config: p(
                (2, 1),
                Source::Estimated("paper range 2-16; smallest used elsewhere"),
            ),
            bandwidth_slice: p(
                us(20_000),
                Source::Estimated(
                    "not published; 20 ms as on the iGPU, long against 1.7 ms commands",
                ),
            ),
            fg: FgShape {
                commands: p(8, Source::Estimated("vector addition in 8 chunks")),
                cmd_min: p(us(1675), SA_SPLIT),
                cmd_max: p(us(1675), SA_SPLIT),
                rate_per_s: p(14.9, Source::Derived("20 % of peak = 0.2 / 13.4 ms")),
            },
        },
    ]
}

/// The profile with `key`, if any.
pub fn by_key(key: &str) -> Option<Profile> {
    all().into_iter().find(|p| p.key == key)
}

/// Every profile key, for help texts and errors.
pub fn keys() -> Vec<&'static str> {
    all().iter().map(|p| p.key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_valid_profiles_with_unique_keys() {
        let all = all();
        assert_eq!(all.len(), 10);
        let mut keys: Vec<_> = all.iter().map(|p| p.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 10);
        for p in &all {
            let (t, b) = p.launch_config.value;
            assert!(LaunchConfig::new(t, b).is_ok(), "{}", p.key);
            assert!(p.fg.cmd_min.value <= p.fg.cmd_max.value, "{}", p.key);
            if p.max_level.value < Level::Interrupt {
                assert_eq!(p.interrupt.value, Nanos::ZERO, "{}", p.key);
            }
        }
    }
}
