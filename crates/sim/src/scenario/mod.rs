//! Scenarios: TOML files that name an experiment and its parameters, parsed strictly (unknown
//! fields, bad values and unsupported levels are errors naming file, line and field), run in
//! parallel across cores, and reported as rows plus checks against the paper's targets.

mod bandwidth;
mod build;
mod case_ai_pc;
mod case_harvest;
mod case_two_model;
mod fg_bg;
mod hummingbird;
mod multi_device;
mod overhead;
mod preempt;

use crate::place::Place;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::ops::Range;
use std::path::Path;
use thiserror::Error;
use toml::Spanned;
pub use xsched_report::{Check, Report};

/// A scenario that could not be read or is inconsistent.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// Malformed or inconsistent content.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong, naming the field.
        message: String,
    },
}

/// A parsed scenario, ready to run.
#[derive(Debug, Clone)]
pub enum Scenario {
    /// Foreground beside a saturating background.
    FgBg(fg_bg::FgBg),
    /// Preemption latency against command length.
    Preempt(preempt::Preempt),
    /// Bandwidth partition.
    Bandwidth(bandwidth::Bandwidth),
    /// Runtime overhead against threshold.
    Overhead(overhead::Overhead),
    /// A pipeline across two devices.
    MultiDevice(multi_device::MultiDevice),
    /// Harvesting an HP service's idle time (Hummingbird).
    Hummingbird(hummingbird::Hummingbird),
    /// XSched's AI-PC case study: video blur beside speech recognition on one NPU.
    CaseAiPc(Box<case_ai_pc::AiPc>),
    /// XSched's GPU-harvesting case study: a production service beside an opportunistic job.
    CaseHarvest(Box<case_harvest::Harvest>),
    /// XSched's two-model serving case study: a foreground and a background inference service.
    CaseTwoModel(Box<case_two_model::TwoModel>),
}

/// Every experiment kind.
pub const EXPERIMENTS: &[&str] = &[
    "fg-bg",
    "preempt-latency",
    "bandwidth",
    "overhead",
    "multi-device",
    "hummingbird",
    "case-ai-pc",
    "case-harvest",
    "case-two-model",
];

#[derive(Deserialize)]
struct Head {
    experiment: Spanned<String>,
}

/// Where a value sits in the file, for error messages.
pub(crate) type Span = Range<usize>;

/// An error at `span` in `src`, as a line and column.
pub(crate) fn at(file: &str, src: &str, span: Option<Span>, message: String) -> ScenarioError {
    let Place {
        line,
        column,
        message,
    } = Place::of(src, span, &message);
    ScenarioError::Invalid {
        file: file.to_string(),
        line,
        column,
        message,
    }
}

fn parse_as<T: DeserializeOwned>(file: &str, src: &str) -> Result<T, ScenarioError> {
    toml::from_str(src).map_err(|e| at(file, src, e.span(), e.message().to_string()))
}

impl Scenario {
    /// Read and check a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            file: file.clone(),
            source,
        })?;
        Scenario::parse(&file, &src)
    }

    /// Parse and check scenario text; `file` names it in errors.
    pub fn parse(file: &str, src: &str) -> Result<Scenario, ScenarioError> {
        let head: Head = toml::from_str::<HeadOnly>(src)
            .map(|h| h.0)
            .map_err(|e| at(file, src, e.span(), e.message().to_string()))?;
        let ctx = Ctx { file, src };
        let kind = head.experiment.get_ref().as_str();
        Ok(match kind {
            "fg-bg" => Scenario::FgBg(fg_bg::FgBg::check(parse_as(file, src)?, &ctx)?),
            "preempt-latency" => {
                Scenario::Preempt(preempt::Preempt::check(parse_as(file, src)?, &ctx)?)
            }
            "bandwidth" => {
                Scenario::Bandwidth(bandwidth::Bandwidth::check(parse_as(file, src)?, &ctx)?)
            }
            "overhead" => {
                Scenario::Overhead(overhead::Overhead::check(parse_as(file, src)?, &ctx)?)
            }
            "multi-device" => Scenario::MultiDevice(multi_device::MultiDevice::check(
                parse_as(file, src)?,
                &ctx,
            )?),
            "hummingbird" => {
                Scenario::Hummingbird(hummingbird::Hummingbird::check(parse_as(file, src)?, &ctx)?)
            }
            "case-ai-pc" => Scenario::CaseAiPc(Box::new(case_ai_pc::AiPc::check(
                parse_as(file, src)?,
                &ctx,
            )?)),
            "case-harvest" => Scenario::CaseHarvest(Box::new(case_harvest::Harvest::check(
                parse_as(file, src)?,
                &ctx,
            )?)),
            "case-two-model" => Scenario::CaseTwoModel(Box::new(case_two_model::TwoModel::check(
                parse_as(file, src)?,
                &ctx,
            )?)),
            other => {
                return Err(at(
                    file,
                    src,
                    Some(head.experiment.span()),
                    format!(
                        "field `experiment`: unknown experiment `{other}`; known: {}",
                        EXPERIMENTS.join(", ")
                    ),
                ));
            }
        })
    }

    /// The built-in demo: fg-bg on one device, a few hundred requests.
    pub fn demo(device: &str) -> Result<Scenario, ScenarioError> {
        let src = format!("experiment = \"fg-bg\"\ndevices = [\"{device}\"]\nrequests = 400\n");
        Scenario::parse("<demo>", &src)
    }

    /// Run it, calling `tick(done, total)` as units of work finish (from any thread).
    pub fn run(&self, tick: &(dyn Fn(usize, usize) + Sync)) -> Report {
        self.run_with_figures(tick).0
    }

    /// Run it, with the figures the experiment draws (`xsched sim FILE --plot DIR`; none for
    /// most experiments).
    pub fn run_with_figures(
        &self,
        tick: &(dyn Fn(usize, usize) + Sync),
    ) -> (Report, Vec<xsched_report::plot::Figure>) {
        let report = match self {
            Scenario::CaseAiPc(s) => return s.run(tick),
            Scenario::CaseHarvest(s) => return s.run(tick),
            Scenario::CaseTwoModel(s) => return s.run(tick),
            Scenario::FgBg(s) => s.run(tick),
            Scenario::Preempt(s) => s.run(tick),
            Scenario::Bandwidth(s) => s.run(tick),
            Scenario::Overhead(s) => s.run(tick),
            Scenario::MultiDevice(s) => s.run(tick),
            Scenario::Hummingbird(s) => s.run(tick),
        };
        (report, Vec::new())
    }
}

/// Reads only `experiment`, ignoring other fields (each experiment checks its own).
struct HeadOnly(Head);

impl<'de> Deserialize<'de> for HeadOnly {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Loose {
            experiment: Option<Spanned<String>>,
        }
        let loose = Loose::deserialize(d)?;
        match loose.experiment {
            Some(experiment) => Ok(HeadOnly(Head { experiment })),
            None => Err(serde::de::Error::custom(format!(
                "missing field `experiment`; one of: {}",
                EXPERIMENTS.join(", ")
            ))),
        }
    }
}

/// The file being checked, for errors at a span.
pub(crate) struct Ctx<'a> {
    pub file: &'a str,
    pub src: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn err(&self, span: Span, message: String) -> ScenarioError {
        at(self.file, self.src, Some(span), message)
    }
}
