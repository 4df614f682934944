//! # xsched-load
//!
//! `xsched llm load`: an open-loop load generator for any OpenAI-compatible server (an engine
//! directly, or the gateway in front of it), so one run can target either. Requests are sent at
//! seeded Poisson arrivals whether or not earlier ones have finished; each is a streaming chat
//! completion of one prompt with `max_tokens` capped, at temperature 0 with a fixed seed (so two
//! runs ask the same work), and its time to first token (the first server-sent event with
//! content) and to last token (the end of the stream) are recorded. Sequentially (each request
//! sent when the previous answer ended) it measures every request alone: the light-load
//! baseline, and each request's time alone for relative waits. Arrivals may also follow a
//! trace's gaps (Azure's), and each request may be asked for its recorded answer's length with
//! `ignore_eos` (vLLM's benchmark's way to make a small model generate a real length
//! distribution: llama.cpp's and vLLM's servers accept the field).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::Uri;
use std::time::{Duration, Instant};
use xsched_core::Nanos;
use xsched_openai::client::HttpClient as UpstreamClient;
use xsched_report::quantile;
use xsched_workload::SeededRng;

/// What a load run sends.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The server (`http://host:port`; requests go to `/v1/chat/completions`).
    pub url: Uri,
    /// The prompts, used in order (cycled if the run needs more).
    pub prompts: Vec<String>,
    /// How requests are sent.
    pub arrivals: Arrivals,
    /// How long to send for.
    pub duration: Duration,
    /// Requests to send at most (`None`: as many as the duration allows).
    pub requests: Option<usize>,
    /// The `max_tokens` of every request (the cap, with recorded lengths).
    pub max_tokens: u32,
    /// Each prompt's recorded answer length in tokens, index for index (empty: none): a request
    /// then asks for that many (at most `max_tokens`) with `ignore_eos`.
    pub answer_tokens: Vec<u32>,
    /// The arrival gaps' seed.
    pub seed: u64,
}

/// How requests are sent.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrivals {
    /// Open loop: Poisson arrivals at this mean rate (requests per second).
    Poisson(f64),
    /// Closed loop: each request when the previous answer ended.
    Sequential,
    /// Open loop: these gaps between arrivals (seconds), cycled.
    Gaps(std::sync::Arc<[f64]>),
}

/// One request's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestSample {
    /// Its prompt (an index into the configured prompts).
    pub prompt: usize,
    /// Seconds from the run's start to its sending.
    pub sent: f64,
    /// Seconds from its arrival to the first event with content (`None`: none came).
    pub ttft: Option<f64>,
    /// Seconds from its arrival to the end of its answer.
    pub ttlt: f64,
    /// The HTTP status.
    pub status: u16,
    /// Events with content received (about one per token).
    pub chunks: usize,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Nothing to send.
    #[error("no prompts")]
    NoPrompts,
    /// A rate, duration or request count that sends nothing.
    #[error(
        "rate, duration and requests must be positive (arrivals {arrivals:?}, duration {duration:?}, requests {requests:?})"
    )]
    Empty {
        /// The arrivals.
        arrivals: Arrivals,
        /// The duration.
        duration: Duration,
        /// The request bound.
        requests: Option<usize>,
    },
    /// The runtime.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Send the load; every request's outcome, in arrival order (failed connections as status 0).
pub fn run(config: &LoadConfig) -> Result<Vec<RequestSample>, LoadError> {
    if config.prompts.is_empty() {
        return Err(LoadError::NoPrompts);
    }
    let bad_rate = match &config.arrivals {
        Arrivals::Poisson(r) => !(*r > 0.0 && r.is_finite()),
        Arrivals::Gaps(g) => g.is_empty() || g.iter().any(|x| !(x.is_finite() && *x >= 0.0)),
        Arrivals::Sequential => false,
    };
    if bad_rate || config.duration.is_zero() || config.requests == Some(0) {
        return Err(LoadError::Empty {
            arrivals: config.arrivals.clone(),
            duration: config.duration,
            requests: config.requests,
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("xsched-load")
        .enable_all()
        .build()?;
    runtime.block_on(send_all(config))
}

async fn send_all(config: &LoadConfig) -> Result<Vec<RequestSample>, LoadError> {
    let client = Clients {
        pooled: xsched_openai::client::client(usize::MAX),
        fresh: xsched_openai::client::client(0),
    };
    let mut rng = SeededRng::new(config.seed);
    let start = Instant::now();
    let mut at = Duration::ZERO;
    let mut tasks = Vec::new();
    let mut samples = Vec::new();
    for i in 0..config.requests.unwrap_or(usize::MAX) {
        let gap = match &config.arrivals {
            Arrivals::Poisson(rate) => Some(Duration::from_nanos(
                rng.exponential(Nanos::from_us_f64(1e6 / rate)).0,
            )),
            Arrivals::Gaps(g) => Some(Duration::from_secs_f64(g[i % g.len()])),
            Arrivals::Sequential => None,
        };
        if let Some(gap) = gap {
            at += gap;
            if at >= config.duration {
                break;
            }
            tokio::time::sleep_until((start + at).into()).await;
        } else if start.elapsed() >= config.duration {
            break;
        }
        let index = i % config.prompts.len();
        let prompt = &config.prompts[index];
        let mut body = serde_json::json!({
            "model": "default",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": config.max_tokens,
            "stream": true,
            // Deterministic answers, so runs against the engine and the gateway ask the same work.
            "temperature": 0,
            "seed": 1,
        });
        if let Some(&n) = config.answer_tokens.get(index) {
            body["max_tokens"] = n.clamp(1, config.max_tokens).into();
            body["ignore_eos"] = true.into();
        }
        let body = body.to_string();
        let sent = start.elapsed().as_secs_f64();
        let (client, url) = (client.clone(), config.url.clone());
        let task = tokio::spawn(async move { one(&client, &url, body).await });
        if config.arrivals == Arrivals::Sequential {
            samples.push(finished(task.await, index, sent));
        } else {
            tasks.push((task, index, sent));
        }
    }
    for (t, index, sent) in tasks {
        samples.push(finished(t.await, index, sent));
    }
    Ok(samples)
}

/// A request's outcome as a sample of prompt `prompt` sent at `sent` (a task that failed to
/// run counts as a failed connection).
fn finished(
    outcome: Result<ReplyTimes, tokio::task::JoinError>,
    prompt: usize,
    sent: f64,
) -> RequestSample {
    let o = outcome.unwrap_or(ReplyTimes {
        ttft: None,
        ttlt: 0.0,
        status: 0,
        chunks: 0,
    });
    RequestSample {
        prompt,
        sent,
        ttft: o.ttft,
        ttlt: o.ttlt,
        status: o.status,
        chunks: o.chunks,
    }
}

/// What one request measured.
struct ReplyTimes {
    ttft: Option<f64>,
    ttlt: f64,
    status: u16,
    chunks: usize,
}

/// The connections requests go out on: kept alive, and a new one for a retry.
#[derive(Clone)]
struct Clients {
    pooled: UpstreamClient,
    fresh: UpstreamClient,
}

/// One streaming request from now.
async fn one(client: &Clients, url: &Uri, body: String) -> ReplyTimes {
    let arrival = Instant::now();
    let failed = |status| ReplyTimes {
        ttft: None,
        ttlt: arrival.elapsed().as_secs_f64(),
        status,
        chunks: 0,
    };
    let uri = format!(
        "{}/v1/chat/completions",
        url.to_string().trim_end_matches('/')
    );
    let body = Bytes::from(body);
    let request = || {
        Request::post(&uri)
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
    };
    let Ok(req) = request() else {
        return failed(0);
    };
    let answer = match client.pooled.request(req).await {
        Ok(answer) => Ok(answer),
        // Failed before any answer byte on a connection that may have been pooled (llama.cpp's
        // server closes one right after a stream while advertising keep-alive): once more on a
        // new one, as the gateway and the `openai` client do. The time counts from the first.
        Err(e) if !e.is_connect() => match request() {
            Ok(req) => client.fresh.request(req).await,
            Err(_) => return failed(0),
        },
        Err(e) => Err(e),
    };
    let Ok(answer) = answer else {
        return failed(0);
    };
    let status = answer.status().as_u16();
    let mut body = answer.into_body();
    let (mut ttft, mut chunks) = (None, 0);
    // Server-sent events may be split across frames: complete ones end with a blank line.
    let mut pending = String::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        pending.push_str(&String::from_utf8_lossy(data));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            if has_content(&event) {
                ttft.get_or_insert_with(|| arrival.elapsed().as_secs_f64());
                chunks += 1;
            }
        }
    }
    ReplyTimes {
        ttft,
        ttlt: arrival.elapsed().as_secs_f64(),
        status,
        chunks,
    }
}

/// Whether a server-sent event carries generated text (a chat delta's or a completion's).
fn has_content(event: &str) -> bool {
    let Some(json) = event.trim().strip_prefix("data:") else {
        return false;
    };
    xsched_openai::tally::has_text(json.trim().as_bytes())
}

/// Every sample as a JSON line, as `xsched llm load --samples` keeps them: `prompt`, `sent_s`,
/// `ttft_s`, `ttlt_s` (seconds; `ttft_s` null where no content came), `status` and `chunks`.
pub fn write_samples(
    mut out: impl std::io::Write,
    samples: &[RequestSample],
) -> std::io::Result<()> {
    for s in samples {
        let line = serde_json::json!({
            "prompt": s.prompt, "sent_s": s.sent, "ttft_s": s.ttft, "ttlt_s": s.ttlt,
            "status": s.status, "chunks": s.chunks,
        });
        writeln!(out, "{line}")?;
    }
    out.flush()
}

/// The run's figures: requests sent and answered, TTFT and TTLT (mean, P50, P99, in ms) of the
/// answered ones.
pub fn summary(samples: &[RequestSample]) -> serde_json::Map<String, serde_json::Value> {
    let ok: Vec<&RequestSample> = samples.iter().filter(|s| s.status == 200).collect();
    let ms = |v: Vec<f64>| -> (f64, f64, f64) {
        let at = |q: f64| quantile(&v, q).unwrap_or(0.0) * 1e3;
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64 * 1e3;
        (mean, at(0.5), at(0.99))
    };
    let (ttft_mean, ttft_p50, ttft_p99) = ms(ok.iter().filter_map(|s| s.ttft).collect());
    let (ttlt_mean, ttlt_p50, ttlt_p99) = ms(ok.iter().map(|s| s.ttlt).collect());
    let round = |x: f64| (x * 10.0).round() / 10.0;
    let mut m = serde_json::Map::new();
    for (k, v) in [
        ("sent", serde_json::json!(samples.len())),
        ("answered", serde_json::json!(ok.len())),
        ("failed", serde_json::json!(samples.len() - ok.len())),
        ("ttft_mean_ms", serde_json::json!(round(ttft_mean))),
        ("ttft_p50_ms", serde_json::json!(round(ttft_p50))),
        ("ttft_p99_ms", serde_json::json!(round(ttft_p99))),
        ("ttlt_mean_ms", serde_json::json!(round(ttlt_mean))),
        ("ttlt_p50_ms", serde_json::json!(round(ttlt_p50))),
        ("ttlt_p99_ms", serde_json::json!(round(ttlt_p99))),
        (
            "chunks_mean",
            serde_json::json!(round(
                ok.iter().map(|s| s.chunks as f64).sum::<f64>() / ok.len().max(1) as f64
            )),
        ),
    ] {
        m.insert(k.to_string(), v);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_one_line_of_its_fields_in_seconds() {
        let sample = RequestSample {
            prompt: 3,
            sent: 0.5,
            ttft: None,
            ttlt: 1.25,
            status: 200,
            chunks: 7,
        };
        let mut out = Vec::new();
        write_samples(&mut out, &[sample]).expect("written");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            concat!(
                r#"{"prompt":3,"sent_s":0.5,"ttft_s":null,"ttlt_s":1.25,"#,
                r#""status":200,"chunks":7}"#,
                "\n"
            )
        );
    }
}
