//! Passive outlier detection, Envoy's model: an upstream that fails a request at the transport
//! level (refuses the connection, drops it before answering, sends nothing within the first-byte
//! timeout, falls silent mid-stream) is ejected: the core admits nothing there for a backoff
//! (1 s, doubling with each ejection in a row, at most 30 s), then it is put back and the next
//! request there is its probe. An answer resets the doubling. The last upstream still in
//! service is never ejected: with nowhere else to go, a request is better sent to it than
//! refused. Requests already running on an ejected upstream are left to finish.
//!
//! An engine's own error statuses (a 4xx for a bad request, a 5xx it chose to send) are answers,
//! not failures: they say the engine is alive.

use crate::admission::RequestQueue;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long an upstream's first ejection lasts.
pub const FIRST_EJECTION: Duration = Duration::from_secs(1);
/// The longest ejection (the doubling stops here).
pub const LONGEST_EJECTION: Duration = Duration::from_secs(30);

/// One upstream's record.
#[derive(Clone, Copy, Default)]
struct Record {
    ejected: bool,
    /// Ejections since its last answer (the backoff's exponent).
    in_a_row: u32,
    ejections: u64,
    failures: u64,
}

/// Every upstream's health, and the admission it takes upstreams out of.
pub struct Health {
    admission: Arc<RequestQueue>,
    names: Vec<String>,
    records: Mutex<Vec<Record>>,
}

/// How long the `n`-th ejection in a row (from 0) lasts.
fn backoff(n: u32) -> Duration {
    FIRST_EJECTION
        .saturating_mul(1 << n.min(16))
        .min(LONGEST_EJECTION)
}

impl Health {
    /// Every upstream (named for logs and metrics) in service.
    pub fn new(admission: Arc<RequestQueue>, names: Vec<String>) -> Arc<Health> {
        let records = Mutex::new(vec![Record::default(); names.len()]);
        Arc::new(Health {
            admission,
            names,
            records,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Record>> {
        // Every critical section leaves the records whole.
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Upstream `u` answered (any status).
    pub fn answered(&self, u: usize) {
        if let Some(r) = self.lock().get_mut(u)
            && !r.ejected
        {
            r.in_a_row = 0;
        }
    }

    /// Upstream `u` failed a request (`why`, for the log): eject it unless it is out already or
    /// the last one in service. Must be called within the gateway's runtime (the return is a
    /// timer); outside one the upstream is not ejected.
    pub fn failed(self: &Arc<Self>, u: usize, why: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let ejection = {
            let mut records = self.lock();
            let in_service = records.iter().filter(|r| !r.ejected).count();
            let Some(r) = records.get_mut(u) else {
                return;
            };
            r.failures += 1;
            if r.ejected {
                return;
            }
            if in_service <= 1 {
                tracing::warn!(
                    "upstream {} failed ({why}); not ejected: it is the last in service",
                    self.names[u]
                );
                return;
            }
            r.ejected = true;
            r.ejections += 1;
            let ejection = backoff(r.in_a_row);
            r.in_a_row += 1;
            ejection
        };
        self.admission.availability(u, false);
        tracing::warn!(
            "upstream {} ejected for {} ms: {why}",
            self.names[u],
            ejection.as_millis()
        );
        let health = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(ejection).await;
            health.readmit(u);
        });
    }

    /// The ejection of `u` is over: its next request probes it.
    fn readmit(&self, u: usize) {
        if let Some(r) = self.lock().get_mut(u) {
            r.ejected = false;
        }
        self.admission.availability(u, true);
        tracing::info!("upstream {} back in service", self.names[u]);
    }

    /// Whether upstream `u` is in service.
    pub fn in_service(&self, u: usize) -> bool {
        self.lock().get(u).is_some_and(|r| !r.ejected)
    }

    /// Per upstream: in service or not, ejections and failures so far, in the text exposition.
    pub fn render(&self, out: &mut String, labels: &str) {
        let records = self.lock().clone();
        for (name, kind, help, value) in [
            (
                "xsched_gateway_upstream_in_service",
                "gauge",
                "1 while the upstream may be sent requests, 0 while it is ejected",
                (|r: &Record| u64::from(!r.ejected)) as fn(&Record) -> u64,
            ),
            (
                "xsched_gateway_upstream_ejections_total",
                "counter",
                "times the upstream was ejected for failing",
                |r| r.ejections,
            ),
            (
                "xsched_gateway_upstream_failures_total",
                "counter",
                "requests the upstream failed (refused, dropped, timed out)",
                |r| r.failures,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} {kind}");
            for (upstream, r) in self.names.iter().zip(&records) {
                let _ = writeln!(
                    out,
                    "{name}{{{labels},upstream=\"{upstream}\"}} {}",
                    value(r)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::admission::{arrival_for_tests, for_tests};

    #[test]
    fn a_failing_upstream_is_out_for_its_backoff_and_the_last_one_is_never_out() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        rt.block_on(async {
            let admission = for_tests("fcfs", 2, 4, 8);
            let health = Health::new(admission.clone(), vec!["a".into(), "b".into()]);
            health.failed(0, "refused");
            health.failed(1, "refused");
            assert!(!health.in_service(0));
            assert!(health.in_service(1), "the last in service stays");
            // Both are idle: the least loaded would be the first, which is out.
            let slot = admission.admit(arrival_for_tests(1.0)).await.expect("slot");
            assert_eq!(slot.upstream(), 1);
            drop(slot);
            tokio::time::sleep(FIRST_EJECTION - Duration::from_millis(1)).await;
            assert!(!health.in_service(0));
            tokio::time::sleep(Duration::from_millis(2)).await;
            assert!(health.in_service(0), "back after the first backoff");
            let slot = admission.admit(arrival_for_tests(1.0)).await.expect("slot");
            assert_eq!(slot.upstream(), 0, "its probe");
            drop(slot);
            // Failing again at once: out twice as long.
            health.failed(0, "timed out");
            tokio::time::sleep(2 * FIRST_EJECTION - Duration::from_millis(1)).await;
            assert!(!health.in_service(0));
            health.answered(0);
            tokio::time::sleep(Duration::from_millis(2)).await;
            assert!(health.in_service(0));
            // An answer once back resets the doubling.
            health.answered(0);
            health.failed(0, "timed out");
            tokio::time::sleep(FIRST_EJECTION + Duration::from_millis(1)).await;
            assert!(health.in_service(0));
            let mut text = String::new();
            health.render(&mut text, "policy=\"fcfs\"");
            assert!(text.contains(
                "xsched_gateway_upstream_ejections_total{policy=\"fcfs\",upstream=\"a\"} 3"
            ));
            assert!(text.contains(
                "xsched_gateway_upstream_failures_total{policy=\"fcfs\",upstream=\"b\"} 1"
            ));
            assert!(
                text.contains(
                    "xsched_gateway_upstream_in_service{policy=\"fcfs\",upstream=\"b\"} 1"
                )
            );
        });
    }

    #[test]
    fn the_backoff_doubles_from_one_second_to_thirty() {
        let secs: Vec<u64> = (0..7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(backoff(u32::MAX), LONGEST_EJECTION);
    }
}
