//! Engine awareness: each engine's own metrics, scraped, fed to the scheduling core as the
//! engine's report. What production routers read (docs: `../shared/docs/GATEWAYS.md`):
//! vLLM's `vllm:num_requests_waiting`, `vllm:num_requests_running` and `vllm:kv_cache_usage_perc`
//! (falling back to the deprecated `vllm:gpu_cache_usage_perc`), llama.cpp's
//! `llamacpp:requests_deferred` and `llamacpp:requests_processing` (`llama-server --metrics`),
//! SGLang's `sglang:num_queue_reqs` and `sglang:token_usage`; and llama.cpp's slots
//! (`total_slots` at `GET /props`).
//!
//! The rules:
//! - **Concurrency from the engine's slots**: admission to an engine keeps within the smaller of
//!   `--concurrency` and the slots it reports, so a gateway configured above an engine's
//!   `--parallel` never queues requests inside the engine, where the policy cannot order them.
//! - **An engine that queues is saturated**: while it reports requests waiting in its own queue
//!   (it is shared with other clients, or was configured with fewer slots than it has), the
//!   gateway sends it nothing more.
//! - **Stale is saturated** (llm-d's rule): an engine whose metrics answered before and have not
//!   for [`STALE_AFTER`] is sent nothing until they answer again. An engine with no metrics at
//!   all (no `/metrics`, or none of the names above) is admitted by `--concurrency` alone.
//! - **Silent is unresponsive**: an engine that gives no answer at all to its scrapes (not even
//!   a 404) for [`SILENT_AFTER`] is hung or gone; the core is told, takes back the requests
//!   there that have not begun answering and places them elsewhere (a hung engine costs them
//!   seconds, not the first-byte timeout). It is told again when the engine answers.
//! - Its KV usage, with `--kv-tokens`, is its free KV for admission.
//! - Its count of generated tokens (vLLM's `vllm:generation_tokens_total`; llama.cpp's
//!   `llamacpp:n_decode_total` × `llamacpp:n_busy_slots_per_decode`), with
//!   `--learn-concurrency`, measures its throughput at each level (the core's `learn.rs`).
//!
//! Every scrape is bounded: [`SCRAPE_TIMEOUT`] and [`MAX_SCRAPE`] bytes.

use crate::admission::RequestQueue;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Uri;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use xsched_llm_core::EngineReport;

/// How often each engine's metrics are read by default.
pub const SCRAPE_INTERVAL: Duration = Duration::from_millis(500);
/// How long one scrape may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(1);
/// Metrics that answered before and not for this long are stale (the engine counts as
/// saturated).
pub const STALE_AFTER: Duration = Duration::from_secs(3);
/// An engine whose scrapes got no answer at all (no status, even a 404) for this long since its
/// last one (or since scraping began) is silent: hung, or gone. The core sends it nothing and
/// takes back the requests there whose answer has not begun.
pub const SILENT_AFTER: Duration = Duration::from_secs(3);
/// The most bytes of one scrape read.
pub const MAX_SCRAPE: usize = 1 << 20;

/// What an engine's metrics said (each summed over its label sets).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Scraped {
    /// Requests waiting in the engine's own queue.
    pub waiting: Option<f64>,
    /// Requests it is running.
    pub running: Option<f64>,
    /// The fraction of its KV cache in use (0 to 1).
    pub kv_used: Option<f64>,
    /// Tokens it has generated since it started, counted at every step.
    pub generated: Option<f64>,
}

impl Scraped {
    fn any(&self) -> bool {
        self.waiting.is_some()
            || self.running.is_some()
            || self.kv_used.is_some()
            || self.generated.is_some()
    }
}

/// Names read, by what they measure, in order of preference within each.
const WAITING: [&str; 3] = [
    "vllm:num_requests_waiting",
    "llamacpp:requests_deferred",
    "sglang:num_queue_reqs",
];
const RUNNING: [&str; 3] = [
    "vllm:num_requests_running",
    "llamacpp:requests_processing",
    "sglang:num_running_reqs",
];
const KV_USED: [&str; 3] = [
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
];

/// What counts generated tokens at every step: vLLM's counter, or llama.cpp's decode steps and
/// the mean busy slots per step, whose product is the slot-steps so far (a generating slot
/// makes one token a step; a slot still reading its prompt counts too, one a step).
/// (`llamacpp:tokens_predicted_total` grows only when an answer ends, so it is not read.)
const GENERATED: [&str; 3] = [
    "vllm:generation_tokens_total",
    "llamacpp:n_decode_total",
    "llamacpp:n_busy_slots_per_decode",
];

/// Read Prometheus text: the names above, summed over label sets; a line that does not parse is
/// skipped.
pub fn parse(text: &str) -> Scraped {
    let mut sums: [Option<f64>; 12] = [None; 12];
    let names: Vec<&str> = WAITING
        .iter()
        .chain(&RUNNING)
        .chain(&KV_USED)
        .chain(&GENERATED)
        .copied()
        .collect();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        let Some(k) = names.iter().position(|n| *n == name) else {
            continue;
        };
        // The value follows the labels (which may hold spaces inside quotes).
        let rest = match line[name_end..].strip_prefix('{') {
            Some(labels) => labels.rfind('}').map_or("", |e| &labels[e + 1..]),
            None => &line[name_end..],
        };
        let Some(v) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
        else {
            continue;
        };
        *sums[k].get_or_insert(0.0) += v;
    }
    let first =
        |range: std::ops::Range<usize>| range.map(|k| sums[k]).find(Option::is_some).flatten();
    Scraped {
        waiting: first(0..3),
        running: first(3..6),
        kv_used: first(6..9).map(|v| v.min(1.0)),
        generated: sums[9].or_else(|| sums[10].zip(sums[11]).map(|(steps, busy)| steps * busy)),
    }
}

/// The slots in llama.cpp's `GET /props` answer (`total_slots`).
pub fn slots_of(props: &[u8]) -> Option<usize> {
    let v: serde_json::Value = serde_json::from_slice(props).ok()?;
    v.get("total_slots")?
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n >= 1)
}

/// The report the core gets from what was scraped: saturated (`step_tokens` 0) when the
/// metrics are stale or the engine queues requests itself.
pub fn report(
    scraped: Scraped,
    stale: bool,
    slots: Option<usize>,
    kv_tokens: Option<u64>,
) -> EngineReport {
    let waiting = scraped.waiting.unwrap_or(0.0);
    let saturated = stale || waiting >= 1.0;
    EngineReport {
        step_tokens: saturated.then_some(0),
        kv_free_tokens: scraped
            .kv_used
            .zip(kv_tokens)
            .map(|(used, cap)| ((1.0 - used) * cap as f64) as u64),
        waiting: waiting as usize,
        slots,
    }
}

/// One engine as the gateway last saw it.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    scraped: Scraped,
    slots: Option<usize>,
    /// When its metrics last answered (`None`: never: no metrics).
    last_ok: Option<Instant>,
    stale: bool,
    scrapes_failed: u64,
    /// When it last answered a scrape at all, with any status.
    last_alive: Option<Instant>,
    silent: bool,
    /// Whether its metrics were said to carry none of the names read (said once).
    said_unread: bool,
}

/// Every engine's scraped state.
pub struct Engines {
    names: Vec<String>,
    seen: Mutex<Vec<Seen>>,
    concurrency: usize,
    kv_tokens: Option<u64>,
    /// When scraping began (an engine that never answered is silent from then).
    started: Instant,
}

/// What one scrape brought back.
struct Scrape {
    /// Whether the engine answered at all (any status).
    alive: bool,
    /// Its metrics, when they answered with figures the gateway reads.
    scraped: Option<Scraped>,
    /// Its metrics answered, with none of the names the gateway reads.
    unread: bool,
}

/// What a scrape changes for the core.
#[derive(Default)]
struct Change {
    report: Option<EngineReport>,
    responsive: Option<bool>,
}

impl Engines {
    fn lock(&self) -> MutexGuard<'_, Vec<Seen>> {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Start scraping `uris` every `interval` on the current runtime, feeding `admission`.
    pub fn spawn(
        uris: Vec<Uri>,
        admission: Arc<RequestQueue>,
        interval: Duration,
        concurrency: usize,
        kv_tokens: Option<u64>,
    ) -> Arc<Engines> {
        let names: Vec<String> = uris
            .iter()
            .map(|u| u.to_string().trim_end_matches('/').to_string())
            .collect();
        let engines = Arc::new(Engines {
            seen: Mutex::new(vec![Seen::default(); names.len()]),
            names,
            concurrency,
            kv_tokens,
            started: Instant::now(),
        });
        let client = crate::upstream::client(1);
        for u in 0..engines.names.len() {
            let (engines, admission, client) = (engines.clone(), admission.clone(), client.clone());
            tokio::spawn(async move { engines.scrape(u, &admission, &client, interval).await });
        }
        engines
    }

    /// Scrape engine `u` every `interval`, feeding `admission`, for as long as the runtime runs.
    async fn scrape(
        &self,
        u: usize,
        admission: &RequestQueue,
        client: &crate::upstream::UpstreamClient,
        interval: Duration,
    ) {
        let base = &self.names[u];
        let slots = get(client, &format!("{base}/props"))
            .await
            .body
            .and_then(|b| slots_of(&b));
        if let Some(s) = self.lock().get_mut(u) {
            s.slots = slots;
        }
        if slots.is_some() {
            admission.report(u, report(Scraped::default(), false, slots, self.kv_tokens));
        }
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let got = get(client, &format!("{base}/metrics")).await;
            let parsed = got.body.map(|b| parse(&String::from_utf8_lossy(&b)));
            let scrape = Scrape {
                alive: got.alive,
                unread: parsed.is_some_and(|p| !p.any()),
                scraped: parsed.filter(Scraped::any),
            };
            let change = self.seen_scrape(u, &scrape);
            if let Some(r) = change.report {
                admission.report(u, r);
            }
            if let Some(responsive) = change.responsive {
                admission.responsive(u, responsive);
            }
            if let Some(tokens) = scrape.scraped.and_then(|s| s.generated) {
                admission.generated(u, tokens);
            }
        }
    }

    /// Record what a scrape of engine `u` brought back: what changes for the core.
    fn seen_scrape(&self, u: usize, scrape: &Scrape) -> Change {
        let mut all = self.lock();
        let Some(s) = all.get_mut(u) else {
            return Change::default();
        };
        let now = Instant::now();
        if scrape.alive {
            s.last_alive = Some(now);
        }
        let silent = now.duration_since(s.last_alive.unwrap_or(self.started)) >= SILENT_AFTER;
        let responsive = (silent != s.silent).then_some(!silent);
        if silent != s.silent {
            tracing::warn!(
                "upstream {}: {}",
                self.names[u],
                if silent {
                    "silent (no answer to its scrapes): its requests not yet answering go elsewhere"
                } else {
                    "answers again"
                }
            );
        }
        s.silent = silent;
        if scrape.unread && !s.said_unread {
            s.said_unread = true;
            tracing::warn!(
                "upstream {}: its /metrics answer none of the names the gateway reads \
                 (vLLM's vllm:num_requests_waiting, llama.cpp's, SGLang's; renamed?): {}",
                self.names[u],
                if s.last_ok.is_some() {
                    "it counts as saturated once they have been missing for 3 s"
                } else {
                    "--concurrency alone bounds what it is sent"
                }
            );
        }
        let report = match scrape.scraped {
            Some(scraped) => {
                s.scraped = scraped;
                s.last_ok = Some(now);
                s.stale = false;
                Some(report(scraped, false, s.slots, self.kv_tokens))
            }
            None => {
                s.scrapes_failed += 1;
                let stale = s.last_ok.is_some_and(|t| t.elapsed() >= STALE_AFTER);
                let flipped = stale && !s.stale;
                s.stale = stale;
                flipped.then(|| report(s.scraped, true, s.slots, self.kv_tokens))
            }
        };
        Change { report, responsive }
    }

    /// Append the engines' figures to a metrics exposition (`labels` first in each).
    pub fn render(&self, out: &mut String, labels: &str) {
        let seen = self.lock().clone();
        let _ = writeln!(
            out,
            "# HELP xsched_gateway_upstream_concurrency Requests admitted to the engine at once at most (the smaller of --concurrency and its slots; with --learn-concurrency, the learned bound below it is xsched_gateway_upstream_learned_concurrency).\n# TYPE xsched_gateway_upstream_concurrency gauge\n# HELP xsched_gateway_upstream_waiting Requests waiting in the engine's own queue (its metrics).\n# TYPE xsched_gateway_upstream_waiting gauge\n# HELP xsched_gateway_upstream_running Requests the engine runs (its metrics).\n# TYPE xsched_gateway_upstream_running gauge\n# HELP xsched_gateway_upstream_kv_usage The engine's KV cache in use, 0 to 1 (its metrics).\n# TYPE xsched_gateway_upstream_kv_usage gauge\n# HELP xsched_gateway_upstream_metrics_stale 1 while the engine's metrics are stale (it is sent nothing).\n# TYPE xsched_gateway_upstream_metrics_stale gauge"
        );
        for (name, s) in self.names.iter().zip(&seen) {
            let l = format!("{labels},upstream=\"{name}\"");
            let c = s
                .slots
                .map_or(self.concurrency, |n| n.clamp(1, self.concurrency));
            let _ = writeln!(out, "xsched_gateway_upstream_concurrency{{{l}}} {c}");
            for (metric, v) in [
                ("waiting", s.scraped.waiting),
                ("running", s.scraped.running),
                ("kv_usage", s.scraped.kv_used),
            ] {
                if let Some(v) = v.filter(|_| s.last_ok.is_some()) {
                    let _ = writeln!(out, "xsched_gateway_upstream_{metric}{{{l}}} {v}");
                }
            }
            let _ = writeln!(
                out,
                "xsched_gateway_upstream_metrics_stale{{{l}}} {}",
                u8::from(s.stale)
            );
        }
    }
}

/// What a GET brought back.
struct Got {
    /// Whether any answer came (any status) within the timeout.
    alive: bool,
    /// The body of a 200, within the size bound.
    body: Option<Bytes>,
}

/// GET `url` within the timeout and size bound.
async fn get(client: &crate::upstream::UpstreamClient, url: &str) -> Got {
    let dead = || Got {
        alive: false,
        body: None,
    };
    let Ok(uri) = url.parse::<Uri>() else {
        return dead();
    };
    let Ok(request) = hyper::Request::get(uri).body(Full::new(Bytes::new())) else {
        return dead();
    };
    let answer = tokio::time::timeout(SCRAPE_TIMEOUT, async {
        let Ok(r) = client.request(request).await else {
            return dead();
        };
        if !r.status().is_success() {
            return Got {
                alive: true,
                body: None,
            };
        }
        let body = Limited::new(r.into_body(), MAX_SCRAPE).collect().await;
        Got {
            alive: true,
            body: body.ok().map(|b| b.to_bytes()),
        }
    });
    answer.await.unwrap_or_else(|_| dead())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_llama_cpp_and_sglang_names_summed_over_labels() {
        let vllm = "# HELP vllm:num_requests_waiting x\n\
            vllm:num_requests_waiting{model_name=\"a b\",engine=\"0\"} 2.0\n\
            vllm:num_requests_waiting{model_name=\"a b\",engine=\"1\"} 1.0\n\
            vllm:num_requests_running{model_name=\"m\"} 5\n\
            vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.9\n\
            vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n";
        assert_eq!(
            parse(vllm),
            Scraped {
                waiting: Some(3.0),
                running: Some(5.0),
                kv_used: Some(0.25),
                generated: None,
            },
            "the current KV name before the deprecated one"
        );
        let old = parse("vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n");
        assert_eq!(old.kv_used, Some(0.5), "the deprecated name when alone");
        let llama = "llamacpp:requests_processing 4\nllamacpp:requests_deferred 1\nllamacpp:n_tokens_max 38\n";
        assert_eq!(
            parse(llama),
            Scraped {
                waiting: Some(1.0),
                running: Some(4.0),
                kv_used: None,
                generated: None,
            }
        );
        let sglang = parse("sglang:num_queue_reqs{a=\"b\"} 7\nsglang:token_usage 0.4\n");
        assert_eq!((sglang.waiting, sglang.kv_used), (Some(7.0), Some(0.4)));
    }

    #[test]
    fn generated_tokens_counted_at_every_step() {
        let vllm = parse("vllm:generation_tokens_total{model_name=\"m\"} 1200\n");
        assert_eq!(vllm.generated, Some(1200.0));
        // llama.cpp: the decode steps times the mean busy slots a step (its own text).
        let llama = "# TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total 500\n\
            llamacpp:tokens_predicted_total 90\n\
            # TYPE llamacpp:n_busy_slots_per_decode gauge\nllamacpp:n_busy_slots_per_decode 3.5\n";
        let llama = parse(llama);
        assert_eq!(llama.generated, Some(1750.0));
        assert!(llama.any(), "a counter alone is metrics");
        let half = parse("llamacpp:n_decode_total 500\n");
        assert_eq!(
            half.generated, None,
            "steps without their busy slots count nothing"
        );
    }

    #[test]
    fn garbage_is_skipped_never_trusted() {
        let s = parse(
            "vllm:num_requests_waiting NaN\nvllm:num_requests_waiting -3\nvllm:num_requests_running{x=\"}\"\nllamacpp:requests_processing 2 1700000000\n\u{0}\u{ff}",
        );
        assert_eq!(s.waiting, None);
        assert_eq!(
            s.running,
            Some(2.0),
            "a timestamp after the value is ignored"
        );
        assert!(!parse("").any());
        assert_eq!(slots_of(br#"{"total_slots":4,"n_ctx":4096}"#), Some(4));
        assert_eq!(slots_of(br#"{"total_slots":0}"#), None);
        assert_eq!(slots_of(b"<html>"), None);
    }

    #[test]
    fn metrics_without_a_name_read_are_said_once_and_known_ones_gone_go_stale() {
        let engines = Engines {
            names: vec!["http://e".into()],
            seen: Mutex::new(vec![Seen::default()]),
            concurrency: 4,
            kv_tokens: None,
            started: Instant::now(),
        };
        let renamed = Scrape {
            alive: true,
            scraped: None,
            unread: true,
        };
        engines.seen_scrape(0, &renamed);
        assert!(engines.lock()[0].said_unread);
        // Never known: nothing changes for the core (--concurrency alone bounds it).
        assert!(engines.seen_scrape(0, &renamed).report.is_none());
        // Known once, then gone for longer than STALE_AFTER: saturated.
        let known = Scrape {
            alive: true,
            scraped: Some(parse("vllm:num_requests_waiting 0\n")),
            unread: false,
        };
        engines.seen_scrape(0, &known);
        engines.lock()[0].last_ok = Instant::now().checked_sub(STALE_AFTER);
        let change = engines.seen_scrape(0, &renamed);
        assert_eq!(change.report.and_then(|r| r.step_tokens), Some(0));
    }

    #[test]
    fn stale_or_queueing_engines_are_saturated() {
        let idle = Scraped {
            waiting: Some(0.0),
            running: Some(2.0),
            kv_used: Some(0.5),
            generated: None,
        };
        let r = report(idle, false, Some(4), Some(1000));
        assert_eq!(r.step_tokens, None, "free to admit");
        assert_eq!(r.kv_free_tokens, Some(500));
        assert_eq!(r.slots, Some(4));
        assert_eq!(report(idle, true, None, None).step_tokens, Some(0), "stale");
        let queueing = Scraped {
            waiting: Some(2.0),
            ..idle
        };
        let r = report(queueing, false, None, None);
        assert_eq!((r.step_tokens, r.waiting), (Some(0), 2));
    }
}
