//! Scheduling policies, one file each; the one table that names them; and [`PolicySpec`], what
//! text naming a policy (`hpf`, `kedf:2`, `hpf:min-share=0.1`) becomes where it enters (an
//! environment variable, a command line, a config or scenario file, a daemon frame). A spec is
//! checked against the table there and carried typed from then on, so every entry gives the same
//! error and nothing parses it again.
//!
//! Most policies are rank functions (SOAP, Scully et al. 2018): each ready queue gets a rank and
//! the lowest rank in a scope (a device, or all devices) runs. [`serve_lowest_rank`] does that
//! once for all of them. Share policies keep a little state and ask for timers.
//!
//! **Adding a policy** is one new file and one row of `table!` below: the file implements
//! [`Policy`] and lists its names in `pub(super) const ENTRIES: &[PolicyEntry]` (each a
//! [`PolicyEntry`]: the name, the argument it takes, how to build it); the row declares the file.
//! [`PolicySpec`] (parsing, the error naming the known policies, [`names`] and [`usage`] for help
//! texts) reads the table, so nothing else changes. A test checks that every policy file here is
//! a row.

mod contract;
mod hold;
mod vtime;

pub use contract::{Policy, PolicyEntry, Scope, serve_lowest_rank};

use crate::error::CoreError;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::str::FromStr;

/// Declares each policy file and lists its [`PolicyEntry`] rows, in the order help texts show them.
macro_rules! table {
    ($($(#[$attr:meta])* pub mod $file:ident;)*) => {
        $($(#[$attr])* pub mod $file;)*

        /// Every file's entries, in the table's order.
        const FILES: &[&[PolicyEntry]] = &[$($(#[$attr])* $file::ENTRIES),*];

        /// The table's files, by name, for the test that every policy file is a row.
        #[cfg(test)]
        const FILE_NAMES: &[&str] = &[$($(#[$attr])* stringify!($file)),*];
    };
}

table! {
    pub mod fcfs;
    pub mod starvation;
    pub mod hpf;
    pub mod bandwidth;
    pub mod laxity;
    pub mod kedf;
    pub mod cfs;
    pub mod mlfq;
    pub mod slo_aware;
    pub mod throttle;
    #[cfg(test)]
    pub mod test_policy;
}

/// Every row of the table, in order.
fn rows() -> impl Iterator<Item = &'static PolicyEntry> {
    FILES.iter().flat_map(|file| file.iter())
}

pub use bandwidth::Bandwidth;
pub use cfs::Cfs;
pub use fcfs::Fcfs;
pub use hold::{Held, MAX_HOLD};
pub use hpf::{Hpf, HpfGlobal};
pub use kedf::KEarliestDeadline;
pub use laxity::Laxity;
pub use mlfq::Mlfq;
pub use slo_aware::SloAware;
pub use starvation::Guarded;
pub use throttle::Throttle;

/// A registered policy and its argument, checked: [`PolicySpec::build`] cannot fail.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct PolicySpec {
    /// The table's name (always a row's name).
    name: &'static str,
    /// What followed the `:`, as written.
    argument: Option<Box<str>>,
}

impl PolicySpec {
    /// A policy named in code, not in input (`PolicySpec::registered("hpf")`). Text from
    /// outside goes through [`FromStr`], whose error names the known policies.
    ///
    /// # Panics
    /// If `name` is not a policy the table registers: a programming error, which any test that
    /// runs the line finds.
    pub fn registered(name: &'static str) -> PolicySpec {
        match name.parse() {
            Ok(spec) => spec,
            Err(e) => panic!("{e}"),
        }
    }

    /// The policy's name without its argument (`hpf` for `hpf:min-share=0.1`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// A fresh policy as this spec describes it.
    pub fn build(&self) -> Box<dyn Policy> {
        let entry = row(self.name).expect("a PolicySpec names a table row");
        (entry.build)(self.argument.as_deref()).expect("a PolicySpec's argument was checked")
    }
}

/// The fixed-priority policy, what a runtime or daemon runs when nobody names one.
impl Default for PolicySpec {
    fn default() -> PolicySpec {
        PolicySpec {
            name: "hpf",
            argument: None,
        }
    }
}

/// Every registered policy name, in the table's order, for help texts and errors.
pub fn names() -> impl Iterator<Item = &'static str> {
    rows().map(|e| e.name)
}

/// Every policy name with its argument form, for help texts: `kedf[:K]`.
pub fn usage() -> Vec<String> {
    rows()
        .map(|e| match e.argument {
            Some(a) => format!("{}[:{a}]", e.name),
            None => e.name.to_string(),
        })
        .collect()
}

fn row(name: &str) -> Option<&'static PolicyEntry> {
    rows().find(|e| e.name == name)
}

impl FromStr for PolicySpec {
    type Err = CoreError;

    fn from_str(text: &str) -> Result<PolicySpec, CoreError> {
        let (base, argument) = match text.split_once(':') {
            Some((b, a)) => (b, Some(a)),
            None => (text, None),
        };
        let entry = row(base).ok_or_else(|| CoreError::UnknownPolicy {
            name: text.to_string(),
            known: usage().join(", "),
        })?;
        let bad = |reason| CoreError::BadPolicyArgument {
            name: text.to_string(),
            reason,
        };
        if argument.is_some() && entry.argument.is_none() {
            return Err(bad("takes no argument"));
        }
        (entry.build)(argument).map_err(bad)?;
        Ok(PolicySpec {
            name: entry.name,
            argument: argument.map(Into::into),
        })
    }
}

/// Written by hand: a derived impl would borrow from the input for as long as the name field
/// lives (`'static`), where the name is copied from the table anyway.
impl<'de> Deserialize<'de> for PolicySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PolicySpec, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl From<PolicySpec> for String {
    fn from(spec: PolicySpec) -> String {
        spec.to_string()
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.argument {
            Some(a) => write!(f, "{}:{a}", self.name),
            None => f.write_str(self.name),
        }
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use crate::hint::QueueHints;
    use crate::ids::{DeviceId, QueueId};
    use crate::time::Nanos;
    use crate::view::QueueView;

    /// A queue view for policy tests.
    pub fn view(id: u32, device: u16, priority: i32, ready: bool) -> QueueView {
        QueueView {
            id: QueueId(id),
            device: DeviceId(device),
            hints: QueueHints {
                priority,
                ..QueueHints::default()
            },
            ready,
            ready_since: Nanos::ZERO,
            service: Nanos::ZERO,
        }
    }

    /// Run a policy once over `queues` and return the run flags.
    pub fn decide(p: &mut dyn super::Policy, now: Nanos, queues: &[QueueView]) -> Vec<bool> {
        let mut run = vec![true; queues.len()];
        p.schedule(now, queues, &mut run);
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PolicySpec, CoreError> {
        text.parse()
    }

    fn built_name(text: &str) -> Option<&'static str> {
        parse(text).ok().map(|s| s.build().name())
    }

    #[test]
    fn the_table_builds_every_name() {
        for name in names() {
            let spec = parse(name).expect("registered");
            assert_eq!(spec.build().name(), name);
            assert_eq!(spec.to_string(), name);
        }
        assert_eq!(built_name("kedf:3"), Some("kedf"));
        assert!(parse("slo-aware:between-requests").is_ok());
        assert!(parse("slo-aware:nonsense").is_err());
        assert!(parse("kedf:0").is_err());
        assert_eq!(built_name("quota:0.25"), Some("quota"));
        assert!(parse("quota:0").is_err());
        assert!(parse("quota:lots").is_err());
        assert_eq!(built_name("hpf:min-share=0.05"), Some("hpf"));
        let msg = parse("hpf:min-share=0.9")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("min-share") && msg.contains("0.5"), "{msg}");
        assert!(parse("hpf:share=0.1").is_err());
        assert_eq!(built_name("hpf:hold=2.5"), Some("hpf"));
        for bad in [
            "hpf:hold=0",
            "hpf:hold=-1",
            "hpf:hold=1001",
            "hpf:hold=soon",
        ] {
            let msg = parse(bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(msg.contains("hold=MS"), "{bad}: {msg}");
        }
        let msg = parse("fcfs:7")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            msg.contains("`fcfs:7`") && msg.contains("no argument"),
            "{msg}"
        );
    }

    #[test]
    fn an_unknown_name_lists_every_known_one() {
        let msg = parse("nope")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.starts_with("unknown policy `nope`; known: "), "{msg}");
        for name in names() {
            assert!(msg.contains(name), "{name} missing from: {msg}");
        }
        assert!(msg.contains("kedf[:K]"), "argument forms shown: {msg}");
    }

    #[test]
    fn a_spec_prints_as_it_parses_and_travels_as_text() {
        for text in [
            "hpf",
            "kedf:2",
            "hpf:min-share=0.1",
            "hpf:hold=3",
            "quota:0.25",
            "slo-aware:between-requests",
        ] {
            let spec = parse(text).expect("valid");
            assert_eq!(spec.to_string(), text);
            assert_eq!(parse(&spec.to_string()), Ok(spec.clone()));
            let json = serde_json::to_string(&spec).expect("serialize");
            assert_eq!(json, format!("\"{text}\""));
            let back: Option<PolicySpec> = serde_json::from_str(&json).ok();
            assert_eq!(back, Some(spec));
        }
        let err = serde_json::from_str::<PolicySpec>("\"nope\"")
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("unknown policy `nope`")));
        assert_eq!(PolicySpec::default().to_string(), "hpf");
    }

    /// The test policy (`test_policy.rs`) is one file and one table row (under `cfg(test)`):
    /// with nothing else added, it parses, is listed, and schedules.
    #[test]
    fn a_policy_is_one_file_and_one_row() {
        assert!(names().any(|n| n == "test-lowest-id"));
        let spec = parse("test-lowest-id").expect("the row registers it");
        let mut policy = spec.build();
        let queues = [
            test_util::view(7, 0, 0, true),
            test_util::view(3, 0, 0, true),
            test_util::view(9, 0, 0, false),
        ];
        let run = test_util::decide(policy.as_mut(), crate::time::Nanos::ZERO, &queues);
        assert_eq!(run, vec![false, true, false]);
        let msg = parse("nope")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("test-lowest-id"), "{msg}");
    }

    /// Every `.rs` file in this folder is a table row, except the files that are not policies (a
    /// hold-down wraps one).
    #[test]
    fn every_policy_file_is_a_row() {
        const NOT_POLICIES: &[&str] = &["mod", "contract", "hold", "vtime"];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("the policy folder")
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".rs")
                    .map(String::from)
            })
            .filter(|f| !NOT_POLICIES.contains(&f.as_str()))
            .collect();
        files.sort();
        let mut rows: Vec<String> = FILE_NAMES.iter().map(|s| s.to_string()).collect();
        rows.sort();
        assert_eq!(
            files, rows,
            "a policy file that is not a row of table! (or the reverse)"
        );
    }
}
