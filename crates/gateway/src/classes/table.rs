//! The classes and tenants a gateway serves, and what they make of a request: its class from
//! the headers or the body's `priority`, its tenant (a new one as an id is first seen, up to
//! the limit), and the tenants' weights and limits for the scheduling core.

use super::headers::{BadClass, OBJECTIVE_HEADER, PRIORITY_HEADER, TENANT_HEADER};
use hyper::HeaderMap;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use xsched_llm_core::Eviction;

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

/// One tenant.
#[derive(Debug)]
pub(super) struct Tenant {
    pub(super) name: String,
    pub(super) weight: f64,
    pub(super) max_requests: Option<usize>,
}

/// The classes and tenants a gateway serves.
#[derive(Debug)]
pub struct Classes {
    pub(super) classes: BTreeMap<String, i32>,
    pub(super) default_class: i32,
    pub(super) max_tenants: usize,
    pub(super) sheddable_waiting: usize,
    pub(super) eviction: Eviction,
    /// Tenants by index (0: `default`); the file's first, then others as they are seen.
    pub(super) tenants: Mutex<Vec<std::sync::Arc<Tenant>>>,
    pub(super) by_name: Mutex<HashMap<String, usize>>,
    /// How many tenants are known (read on every request without the lock).
    pub(super) known: AtomicUsize,
}

impl Classes {
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
    pub(crate) fn class_of(
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
    pub(crate) fn tenant_of(&self, headers: &HeaderMap) -> Result<usize, BadClass> {
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
