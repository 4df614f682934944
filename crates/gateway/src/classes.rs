//! Priority classes and tenants: what a request's headers and body say of who sent it and how
//! much it matters, and the file (`--classes FILE`, TOML) that names them. The defaults need no
//! file.
//!
//! A request's class (an integer, **higher wins, below 0 sheddable**, as llm-d's
//! `InferenceObjective` priority), from the first of:
//! 1. `x-llm-d-inference-objective: NAME`: a class by name ([`BUILT_IN`], or the file's);
//! 2. `x-dynamo-request-priority: N` (NVIDIA Dynamo's, an integer, higher wins);
//! 3. the body's `priority` (vLLM's and LiteLLM's field, **lower wins**): its negation, so
//!    vLLM's `priority: 1` (less urgent than the default 0) is class −1 here;
//! 4. the file's `default_class` (else `standard`, 0).
//!
//! Its deadline: `x-llm-d-slo-ttft-ms: N` (llm-d's), the first token wanted within N ms of
//! arrival (1 to [`MAX_SLO_MS`]). Once waiting leaves less slack than a first token takes alone
//! (measured from answers; half the deadline until measured), the request goes before the rest
//! of its class,
//! and a class above 0 evicts a running sheddable request then (`eviction`), not at once as it
//! does without a deadline. A deadline shorter than the first token takes alone (once that is
//! measured) cannot be met and counts as none. A deadline reorders only its own class and
//! tenant's requests (other tenants keep their token shares), so it grants a client no more
//! than the class header already does.
//!
//! Its tenant: `x-llm-d-inference-fairness-id: ID` (else `default`). A tenant the file names
//! has its weight and limit; any other id becomes a tenant of weight 1 as it is first seen, up
//! to `max_tenants`, after which unnamed ids share one tenant, `other` (so no client can grow the
//! gateway's memory or its metrics by inventing ids). Tenants share the engines by weighted
//! tokens (VTC, in `xsched-llm-core`'s lanes); a tenant with `max_requests` requests waiting or
//! in flight gets a 429 naming that limit.
//!
//! ```toml
//! default_class = "standard"   # optional
//! max_tenants = 64             # optional
//! sheddable_waiting = 8        # optional: a sheddable request waits beside at most this many
//! eviction = "one"             # optional: what a class above 0 that finds no free slot does
//!                              # to running sheddable requests: "one" (the default) evicts the
//!                              # one admitted last (and admits none beside it until its first
//!                              # token), "all" every one (and none runs beside it), "none" waits
//!
//! [classes]
//! interactive = 10
//! batch = -1                   # below 0: sheddable
//!
//! [tenants.web]
//! weight = 3
//! [tenants.nightly]
//! weight = 1
//! max_requests = 32
//! ```

use hyper::HeaderMap;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use xsched_llm_core::Eviction;

/// The header naming a request's class (llm-d's objective).
pub const OBJECTIVE_HEADER: &str = "x-llm-d-inference-objective";
/// The header with a request's integer priority (NVIDIA Dynamo's; higher wins).
pub const PRIORITY_HEADER: &str = "x-dynamo-request-priority";
/// The header naming a request's tenant (llm-d's fairness id).
pub const TENANT_HEADER: &str = "x-llm-d-inference-fairness-id";
/// The header with a request's TTFT deadline in milliseconds (llm-d's).
pub const SLO_TTFT_HEADER: &str = "x-llm-d-slo-ttft-ms";
/// The longest TTFT deadline accepted (an hour).
pub const MAX_SLO_MS: u64 = 3_600_000;

/// The TTFT deadline a request asks for, from its headers (`None`: none).
pub fn ttft_slo_of(headers: &HeaderMap) -> Result<Option<std::time::Duration>, BadClass> {
    let Some(v) = headers.get(SLO_TTFT_HEADER) else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|ms| (1..=MAX_SLO_MS).contains(ms))
        .map(|ms| Some(std::time::Duration::from_millis(ms)))
        .ok_or_else(|| BadClass {
            header: SLO_TTFT_HEADER,
            reason: format!("expected whole milliseconds from 1 to {MAX_SLO_MS}"),
        })
}

/// The classes every gateway knows.
pub const BUILT_IN: [(&str, i32); 3] = [("critical", 100), ("standard", 0), ("sheddable", -1)];
/// Tenants by default at most (named in the file or not).
pub const MAX_TENANTS: usize = 64;
/// The longest tenant id or class name read.
pub const MAX_NAME: usize = 128;
/// The tenant of a request that names none.
pub const DEFAULT_TENANT: &str = "default";
/// The tenant unnamed ids share once there are `max_tenants`.
pub const OTHER_TENANT: &str = "other";

/// The classes-and-tenants file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    default_class: Option<String>,
    max_tenants: Option<usize>,
    sheddable_waiting: Option<usize>,
    eviction: Option<String>,
    #[serde(default)]
    classes: BTreeMap<String, i32>,
    #[serde(default)]
    tenants: BTreeMap<String, TenantFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantFile {
    #[serde(default = "one")]
    weight: Weight,
    max_requests: Option<usize>,
}

fn one() -> Weight {
    Weight(1.0)
}

/// A tenant's weight: finite and above 0 (checked as it is read, so the error has its line).
#[derive(Clone, Copy, Debug)]
struct Weight(f64);

impl<'de> Deserialize<'de> for Weight {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Weight, D::Error> {
        let w = f64::deserialize(d)?;
        if w.is_finite() && w > 0.0 {
            Ok(Weight(w))
        } else {
            Err(serde::de::Error::custom(format!(
                "a weight must be a number above 0, not {w}"
            )))
        }
    }
}

/// Why the file was refused: the file and what is wrong (a read error, or the field and line).
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ClassesError {
    /// The file.
    pub path: String,
    /// What is wrong, and where.
    pub message: String,
}

/// Why a classes file's text was refused: the field and what is wrong with it (and, for what
/// TOML itself refuses, the line).
#[derive(Debug, thiserror::Error)]
pub enum InvalidClasses {
    /// Not TOML, or a field unknown or of the wrong type (the message names field and line).
    #[error("{}", .0.to_string().trim())]
    Toml(toml::de::Error),
    /// A class name longer than [`MAX_NAME`].
    #[error("classes: a name longer than {MAX_NAME} bytes")]
    LongClassName,
    /// `default_class` names no class.
    #[error("default_class: `{name}` is no class; known: {known}")]
    UnknownDefaultClass {
        /// The name given.
        name: String,
        /// The classes known, comma-separated.
        known: String,
    },
    /// `eviction` is not one of its values.
    #[error(transparent)]
    Eviction(#[from] xsched_llm_core::ConfigError),
    /// `max_tenants` leaves no room for the tenants named and the two built in.
    #[error(
        "max_tenants: {max_tenants} is fewer than the {named} tenants named, `{DEFAULT_TENANT}` and `{OTHER_TENANT}`"
    )]
    TooFewTenants {
        /// The `max_tenants` in effect.
        max_tenants: usize,
        /// Tenants the file names.
        named: usize,
    },
    /// A tenant name longer than [`MAX_NAME`].
    #[error("tenants: a name longer than {MAX_NAME} bytes")]
    LongTenantName,
}

/// Why a request's headers or body were refused: a 400 naming the header or field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{header}: {reason}")]
pub struct BadClass {
    /// The header (or body field).
    pub header: &'static str,
    /// What it must be.
    pub reason: String,
}

/// One tenant.
#[derive(Debug)]
struct Tenant {
    name: String,
    weight: f64,
    max_requests: Option<usize>,
}

/// The classes and tenants a gateway serves.
#[derive(Debug)]
pub struct Classes {
    classes: BTreeMap<String, i32>,
    default_class: i32,
    max_tenants: usize,
    sheddable_waiting: usize,
    eviction: Eviction,
    /// Tenants by index (0: `default`); the file's first, then others as they are seen.
    tenants: Mutex<Vec<std::sync::Arc<Tenant>>>,
    by_name: Mutex<HashMap<String, usize>>,
    /// How many tenants are known (read on every request without the lock).
    known: AtomicUsize,
}

impl Default for Classes {
    /// The built-in classes, tenants `default` and `other`, no limits.
    fn default() -> Classes {
        Classes::from_file(File::default()).expect("the built-in classes are valid (tested)")
    }
}

impl Classes {
    /// Read the TOML file at `path`.
    pub fn load(path: &std::path::Path) -> Result<Classes, ClassesError> {
        let error = |message: String| ClassesError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(format!("cannot read: {e}")))?;
        Classes::parse(&text).map_err(|e| error(e.to_string()))
    }

    /// Parse a file's text; the error names the field and line.
    pub fn parse(text: &str) -> Result<Classes, InvalidClasses> {
        let file: File = toml::from_str(text).map_err(InvalidClasses::Toml)?;
        Classes::from_file(file)
    }

    fn from_file(file: File) -> Result<Classes, InvalidClasses> {
        let mut classes: BTreeMap<String, i32> =
            BUILT_IN.iter().map(|(n, p)| (n.to_string(), *p)).collect();
        for (name, p) in file.classes {
            if name.len() > MAX_NAME {
                return Err(InvalidClasses::LongClassName);
            }
            classes.insert(name, p);
        }
        let default_class = match &file.default_class {
            None => 0,
            Some(n) => *classes
                .get(n)
                .ok_or_else(|| InvalidClasses::UnknownDefaultClass {
                    name: n.clone(),
                    known: classes.keys().cloned().collect::<Vec<_>>().join(", "),
                })?,
        };
        let eviction = match &file.eviction {
            None => Eviction::default(),
            Some(e) => e.parse()?,
        };
        let max_tenants = file.max_tenants.unwrap_or(MAX_TENANTS).max(2);
        if file.tenants.len() + 2 > max_tenants {
            return Err(InvalidClasses::TooFewTenants {
                max_tenants,
                named: file.tenants.len(),
            });
        }
        let tenant = |name: &str, weight: f64, max_requests| {
            std::sync::Arc::new(Tenant {
                name: name.to_string(),
                weight,
                max_requests,
            })
        };
        let mut tenants = Vec::new();
        let named = |n: &str| file.tenants.get(n);
        for n in [DEFAULT_TENANT, OTHER_TENANT] {
            let t = named(n);
            tenants.push(tenant(
                n,
                t.map_or(1.0, |t| t.weight.0),
                t.and_then(|t| t.max_requests),
            ));
        }
        for (n, t) in &file.tenants {
            if n.len() > MAX_NAME {
                return Err(InvalidClasses::LongTenantName);
            }
            if n != DEFAULT_TENANT && n != OTHER_TENANT {
                tenants.push(tenant(n, t.weight.0, t.max_requests));
            }
        }
        let by_name = tenants
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(Classes {
            known: AtomicUsize::new(tenants.len()),
            classes,
            default_class,
            max_tenants,
            sheddable_waiting: file.sheddable_waiting.unwrap_or(usize::MAX),
            eviction,
            tenants: Mutex::new(tenants),
            by_name: Mutex::new(by_name),
        })
    }

    /// Each tenant's weight, by index (those known now; later ones weigh 1).
    pub fn weights(&self) -> Vec<f64> {
        self.lock_tenants().iter().map(|t| t.weight).collect()
    }

    /// Each tenant's `max_requests`, by index (tenants seen later have none): the scheduling
    /// core refuses a request past it.
    pub fn limits(&self) -> Vec<Option<usize>> {
        self.lock_tenants().iter().map(|t| t.max_requests).collect()
    }

    /// How many sheddable requests may wait.
    pub fn sheddable_waiting(&self) -> usize {
        self.sheddable_waiting
    }

    /// What a class above 0 does to running sheddable requests when no slot is free.
    pub fn eviction(&self) -> Eviction {
        self.eviction
    }

    /// Tenants at most.
    pub fn max_tenants(&self) -> usize {
        self.max_tenants
    }

    /// Whether more than one tenant is known (the file names one, or a request did): tenants
    /// then share by tokens, and every answer's tokens are counted.
    pub fn shared(&self) -> bool {
        self.known.load(Ordering::Relaxed) > 2
    }

    fn lock_tenants(&self) -> std::sync::MutexGuard<'_, Vec<std::sync::Arc<Tenant>>> {
        self.tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The class a request asks for, from its headers and its body's `priority`.
    pub fn class_of(
        &self,
        headers: &HeaderMap,
        body_priority: Option<i64>,
    ) -> Result<i32, BadClass> {
        if let Some(v) = headers.get(OBJECTIVE_HEADER) {
            let name = v.to_str().map_err(|_| BadClass {
                header: OBJECTIVE_HEADER,
                reason: "not text".into(),
            })?;
            return self
                .classes
                .get(name.trim())
                .copied()
                .ok_or_else(|| BadClass {
                    header: OBJECTIVE_HEADER,
                    reason: format!(
                        "no class `{}`; known: {}",
                        name.chars().take(MAX_NAME).collect::<String>(),
                        self.classes.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
        }
        if let Some(v) = headers.get(PRIORITY_HEADER) {
            return v
                .to_str()
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
                .ok_or_else(|| BadClass {
                    header: PRIORITY_HEADER,
                    reason: "expected an integer (higher wins)".into(),
                });
        }
        if let Some(p) = body_priority {
            // vLLM's direction is the other way round.
            return i32::try_from(p)
                .ok()
                .and_then(i32::checked_neg)
                .ok_or_else(|| BadClass {
                    header: "priority",
                    reason: "expected an integer within ±2³¹ (lower wins)".into(),
                });
        }
        Ok(self.default_class)
    }

    /// The tenant a request belongs to (by index), from its headers.
    pub fn tenant_of(&self, headers: &HeaderMap) -> Result<usize, BadClass> {
        let Some(v) = headers.get(TENANT_HEADER) else {
            return Ok(0);
        };
        let id = v
            .to_str()
            .ok()
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= MAX_NAME)
            .ok_or_else(|| BadClass {
                header: TENANT_HEADER,
                reason: format!("expected a text id of 1 to {MAX_NAME} bytes"),
            })?;
        let mut by_name = self
            .by_name
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&i) = by_name.get(id) {
            return Ok(i);
        }
        let mut tenants = self.lock_tenants();
        if tenants.len() >= self.max_tenants {
            return Ok(1);
        }
        tenants.push(std::sync::Arc::new(Tenant {
            name: id.to_string(),
            weight: 1.0,
            max_requests: None,
        }));
        by_name.insert(id.to_string(), tenants.len() - 1);
        self.known.store(tenants.len(), Ordering::Relaxed);
        Ok(tenants.len() - 1)
    }

    /// The tenant's name.
    pub fn tenant_name(&self, tenant: usize) -> String {
        self.lock_tenants()
            .get(tenant)
            .map_or_else(|| OTHER_TENANT.to_string(), |t| t.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("a header value"));
        }
        h
    }

    #[test]
    fn the_defaults_need_no_file() {
        let c = Classes::default();
        assert_eq!(c.class_of(&HeaderMap::new(), None), Ok(0));
        assert_eq!(
            c.class_of(&headers(&[(OBJECTIVE_HEADER, "critical")]), None),
            Ok(100)
        );
        assert_eq!(c.tenant_of(&HeaderMap::new()), Ok(0));
        assert_eq!(c.weights(), vec![1.0, 1.0]);
        assert_eq!(c.sheddable_waiting(), usize::MAX);
    }

    #[test]
    fn each_convention_in_its_direction_and_the_objective_first() {
        let c = Classes::default();
        let h = headers(&[(PRIORITY_HEADER, "7")]);
        assert_eq!(c.class_of(&h, None), Ok(7), "Dynamo: higher wins");
        assert_eq!(
            c.class_of(&HeaderMap::new(), Some(1)),
            Ok(-1),
            "vLLM: lower wins"
        );
        assert_eq!(c.class_of(&h, Some(1)), Ok(7), "a header before the body");
        let both = headers(&[(OBJECTIVE_HEADER, "sheddable"), (PRIORITY_HEADER, "7")]);
        assert_eq!(c.class_of(&both, None), Ok(-1));
    }

    #[test]
    fn a_bad_header_is_an_error_naming_it() {
        let c = Classes::default();
        let e = c
            .class_of(&headers(&[(OBJECTIVE_HEADER, "gold")]), None)
            .expect_err("unknown");
        assert_eq!(e.header, OBJECTIVE_HEADER);
        assert!(e.reason.contains("critical, sheddable, standard"), "{e}");
        let e = c
            .class_of(&headers(&[(PRIORITY_HEADER, "high")]), None)
            .expect_err("not a number");
        assert_eq!(e.header, PRIORITY_HEADER);
        assert_eq!(
            c.class_of(&HeaderMap::new(), Some(i64::MAX))
                .map_err(|e| e.header),
            Err("priority")
        );
        let long = "x".repeat(MAX_NAME + 1);
        let e = c
            .tenant_of(&headers(&[(TENANT_HEADER, &long)]))
            .expect_err("too long");
        assert_eq!(e.header, TENANT_HEADER);
    }

    #[test]
    fn unnamed_tenants_are_bounded_and_then_share_one() {
        let c = Classes::parse("max_tenants = 4").expect("valid");
        assert!(!c.shared(), "only default and other");
        let a = c.tenant_of(&headers(&[(TENANT_HEADER, "a")])).expect("ok");
        assert!(c.shared(), "a tenant seen: answers are counted for shares");
        let b = c.tenant_of(&headers(&[(TENANT_HEADER, "b")])).expect("ok");
        assert_eq!((a, b), (2, 3));
        assert_eq!(
            c.tenant_of(&headers(&[(TENANT_HEADER, "a")])),
            Ok(2),
            "the same again"
        );
        for id in ["c", "d", "e"] {
            assert_eq!(
                c.tenant_of(&headers(&[(TENANT_HEADER, id)])),
                Ok(1),
                "{id}: other"
            );
        }
        assert_eq!(c.tenant_name(1), OTHER_TENANT);
    }

    #[test]
    fn a_file_names_classes_tenants_weights_and_limits() {
        let c = Classes::parse(
            "default_class = \"batch\"\nsheddable_waiting = 3\n[classes]\nbatch = -2\n[tenants.web]\nweight = 3\n[tenants.nightly]\nmax_requests = 1\n",
        )
        .expect("valid");
        assert_eq!(c.class_of(&HeaderMap::new(), None), Ok(-2));
        assert_eq!(c.sheddable_waiting(), 3);
        let nightly = c
            .tenant_of(&headers(&[(TENANT_HEADER, "nightly")]))
            .expect("ok");
        let web = c
            .tenant_of(&headers(&[(TENANT_HEADER, "web")]))
            .expect("ok");
        assert_eq!(c.weights()[web], 3.0);
        assert_eq!((c.limits()[nightly], c.limits()[web]), (Some(1), None));
    }

    #[test]
    fn a_malformed_file_names_the_field_and_line() {
        for (text, field, line) in [
            ("[tenants.web]\nweight = 0\n", "weight", "line 2"),
            ("[tenants.web]\nwieght = 2\n", "wieght", "line 2"),
            (
                "max_tenants = 8\n[classes]\nurgent = \"high\"\n",
                "urgent",
                "line 3",
            ),
        ] {
            let e = Classes::parse(text).expect_err("invalid").to_string();
            assert!(e.contains(field) && e.contains(line), "{text}: {e}");
        }
        let e = Classes::parse("default_class = \"gold\"")
            .expect_err("invalid")
            .to_string();
        assert!(e.contains("default_class") && e.contains("standard"), "{e}");
    }
}
