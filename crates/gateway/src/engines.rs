//! Engine awareness: each engine's own metrics, scraped, fed to the scheduling core as the
//! engine's report. What production routers read (docs: `../shared/docs/GATEWAYS.md`):
//! vLLM's `vllm:num_requests_waiting`, `vllm:num_requests_running` and `vllm:kv_cache_usage_perc`
//! (falling back to the deprecated `vllm:gpu_cache_usage_perc`), llama.cpp's
//! `llamacpp:requests_deferred` and `llamacpp:requests_processing` (`llama-server --metrics`),
//! SGLang's `sglang:num_queue_reqs` and `sglang:token_usage`; and llama.cpp's slots
//! (`total_slots` at `GET /props`).
//!
//! What the gateway does with them: **concurrency from the engine's slots** (admission to an
//! engine keeps within the smaller of `--concurrency` and the slots it reports, so a gateway
//! configured above an engine's `--parallel` never queues requests inside the engine, where the
//! policy cannot order them); every scrape, answered or not, goes to the scheduling core, which
//! decides from it whether the engine is saturated (it queues requests itself), its metrics
//! stale, or it silent (hung or gone: the requests there not yet answering are placed
//! elsewhere), by the rules and times of `xsched_llm_core::watch`. Its KV usage, with
//! `--kv-tokens`, is its free KV for admission; its count of generated tokens (vLLM's
//! `vllm:generation_tokens_total`; llama.cpp's `llamacpp:n_decode_total` ×
//! `llamacpp:n_busy_slots_per_decode`), with `--learn-concurrency`, measures its throughput at
//! each level (the core's `learn.rs`). This module reads and logs; the core decides.
//!
//! Every scrape is bounded: [`SCRAPE_TIMEOUT`] and [`MAX_SCRAPE`] bytes.

use crate::request_queue::RequestQueue;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Uri;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use xsched_llm_core::watch::{EngineMetrics, Scrape};

/// How often each engine's metrics are read by default.
pub const SCRAPE_INTERVAL: Duration = Duration::from_millis(500);
/// How long one scrape may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(1);
/// The most bytes of one scrape read.
pub const MAX_SCRAPE: usize = 1 << 20;

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
pub fn parse(text: &str) -> EngineMetrics {
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
    EngineMetrics {
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

/// What the driver remembers of one engine, to log changes once.
#[derive(Clone, Copy, Debug, Default)]
struct Said {
    /// Whether its metrics were said to carry none of the names read.
    unread: bool,
    /// Whether it was said to be silent.
    silent: bool,
}

/// Every engine's scrapes, fed to the core.
pub struct Engines {
    names: Vec<String>,
    said: Mutex<Vec<Said>>,
    concurrency: usize,
    admission: Arc<RequestQueue>,
}

impl Engines {
    fn lock(&self) -> MutexGuard<'_, Vec<Said>> {
        self.said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Start scraping `uris` every `interval` on the current runtime, feeding `admission`.
    pub fn spawn(
        uris: Vec<Uri>,
        admission: Arc<RequestQueue>,
        interval: Duration,
        concurrency: usize,
    ) -> Arc<Engines> {
        let names: Vec<String> = uris
            .iter()
            .map(|u| u.to_string().trim_end_matches('/').to_string())
            .collect();
        let engines = Arc::new(Engines {
            said: Mutex::new(vec![Said::default(); names.len()]),
            names,
            concurrency,
            admission,
        });
        let client = crate::upstream::client(1);
        for u in 0..engines.names.len() {
            let (engines, client) = (engines.clone(), client.clone());
            tokio::spawn(async move { engines.scrape(u, &client, interval).await });
        }
        engines
    }

    /// Scrape engine `u` every `interval`, feeding the core, for as long as the runtime runs.
    async fn scrape(&self, u: usize, client: &crate::upstream::UpstreamClient, interval: Duration) {
        let base = &self.names[u];
        let props = get(client, &format!("{base}/props")).await;
        let slots = props.body.and_then(|b| slots_of(&b));
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first = true;
        loop {
            tick.tick().await;
            let got = get(client, &format!("{base}/metrics")).await;
            let parsed = got.body.map(|b| parse(&String::from_utf8_lossy(&b)));
            let scrape = Scrape {
                alive: got.alive || (first && props.alive),
                metrics: parsed.filter(EngineMetrics::any),
                slots: if first { slots } else { None },
            };
            first = false;
            self.admission.scraped(u, scrape);
            self.say(u, parsed.is_some_and(|p| !p.any()));
        }
    }

    /// Log what changed for engine `u` (its metrics `unread`: none of the names read).
    fn say(&self, u: usize, unread: bool) {
        let watched = self.admission.watched().get(u).copied().unwrap_or_default();
        let mut said = self.lock();
        let Some(s) = said.get_mut(u) else {
            return;
        };
        let name = &self.names[u];
        if watched.silent() != s.silent {
            s.silent = watched.silent();
            if s.silent {
                tracing::warn!(
                    "upstream {name}: silent (no answer to its scrapes): its requests not yet answering go elsewhere"
                );
            } else {
                tracing::warn!("upstream {name}: answers again");
            }
        }
        if unread && !s.unread {
            s.unread = true;
            tracing::warn!(
                "upstream {name}: its /metrics answer none of the names the gateway reads \
                 (vLLM's vllm:num_requests_waiting, llama.cpp's, SGLang's; renamed?): {}",
                if watched.metrics().is_some() {
                    "it counts as saturated once they have been missing for 3 s"
                } else {
                    "--concurrency alone bounds what it is sent"
                }
            );
        }
    }

    /// Append the engines' figures to a metrics exposition (`labels` first in each).
    pub fn render(&self, out: &mut String, labels: &str) {
        let seen = self.admission.watched();
        let _ = writeln!(
            out,
            "# HELP xsched_gateway_upstream_concurrency Requests admitted to the engine at once at most (the smaller of --concurrency and its slots; with --learn-concurrency, the learned bound below it is xsched_gateway_upstream_learned_concurrency).\n# TYPE xsched_gateway_upstream_concurrency gauge\n# HELP xsched_gateway_upstream_waiting Requests waiting in the engine's own queue (its metrics).\n# TYPE xsched_gateway_upstream_waiting gauge\n# HELP xsched_gateway_upstream_running Requests the engine runs (its metrics).\n# TYPE xsched_gateway_upstream_running gauge\n# HELP xsched_gateway_upstream_kv_usage The engine's KV cache in use, 0 to 1 (its metrics).\n# TYPE xsched_gateway_upstream_kv_usage gauge\n# HELP xsched_gateway_upstream_metrics_stale 1 while the engine's metrics are stale (it is sent nothing).\n# TYPE xsched_gateway_upstream_metrics_stale gauge"
        );
        for (name, s) in self.names.iter().zip(&seen) {
            let l = format!("{labels},upstream=\"{name}\"");
            let c = s
                .slots()
                .map_or(self.concurrency, |n| n.clamp(1, self.concurrency));
            let metrics = s.metrics().unwrap_or_default();
            let _ = writeln!(out, "xsched_gateway_upstream_concurrency{{{l}}} {c}");
            for (metric, v) in [
                ("waiting", metrics.waiting),
                ("running", metrics.running),
                ("kv_usage", metrics.kv_used),
            ] {
                if let Some(v) = v {
                    let _ = writeln!(out, "xsched_gateway_upstream_{metric}{{{l}}} {v}");
                }
            }
            let _ = writeln!(
                out,
                "xsched_gateway_upstream_metrics_stale{{{l}}} {}",
                u8::from(s.stale())
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
            EngineMetrics {
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
            EngineMetrics {
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
}
