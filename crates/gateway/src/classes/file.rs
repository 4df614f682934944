//! The classes-and-tenants file: its TOML read strictly (an unknown field or a bad value is an
//! error naming the field and line) and checked whole into the [`Classes`] a gateway serves.

use super::table::{
    BUILT_IN, Classes, DEFAULT_TENANT, MAX_NAME, MAX_TENANTS, OTHER_TENANT, Tenant,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use xsched_llm_core::Eviction;

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

/// Why a classes file's text was refused: the field and what is wrong with it (and, for what
/// TOML itself refuses, the line). The payload of the gateway's error
/// ([`GatewayError::Classes`](crate::GatewayError::Classes) and
/// [`GatewayError::ClassesFile`](crate::GatewayError::ClassesFile)).
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
    Eviction(#[from] xsched_llm_core::SchedulerError),
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

impl Default for Classes {
    /// The built-in classes, tenants `default` and `other`, no limits.
    fn default() -> Classes {
        Classes::from_file(File::default()).expect("the built-in classes are valid (tested)")
    }
}

impl Classes {
    /// Parse a file's text; the error names the field and line. [`Classes::load`] and
    /// [`Classes::parse`] (in `config.rs`, beside the gateway's error) return it as a
    /// [`GatewayError`](crate::GatewayError).
    pub(crate) fn read(text: &str) -> Result<Classes, InvalidClasses> {
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
}
