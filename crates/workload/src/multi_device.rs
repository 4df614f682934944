//! A foreground pipeline across two devices, a stage on each, beside a saturating background on
//! both (XSched §7.3), as its runners see it: the simulator's `multi-device` scenario and the
//! CPU device's `xsched bench multi-device` run the same modes and check the paper's finding
//! the same way: one policy across both devices beats one policy per device.

use xsched_report::{Check, Verdict};

/// How the two devices are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMode {
    /// The pipeline alone.
    Standalone,
    /// With the backgrounds, natively.
    Native,
    /// Under xsched, one fixed-priority decision per device (`hpf`).
    PerDevice,
    /// Under xsched, one decision across both devices (`hpf-global`).
    Global,
}

/// Every mode, in report order.
pub const MODES: [ShareMode; 4] = [
    ShareMode::Standalone,
    ShareMode::Native,
    ShareMode::PerDevice,
    ShareMode::Global,
];

impl ShareMode {
    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            ShareMode::Standalone => "standalone",
            ShareMode::Native => "native",
            ShareMode::PerDevice => "per-device",
            ShareMode::Global => "global",
        }
    }

    /// The xsched policy it runs under, if any.
    pub fn policy(self) -> Option<&'static str> {
        match self {
            ShareMode::PerDevice => Some("hpf"),
            ShareMode::Global => Some("hpf-global"),
            ShareMode::Standalone | ShareMode::Native => None,
        }
    }
}

/// The paper's finding on `devices`: the pipeline's P99 over standalone is lower under one
/// policy across both devices (`global`) than under one per device (`per_device`).
pub fn global_check(devices: &str, global: f64, per_device: f64) -> Check {
    Check {
        name: format!("{devices} global vs per-device P99 ratio"),
        target: "global < per-device (paper: 1.09 vs 1.55)".into(),
        measured: format!("{global:.2} vs {per_device:.2}"),
        verdict: Verdict::of(global < per_device),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_name_their_policies_and_the_check_orders_them() {
        let policies: Vec<_> = MODES.iter().map(|m| m.policy()).collect();
        assert_eq!(policies, [None, None, Some("hpf"), Some("hpf-global")]);
        assert_eq!(ShareMode::PerDevice.name(), "per-device");
        let c = global_check("a+b", 1.09, 1.55);
        assert!(c.verdict == Verdict::Met);
        assert_eq!(c.measured, "1.09 vs 1.55");
        assert!(
            global_check("a+b", 1.55, 1.55).verdict == Verdict::Missed,
            "equal is no gain"
        );
    }
}
