//! What the drivers of the scheduling core must decide alike (the gateway, the endpoint picker
//! and the engine simulator): a learned sequence and a serving script, each with the
//! simulator's decisions to compare against.

use super::policy;
use std::net::SocketAddr;

/// The order the queued prompts of [`sequence`] arrive in (indices), in the parity tests.
pub const ARRIVAL_ORDER: [usize; 8] = [1, 5, 3, 7, 0, 2, 6, 4];

/// Prompts of a multiple of 4 characters (the gateway's token estimate, 0.25 a character, is
/// then exact) and their true answer lengths.
pub fn sequence() -> Vec<(String, u32)> {
    let texts = [
        ("say yes or no", 3),
        ("write a long essay on the history of rome", 900),
        ("list three colours", 40),
        ("explain how a compiler works in detail", 200),
        ("what is two plus two", 10),
        ("write a story about a dragon and a knight", 600),
        ("summarise this paragraph briefly", 80),
        ("reply with ok", 5),
    ];
    texts
        .into_iter()
        .map(|(t, n)| {
            let pad = (4 - t.len() % 4) % 4;
            (format!("{t}{}", ".".repeat(pad)), n)
        })
        .collect()
}

/// The order the engine simulator admits `arrival_order`'s prompts (tagged `q<index>`) under
/// `sagesched-noaging`: each prompt learned four times first, then the arrivals queued behind a
/// long request on an engine of one slot. What the gateway and the endpoint picker must match.
pub fn simulated_order(prompts: &[(String, u32)], arrival_order: &[usize]) -> Vec<String> {
    use xsched_llm_predict::embedding::{Embedder, Hashed};
    use xsched_llm_sim::Request;
    use xsched_llm_sim::engine::EngineConfig;
    use xsched_llm_sim::sim::{self, Cluster};
    let request = |id: usize, arrival: f64, prompt: &str, input: u32, output: u32| Request {
        id,
        arrival,
        prompt: prompt.to_string(),
        input_tokens: input,
        output_tokens: output,
        previous_answer_tokens: None,
        embedding: Hashed.embed(prompt),
    };
    let warm: Vec<Request> = (0..4)
        .flat_map(|_| prompts.iter())
        .enumerate()
        .map(|(i, (p, n))| request(i, 0.0, p, (p.len() / 4) as u32, *n))
        .collect();
    let mut requests = vec![request(0, 0.0, "hi", 1, 2000)];
    for (i, &k) in arrival_order.iter().enumerate() {
        let (p, n) = &prompts[k];
        let arrival = 0.001 * (i + 1) as f64;
        requests.push(request(i + 1, arrival, p, (p.len() / 4) as u32, *n));
    }
    let cfg = EngineConfig {
        max_num_seqs: 1,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    };
    let run = sim::simulate(
        &cfg,
        Cluster::SINGLE,
        policy("sagesched-noaging"),
        xsched_gateway::forecast::HISTORY,
        &warm,
        &requests,
    )
    .expect("run");
    run.admitted[1..]
        .iter()
        .map(|&i| format!("q{}", arrival_order[i - 1]))
        .collect()
}

/// A chat request tagged `tag` for `prompt` whose fake-engine answer counts `tokens` (and the
/// prompt's exact estimate of a quarter token a character).
pub fn with_tokens(tag: &str, prompt: &str, tokens: u32) -> String {
    serde_json::json!({
        "model": "m", "user": tag, "max_tokens": 4096, "ms": 0, "answer_tokens": tokens,
        "prompt_tokens": prompt.len() / 4,
        "messages": [{"role": "user", "content": prompt}],
    })
    .to_string()
}

/// Answers learned from, in a metrics page of `policy` (its predictor-error count).
pub fn learned_in(page: &str, policy: &str) -> u64 {
    let key = format!("xsched_gateway_predictor_abs_error_tokens_count{{policy=\"{policy}\"}} ");
    page.lines()
        .find_map(|l| l.strip_prefix(&key)?.parse().ok())
        .unwrap_or(0)
}

/// The serving script the gateway, the endpoint picker and the simulator must decide alike
/// (engine A's metrics say it queues, B is free; one slot each; two may wait; tenant
/// `nightly` may hold two): each request's tag, tenant and class, in arrival order. Once all
/// have arrived, A's metrics clear, and `hold` (on B) is released last.
pub const SCRIPT: [(&str, Option<&str>, i32); 6] = [
    ("hold", Some("nightly"), 0),
    ("r2", Some("nightly"), 0),
    ("r3", Some("nightly"), 0),
    ("r4", None, -1),
    ("r5", None, 0),
    ("r6", None, 0),
];

/// The classes file of [`SCRIPT`].
pub const SCRIPT_CLASSES: &str = "[tenants.nightly]\nmax_requests = 2\n";

/// What every driver decides for [`SCRIPT`]: each request's engine (`A`, `B`) or the core's
/// reason for shedding it.
pub const SCRIPT_DECIDED: [(&str, &str); 6] = [
    ("hold", "B"),
    ("r2", "A"),
    ("r3", "tenant-limit"),
    ("r4", "displaced"),
    ("r5", "A"),
    ("r6", "queue-full"),
];

/// A metrics page of engine waiting `n` (vLLM's name).
pub fn queueing(n: u32) -> Option<String> {
    Some(format!(
        "vllm:num_requests_waiting{{model_name=\"m\"}} {n}\n"
    ))
}

/// The headers a [`SCRIPT`] request is sent with.
pub fn script_headers(tenant: Option<&'static str>, class: i32) -> Vec<(&'static str, String)> {
    let mut h = vec![("x-dynamo-request-priority", class.to_string())];
    h.extend(tenant.map(|t| ("x-llm-d-inference-fairness-id", t.to_string())));
    h
}

/// Whether a metrics page says `upstream`'s engine reported `n` waiting.
pub fn reported_waiting(page: &str, upstream: SocketAddr, n: u32) -> bool {
    let label = format!("upstream=\"http://{upstream}\"");
    page.lines().any(|l| {
        l.starts_with("xsched_gateway_upstream_waiting{")
            && l.contains(&label)
            && l.ends_with(&format!(" {n}"))
    })
}

/// [`SCRIPT`] through the engine simulator: the same scrapes fed at their times (A queueing
/// from 0, clear at 0.5 s), the same classes, tenants, queue bound and tenant limit.
pub fn simulated_decisions() -> std::collections::BTreeMap<String, String> {
    use xsched_llm_core::watch::{EngineMetrics, Scrape};
    use xsched_llm_core::{Eviction, Fairness, Input, Placement, Router};
    use xsched_llm_predict::embedding::{Embedder, Hashed};
    use xsched_llm_sim::engine::EngineConfig;
    use xsched_llm_sim::sim::{Cluster, Rules, Runs};
    let requests: Vec<xsched_llm_sim::Request> = (SCRIPT.iter().enumerate())
        .map(|(id, (tag, ..))| xsched_llm_sim::Request {
            id,
            arrival: 0.001 * (id + 1) as f64,
            prompt: tag.to_string(),
            input_tokens: 10,
            output_tokens: if *tag == "hold" { 2000 } else { 5 },
            previous_answer_tokens: None,
            embedding: Hashed.embed(tag),
        })
        .collect();
    let scrape = |engine: usize, waiting: f64| Input::Scraped {
        engine,
        scrape: Scrape {
            alive: true,
            metrics: Some(EngineMetrics {
                waiting: Some(waiting),
                ..EngineMetrics::default()
            }),
            slots: None,
        },
    };
    // Tenants as the gateway numbers them: `default`, `other`, then the file's.
    let tenant = |t: Option<&str>| usize::from(t.is_some()) * 2;
    let rules = Rules {
        fairness: Fairness {
            tenant_limits: vec![None, None, Some(2)],
            ..Fairness::with_eviction(Eviction::One)
        },
        classes: SCRIPT.iter().map(|s| s.2).collect(),
        tenants: SCRIPT.iter().map(|s| tenant(s.1)).collect(),
        max_waiting: Some(2),
        outside: vec![
            (0.0, scrape(0, 1.0)),
            (0.0, scrape(1, 0.0)),
            (0.5, scrape(0, 0.0)),
        ],
        ..Rules::default()
    };
    let cfg = EngineConfig {
        max_num_seqs: 1,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    };
    let cluster = Cluster {
        instances: 2,
        router: Router::LeastOutstanding,
        placement: Placement::WhenFree,
    };
    let runs = Runs {
        cfg: &cfg,
        cluster,
        history: 0,
        warm: &[],
    };
    let run = (runs.simulate(policy("fcfs"), &rules, &requests)).expect("run");
    (run.decided.iter())
        .map(|(i, d)| {
            let decided = match d {
                Ok(e) => ["A", "B"][*e].to_string(),
                Err(reason) => reason.name().to_string(),
            };
            (SCRIPT[*i].0.to_string(), decided)
        })
        .collect()
}

/// [`SCRIPT_DECIDED`] as a map.
pub fn script_decided() -> std::collections::BTreeMap<String, String> {
    (SCRIPT_DECIDED.iter())
        .map(|(t, d)| (t.to_string(), d.to_string()))
        .collect()
}
