//! Profiles of the ten XPUs of the XSched evaluation (shared/docs/XPU-PROFILES.md).
//!
//! A profile is data, not code: one TOML file per device in `crates/sim/profiles/`, named by
//! its key (`gv100.toml`), built into the binary (nothing to find at run time) and parsed once,
//! on first use. A file that does not parse fails the test `every_profile_file_parses`, naming
//! the file, line and field.
//!
//! Each number carries its provenance: `published` (read from the paper or its artifact),
//! `derived` (computed from published figures, the formula in the note) or `estimated` (not
//! published; our assumption, stated). Nothing here was measured on the real device.
//!
//! Derivations used throughout:
//! - fg request = `commands` x mean command time ~ published standalone P50;
//! - sync cost ~ published "Sync" overhead x mean command time (synchronizing after every
//!   command costs that much per command), minus the launch cost;
//! - Level-2 deactivate cost ~ published Level-2 preemption P99 minus the command length.

use crate::device::Arbitration;
use crate::error::ScenarioError;
use crate::place::Place;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;
use xsched_core::{Capabilities, LaunchConfig, Level, Nanos};

/// Where a parameter's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provenance {
    /// Stated in the paper or its artifact.
    Published,
    /// Computed from published figures.
    Derived,
    /// Not published: our assumption.
    Estimated,
}

/// A value with its provenance.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param<T> {
    /// The value.
    pub value: T,
    /// Its provenance.
    pub source: Provenance,
    /// What the source says: the figure, the formula or the assumption.
    pub note: String,
}

/// The foreground request the paper ran on a device.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short key used in scenarios (`gv100`): the profile file's name.
    #[serde(skip_deserializing)]
    pub key: &'static str,
    /// Full name.
    pub name: String,
    /// Vendor runtime the paper used.
    pub platform: String,
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

/// A profile file's text, by key.
macro_rules! profile_file {
    ($key:literal) => {
        ($key, include_str!(concat!("../profiles/", $key, ".toml")))
    };
}

/// Every profile file, in the paper's order: its key and its text.
const FILES: [(&str, &str); 10] = [
    profile_file!("gv100"),
    profile_file!("k40m"),
    profile_file!("mi50"),
    profile_file!("igpu"),
    profile_file!("npu3720"),
    profile_file!("ascend910b"),
    profile_file!("dla"),
    profile_file!("ofa"),
    profile_file!("pva"),
    profile_file!("vu9p"),
];

/// The profiles, parsed on first use.
static PROFILES: LazyLock<Vec<Profile>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|&(key, src)| parse(key, src).unwrap_or_else(|e| panic!("built-in profile: {e}")))
        .collect()
});

/// The profile `key` from its file's text (an error names the file, line and field).
fn parse(key: &'static str, src: &str) -> Result<Profile, ScenarioError> {
    let mut profile: Profile = toml::from_str(src).map_err(|e| {
        let Place {
            line,
            column,
            message,
        } = Place::in_tables(src, e.span(), e.message());
        ScenarioError::Invalid {
            file: format!("crates/sim/profiles/{key}.toml"),
            line,
            column,
            message,
        }
    })?;
    profile.key = key;
    Ok(profile)
}

/// All ten profiles, in the paper's order.
pub fn all() -> Vec<Profile> {
    PROFILES.clone()
}

/// The profile with `key`, if any.
pub fn by_key(key: &str) -> Option<Profile> {
    PROFILES.iter().find(|p| p.key == key).cloned()
}

/// Every profile key, for help texts and errors.
pub fn keys() -> Vec<&'static str> {
    PROFILES.iter().map(|p| p.key).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_file_parses() {
        for (key, src) in FILES {
            if let Err(e) = parse(key, src) {
                panic!("{e}");
            }
        }
    }

    #[test]
    fn every_file_in_the_profiles_folder_is_built_in() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("profiles/ exists")
            .map(|e| {
                e.expect("readable entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        on_disk.sort_unstable();
        let mut listed: Vec<String> = FILES.iter().map(|(k, _)| format!("{k}.toml")).collect();
        listed.sort_unstable();
        assert_eq!(on_disk, listed, "profiles/ and `FILES` differ");
    }

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

    /// gv100's file with `from` replaced by `to`: the error it gives.
    fn broken(from: &str, to: &str) -> String {
        let (key, src) = FILES[0];
        assert!(src.contains(from), "gv100.toml has no `{from}`");
        match parse(key, &src.replacen(from, to, 1)) {
            Ok(_) => panic!("accepted gv100.toml with `{to}`"),
            Err(e) => e.to_string(),
        }
    }

    /// The line of gv100.toml on which `text` starts.
    fn line_of(text: &str) -> usize {
        let src = FILES[0].1;
        let at = src.find(text).expect("text in gv100.toml");
        src[..at].matches('\n').count() + 1
    }

    #[test]
    fn a_bad_profile_file_names_its_file_line_and_field() {
        let file = "crates/sim/profiles/gv100.toml";
        // A value of the wrong type.
        let e = broken("[launch]\nvalue = 4_000", "[launch]\nvalue = \"4 us\"");
        let line = line_of("[launch]") + 1;
        assert!(e.starts_with(&format!("{file}:{line}:")), "{e}");
        assert!(e.contains("`launch.value`"), "{e}");
        // An unknown field, inside a nested table.
        let e = broken("[fg.cmd_max]\nvalue", "[fg.cmd_max]\nvalu");
        let line = line_of("[fg.cmd_max]") + 1;
        assert!(e.starts_with(&format!("{file}:{line}:")), "{e}");
        assert!(e.contains("valu") && e.contains("[fg.cmd_max]"), "{e}");
        // A source that is none of the three.
        let e = broken("source = \"published\"", "source = \"measured\"");
        assert!(e.contains("measured") && e.contains("source"), "{e}");
        // An arbitration the simulator does not have.
        let e = broken("kind = \"timeslice\"", "kind = \"lottery\"");
        assert!(e.contains("lottery"), "{e}");
        // A missing field: named with its table.
        let e = broken("\nnote = \"typical cuLaunchKernel CPU cost\"", "");
        assert!(
            e.contains("[launch]") && e.contains("missing field `note`"),
            "{e}"
        );
    }
}
