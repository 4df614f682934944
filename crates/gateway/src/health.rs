//! Passive outlier detection as the gateway drives it: an upstream that fails a request at the
//! transport level (refuses the connection, drops it before answering, sends nothing within the
//! first-byte timeout, falls silent mid-stream) is reported to the scheduling core, which ejects
//! it for a backoff (the rules and their times: `xsched_llm_core::watch`); any answer is
//! reported too, and resets the backoff. An engine's own error statuses (a 4xx for a bad
//! request, a 5xx it chose to send) are answers, not failures: they say the engine is alive.
//! This module only reports, logs and renders; the core decides.

use crate::request_queue::RequestQueue;
use std::fmt::Write as _;
use std::sync::Arc;
use xsched_llm_core::watch::Watched;

/// Every upstream's health, as the core keeps it.
pub struct Health {
    admission: Arc<RequestQueue>,
    names: Vec<String>,
}

impl Health {
    /// Every upstream (named for logs and metrics) in service.
    pub fn new(admission: Arc<RequestQueue>, names: Vec<String>) -> Arc<Health> {
        Arc::new(Health { admission, names })
    }

    /// Upstream `u` answered (any status).
    pub fn answered(&self, u: usize) {
        self.admission.replied(u);
    }

    /// Upstream `u` failed a request (`why`, for the log): the core ejects it unless it is out
    /// already or the last one in service.
    pub fn failed(&self, u: usize, why: &str) {
        let before = self.ejected_until(u);
        self.admission.failed(u);
        let name = self.names.get(u).map_or("?", String::as_str);
        match self.ejected_until(u) {
            Some(until) if before != Some(until) => {
                let ms = (until - self.admission.now()) * 1000.0;
                tracing::warn!("upstream {name} ejected for {ms:.0} ms: {why}");
            }
            Some(_) => {}
            None => {
                tracing::warn!("upstream {name} failed ({why}); not ejected: the last in service")
            }
        }
    }

    fn ejected_until(&self, u: usize) -> Option<f64> {
        self.admission.watched().get(u)?.ejected_until()
    }

    /// Whether upstream `u` is in service (not ejected, or its ejection is over).
    pub fn in_service(&self, u: usize) -> bool {
        let now = self.admission.now();
        self.ejected_until(u).is_none_or(|t| t <= now)
    }

    /// Per upstream: in service or not, ejections and failures so far, in the text exposition.
    pub fn render(&self, out: &mut String, labels: &str) {
        let watched = self.admission.watched();
        let now = self.admission.now();
        for (name, kind, help, value) in [
            (
                "xsched_gateway_upstream_in_service",
                "gauge",
                "1 while the upstream may be sent requests, 0 while it is ejected",
                (|w: &Watched, now: f64| u64::from(w.ejected_until().is_none_or(|t| t <= now)))
                    as fn(&Watched, f64) -> u64,
            ),
            (
                "xsched_gateway_upstream_ejections_total",
                "counter",
                "times the upstream was ejected for failing",
                |w, _| w.counts().0,
            ),
            (
                "xsched_gateway_upstream_failures_total",
                "counter",
                "requests the upstream failed (refused, dropped, timed out)",
                |w, _| w.counts().1,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} {kind}");
            for (upstream, w) in self.names.iter().zip(&watched) {
                let _ = writeln!(
                    out,
                    "{name}{{{labels},upstream=\"{upstream}\"}} {}",
                    value(w, now)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::request_queue::{arrival_for_tests, for_tests};

    #[test]
    fn a_failing_upstream_is_reported_out_and_the_last_one_is_never_out() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let admission = for_tests("fcfs", 2, 4, 8);
            let health = Health::new(admission.clone(), vec!["a".into(), "b".into()]);
            health.failed(0, "refused");
            health.answered(1);
            health.failed(1, "refused");
            assert!(!health.in_service(0));
            assert!(health.in_service(1), "the last in service stays");
            // Both are idle: the least loaded would be the first, which is out.
            let slot = admission.admit(arrival_for_tests(1.0)).await.expect("slot");
            assert_eq!(slot.upstream(), 1);
            let mut text = String::new();
            health.render(&mut text, "policy=\"fcfs\"");
            for line in [
                "xsched_gateway_upstream_ejections_total{policy=\"fcfs\",upstream=\"a\"} 1",
                "xsched_gateway_upstream_failures_total{policy=\"fcfs\",upstream=\"b\"} 1",
                "xsched_gateway_upstream_in_service{policy=\"fcfs\",upstream=\"a\"} 0",
                "xsched_gateway_upstream_in_service{policy=\"fcfs\",upstream=\"b\"} 1",
            ] {
                assert!(text.contains(line), "{line} in {text}");
            }
        });
    }
}
