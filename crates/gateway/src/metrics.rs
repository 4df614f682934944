//! The gateway's Prometheus metrics at `GET /metrics` on its own listener: per policy, how long
//! requests waited in its queue, their time to first byte of the answer's body (the first token
//! of a stream) and to its end, as histograms, the predictor's error (predicted mean output
//! tokens against the answer's), and the answers by status; per class band (`critical` above 0,
//! `standard` 0, `sheddable` below 0) TTFT and TTLT and the requests shed, and per tenant the
//! requests and output tokens served (tenants are bounded: `classes.rs`). Every time is measured
//! at the gateway, from a request's arrival; recording is a few atomic additions.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket bounds of the time histograms (seconds).
const SECONDS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
/// Bucket bounds of the gateway's own time per request (seconds).
const OWN: [f64; 13] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1,
];
/// Bucket bounds of the predictor's error (tokens).
const TOKENS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

/// A histogram over `bounds` (at most 16).
struct Histogram {
    bounds: &'static [f64],
    /// Observations at most each bound (cumulative when rendered).
    counts: [AtomicU64; 16],
    count: AtomicU64,
    /// The sum of the observations in millionths.
    sum_micro: AtomicU64,
}

impl Histogram {
    fn over(bounds: &'static [f64]) -> Histogram {
        debug_assert!(bounds.len() <= 16);
        Histogram {
            bounds,
            counts: Default::default(),
            count: AtomicU64::new(0),
            sum_micro: AtomicU64::new(0),
        }
    }

    fn record(&self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|&b| value <= b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        // `as` saturates (a negative or NaN value adds 0); values are bounded here so the sum
        // cannot wrap in any real run (a day of seconds or 2³² tokens each, 2⁶⁴ millionths).
        self.sum_micro
            .fetch_add((value.min(1e10) * 1e6) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let sum = self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// The class bands, by [`band`].
pub const BANDS: [&str; 3] = ["critical", "standard", "sheddable"];

/// The band of class `class`.
pub fn band(class: i32) -> usize {
    match class {
        1.. => 0,
        0 => 1,
        _ => 2,
    }
}

/// One class band's figures.
struct Band {
    ttft: Histogram,
    ttlt: Histogram,
    shed: AtomicU64,
    evicted: AtomicU64,
    /// First bytes of answers to requests with a TTFT deadline, and those after it.
    slo_ttft: AtomicU64,
    slo_ttft_missed: AtomicU64,
}

/// One tenant's figures.
#[derive(Default)]
struct TenantCounts {
    requests: AtomicU64,
    output_tokens: AtomicU64,
}

/// What the gateway measured.
pub struct Metrics {
    bands: [Band; 3],
    /// By tenant index (as many as the gateway may have tenants).
    tenants: Vec<TenantCounts>,
    queue_wait: Histogram,
    ttft: Histogram,
    ttlt: Histogram,
    /// The gateway's own work on a request before it is forwarded (checks, prediction,
    /// admission), less its wait for a slot.
    own: Histogram,
    /// |predicted mean − actual| output tokens.
    predictor_error: Histogram,
    /// The sum of (predicted mean − actual) in millionths of a token, signed: the bias.
    predictor_bias_micro: std::sync::atomic::AtomicI64,
    /// Answers by class: 2xx, 4xx, 429, 5xx (the gateway's or the engine's).
    answers: [AtomicU64; 4],
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::for_tenants(crate::classes::MAX_TENANTS)
    }
}

impl Metrics {
    /// Metrics for up to `tenants` tenants.
    pub fn for_tenants(tenants: usize) -> Metrics {
        let band = || Band {
            ttft: Histogram::over(&SECONDS),
            ttlt: Histogram::over(&SECONDS),
            shed: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            slo_ttft: AtomicU64::new(0),
            slo_ttft_missed: AtomicU64::new(0),
        };
        Metrics {
            bands: [band(), band(), band()],
            tenants: (0..tenants).map(|_| TenantCounts::default()).collect(),
            queue_wait: Histogram::over(&SECONDS),
            ttft: Histogram::over(&SECONDS),
            ttlt: Histogram::over(&SECONDS),
            own: Histogram::over(&OWN),
            predictor_error: Histogram::over(&TOKENS),
            predictor_bias_micro: std::sync::atomic::AtomicI64::new(0),
            answers: Default::default(),
        }
    }

    /// A request waited `d` in the queue before it was admitted.
    pub fn queued(&self, d: Duration) {
        self.queue_wait.record(d.as_secs_f64());
    }

    /// The first byte of an answer's body in class band `band` came `d` after its request
    /// arrived; the request asked for it within `slo`, if it had a deadline.
    pub fn first_byte(&self, band: usize, d: Duration, slo: Option<Duration>) {
        self.ttft.record(d.as_secs_f64());
        if let Some(b) = self.bands.get(band) {
            b.ttft.record(d.as_secs_f64());
            if let Some(slo) = slo {
                b.slo_ttft.fetch_add(1, Ordering::Relaxed);
                if d > slo {
                    b.slo_ttft_missed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// An answer's body in class band `band` ended (or its client went away) `d` after its
    /// request arrived.
    pub fn last_byte(&self, band: usize, d: Duration) {
        self.ttlt.record(d.as_secs_f64());
        if let Some(b) = self.bands.get(band) {
            b.ttlt.record(d.as_secs_f64());
        }
    }

    /// A request of class band `band` was shed.
    pub fn shed(&self, band: usize) {
        if let Some(b) = self.bands.get(band) {
            b.shed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A running request of class band `band` was evicted for a higher class.
    pub fn evicted(&self, band: usize) {
        if let Some(b) = self.bands.get(band) {
            b.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `tenant` was admitted a request.
    pub fn tenant_request(&self, tenant: usize) {
        if let Some(t) = self.tenants.get(tenant) {
            t.requests.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `tenant` was served `tokens` more output tokens (a stream's as they pass).
    pub fn tenant_tokens(&self, tenant: usize, tokens: u32) {
        if let Some(t) = self.tenants.get(tenant) {
            t.output_tokens
                .fetch_add(u64::from(tokens), Ordering::Relaxed);
        }
    }

    /// The gateway spent `d` of its own on a request before forwarding it.
    pub fn own_time(&self, d: Duration) {
        self.own.record(d.as_secs_f64());
    }

    /// An answer predicted at `predicted` output tokens (the mean) had `actual`.
    pub fn predicted(&self, predicted: f64, actual: f64) {
        self.predictor_error.record((predicted - actual).abs());
        self.predictor_bias_micro
            .fetch_add(((predicted - actual) * 1e6) as i64, Ordering::Relaxed);
    }

    /// An answer with `status` was given.
    pub fn answered(&self, status: u16) {
        let class = match status {
            200..=299 => 0,
            429 => 2,
            400..=499 => 1,
            _ => 3,
        };
        self.answers[class].fetch_add(1, Ordering::Relaxed);
    }

    /// The text exposition, labelled with `policy`; tenants named by `tenant_name` (those that
    /// were served anything).
    pub fn render(&self, policy: &str, tenant_name: impl Fn(usize) -> String) -> String {
        let labels = format!("policy=\"{policy}\"");
        let mut out = String::new();
        self.render_times(&mut out, &labels);
        self.render_answers(&mut out, &labels);
        self.render_bands(&mut out, &labels);
        self.render_tenants(&mut out, &labels, tenant_name);
        out
    }

    /// The latency histograms and the predictor's error.
    fn render_times(&self, out: &mut String, labels: &str) {
        self.queue_wait.render(
            out,
            "xsched_gateway_queue_wait_seconds",
            "time requests waited in the gateway's queue",
            labels,
        );
        self.ttft.render(
            out,
            "xsched_gateway_ttft_seconds",
            "arrival to the first byte of the answer's body (a stream's first token)",
            labels,
        );
        self.ttlt.render(
            out,
            "xsched_gateway_ttlt_seconds",
            "arrival to the end of the answer's body",
            labels,
        );
        self.own.render(
            out,
            "xsched_gateway_own_seconds",
            "the gateway's own work on a request before forwarding it (checks, prediction, admission), less its wait for a slot",
            labels,
        );
        self.predictor_error.render(
            out,
            "xsched_gateway_predictor_abs_error_tokens",
            "|predicted mean - actual| output tokens of answers learned from",
            labels,
        );
    }

    /// The predictor's signed error and the answers by status class.
    fn render_answers(&self, out: &mut String, labels: &str) {
        let bias = self.predictor_bias_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(
            out,
            "# HELP xsched_gateway_predictor_signed_error_tokens The sum of predicted mean - actual output tokens (divide by the error's count for the mean bias).\n# TYPE xsched_gateway_predictor_signed_error_tokens gauge\nxsched_gateway_predictor_signed_error_tokens{{{labels}}} {bias}"
        );
        let _ = writeln!(
            out,
            "# HELP xsched_gateway_answers_total Answers given, by status class.\n# TYPE xsched_gateway_answers_total counter"
        );
        for (class, n) in ["2xx", "4xx", "429", "5xx"].iter().zip(&self.answers) {
            let _ = writeln!(
                out,
                "xsched_gateway_answers_total{{{labels},status=\"{class}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
    }

    /// Each class band's latencies and counts.
    fn render_bands(&self, out: &mut String, labels: &str) {
        for (band, b) in BANDS.iter().zip(&self.bands) {
            let l = format!("{labels},class=\"{band}\"");
            b.ttft.render(
                out,
                "xsched_gateway_class_ttft_seconds",
                "arrival to the first byte of the answer's body, by class band",
                &l,
            );
            b.ttlt.render(
                out,
                "xsched_gateway_class_ttlt_seconds",
                "arrival to the end of the answer's body, by class band",
                &l,
            );
        }
        for (name, help, count) in [
            (
                "shed",
                "Requests shed (503 with Retry-After), by class band.",
                (|b: &Band| &b.shed) as fn(&Band) -> &AtomicU64,
            ),
            (
                "evicted",
                "Running requests evicted for a higher class (the engine's connection closed), by class band.",
                |b: &Band| &b.evicted,
            ),
            (
                "slo_ttft",
                "Answers begun to requests with a TTFT deadline (x-llm-d-slo-ttft-ms), by class band.",
                |b: &Band| &b.slo_ttft,
            ),
            (
                "slo_ttft_missed",
                "Of those, answers whose first byte came after the deadline, by class band.",
                |b: &Band| &b.slo_ttft_missed,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP xsched_gateway_class_{name}_total {help}\n# TYPE xsched_gateway_class_{name}_total counter"
            );
            for (band, b) in BANDS.iter().zip(&self.bands) {
                let _ = writeln!(
                    out,
                    "xsched_gateway_class_{name}_total{{{labels},class=\"{band}\"}} {}",
                    count(b).load(Ordering::Relaxed)
                );
            }
        }
    }

    /// Each tenant served anything: its requests and output tokens.
    fn render_tenants(
        &self,
        out: &mut String,
        labels: &str,
        tenant_name: impl Fn(usize) -> String,
    ) {
        let _ = writeln!(
            out,
            "# HELP xsched_gateway_tenant_requests_total Requests admitted, by tenant.\n# TYPE xsched_gateway_tenant_requests_total counter\n# HELP xsched_gateway_tenant_output_tokens_total Output tokens served, by tenant (a stream's as they pass).\n# TYPE xsched_gateway_tenant_output_tokens_total counter"
        );
        for (i, t) in self.tenants.iter().enumerate() {
            let requests = t.requests.load(Ordering::Relaxed);
            if requests == 0 {
                continue;
            }
            // A tenant's name is a client's header: escaped as a label value must be.
            let name = tenant_name(i).replace('\\', "\\\\").replace('"', "\\\"");
            let l = format!("{labels},tenant=\"{name}\"");
            let tokens = t.output_tokens.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "xsched_gateway_tenant_requests_total{{{l}}} {requests}\nxsched_gateway_tenant_output_tokens_total{{{l}}} {tokens}"
            );
        }
    }
}

/// Each upstream's learned concurrency (`--learn-concurrency`), by name.
pub fn render_learned(
    out: &mut String,
    policy: &str,
    learned: impl Iterator<Item = (String, usize)>,
) {
    let _ = writeln!(
        out,
        "# HELP xsched_gateway_upstream_learned_concurrency Requests admitted to the engine at once at most, learned from its throughput (--learn-concurrency).\n# TYPE xsched_gateway_upstream_learned_concurrency gauge"
    );
    for (name, limit) in learned {
        let _ = writeln!(
            out,
            "xsched_gateway_upstream_learned_concurrency{{policy=\"{policy}\",upstream=\"{name}\"}} {limit}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let m = Metrics::default();
        m.last_byte(1, Duration::from_millis(3));
        m.last_byte(1, Duration::from_millis(700));
        m.last_byte(2, Duration::from_secs(500));
        m.shed(2);
        m.tenant_request(3);
        m.tenant_tokens(3, 40);
        m.answered(200);
        m.answered(429);
        m.predicted(10.0, 4.0);
        m.predicted(3.0, 100.0);
        let text = m.render("fcfs", |i| format!("t{i}"));
        assert!(text.contains(
            "xsched_gateway_class_ttlt_seconds_count{policy=\"fcfs\",class=\"standard\"} 2"
        ));
        assert!(
            text.contains("xsched_gateway_class_shed_total{policy=\"fcfs\",class=\"sheddable\"} 1")
        );
        assert!(text.contains(
            "xsched_gateway_tenant_output_tokens_total{policy=\"fcfs\",tenant=\"t3\"} 40"
        ));
        assert!(
            !text.contains("tenant=\"t0\""),
            "tenants served nothing are left out"
        );
        assert!(
            text.contains("xsched_gateway_ttlt_seconds_bucket{policy=\"fcfs\",le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("xsched_gateway_ttlt_seconds_bucket{policy=\"fcfs\",le=\"1\"} 2"),
            "{text}"
        );
        assert!(text.contains("xsched_gateway_ttlt_seconds_bucket{policy=\"fcfs\",le=\"+Inf\"} 3"));
        assert!(text.contains("xsched_gateway_ttlt_seconds_count{policy=\"fcfs\"} 3"));
        assert!(text.contains("xsched_gateway_answers_total{policy=\"fcfs\",status=\"429\"} 1"));
        assert!(text.contains(
            "xsched_gateway_predictor_abs_error_tokens_bucket{policy=\"fcfs\",le=\"8\"} 1"
        ));
        assert!(
            text.contains("xsched_gateway_predictor_abs_error_tokens_sum{policy=\"fcfs\"} 103")
        );
        assert!(text.contains("xsched_gateway_predictor_signed_error_tokens{policy=\"fcfs\"} -91"));
    }
}
