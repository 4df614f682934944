//! Scenarios: TOML files that name an experiment and its parameters, parsed strictly (unknown
//! fields, bad values and unsupported levels are errors naming file, line and field), run in
//! parallel across cores, and reported as rows plus checks against the paper's targets.

mod bandwidth;
mod build;
mod case_ai_pc;
mod case_harvest;
mod case_two_model;
pub mod expect;
mod fg_bg;
mod hummingbird;
mod multi_device;
mod overhead;
mod preempt;

pub use crate::error::ScenarioError;
use crate::place::Place;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;
use toml::de::{DeTable, Deserializer};
pub use xsched_report::{Check, Report};

/// A parsed scenario, ready to run: its experiment, and the misses its file expects.
#[derive(Debug, Clone)]
pub struct Scenario {
    experiment: Experiment,
    known_misses: Vec<expect::KnownMiss>,
}

/// The experiment a scenario runs.
#[derive(Debug, Clone)]
enum Experiment {
    /// Foreground beside a saturating background.
    FgBg(fg_bg::FgBg),
    /// Preemption latency against command length.
    Preempt(preempt::Preempt),
    /// Bandwidth partition.
    Bandwidth(bandwidth::BandwidthScenario),
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

/// The fields every scenario file has, whatever its experiment. Each experiment's own struct
/// holds only the rest: the header is taken out of the file before the body is read.
#[derive(Debug, Deserialize)]
pub(crate) struct Header {
    /// Which experiment (one of `EXPERIMENTS`).
    pub experiment: Spanned<String>,
    /// Seed of every random choice in the run.
    #[serde(default = "build::default_seed")]
    pub seed: u64,
    /// The checks the docs say this scenario misses, each with its reason.
    #[serde(default)]
    pub known_miss: Vec<expect::KnownMiss>,
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

/// The fields serde's derive gives `T`: the names it passes to `deserialize_struct`, which its
/// "unknown field" error lists (all of them, whatever their number).
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::value::Error;
    use std::cell::Cell;

    /// Answers only `deserialize_struct`, noting the fields asked for.
    struct Probe<'a>(&'a Cell<&'static [&'static str]>);

    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = Error;

        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(serde::de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Error> {
            self.0.set(fields);
            Err(serde::de::Error::custom("only the fields were asked for"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let fields = Cell::new(&[][..]);
    let _ = T::deserialize(Probe(&fields));
    fields.get()
}

/// An experiment's own fields, from the file without its header (`doc`).
fn body<T: DeserializeOwned>(ctx: &Ctx, doc: Spanned<DeTable<'_>>) -> Result<T, ScenarioError> {
    let own = fields_of::<T>();
    // The keys that are neither the header's (taken out already) nor the experiment's.
    let unknown: Vec<(String, Span)> = doc
        .get_ref()
        .keys()
        .filter(|k| !own.contains(&&**k.get_ref()))
        .map(|k| (k.get_ref().to_string(), k.span()))
        .collect();
    T::deserialize(Deserializer::from(doc)).map_err(|e| {
        // An unknown field's error lists what the file may hold: the header's fields too, which
        // serde does not know of here. Every experiment's list is written the same way, as serde
        // writes one of three or more (it words shorter ones differently).
        let message = match unknown
            .iter()
            .find(|(_, span)| Some(span) == e.span().as_ref())
        {
            Some((key, _)) => {
                let expected: Vec<String> = fields_of::<Header>()
                    .iter()
                    .chain(own)
                    .map(|f| format!("`{f}`"))
                    .collect();
                format!(
                    "unknown field `{key}`, expected one of {}",
                    expected.join(", ")
                )
            }
            None => e.message().to_string(),
        };
        at(ctx.file, ctx.src, e.span(), message)
    })
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
        let invalid = |e: toml::de::Error| at(file, src, e.span(), e.message().to_string());
        let mut doc = DeTable::parse(src).map_err(invalid)?;
        let mut head = DeTable::new();
        for &key in fields_of::<Header>() {
            if let Some((k, v)) = doc.get_mut().remove_entry(key) {
                head.insert(k, v);
            }
        }
        if !head.contains_key("experiment") {
            return Err(at(
                file,
                src,
                None,
                format!(
                    "missing field `experiment`; one of: {}",
                    EXPERIMENTS.join(", ")
                ),
            ));
        }
        let header = Header::deserialize(Deserializer::from(Spanned::new(doc.span(), head)))
            .map_err(invalid)?;
        let ctx = Ctx { file, src, header };
        let kind = ctx.header.experiment.get_ref().as_str();
        let experiment = match kind {
            "fg-bg" => Experiment::FgBg(fg_bg::FgBg::check(body(&ctx, doc)?, &ctx)?),
            "preempt-latency" => {
                Experiment::Preempt(preempt::Preempt::check(body(&ctx, doc)?, &ctx)?)
            }
            "bandwidth" => {
                Experiment::Bandwidth(bandwidth::BandwidthScenario::check(body(&ctx, doc)?, &ctx)?)
            }
            "overhead" => Experiment::Overhead(overhead::Overhead::check(body(&ctx, doc)?, &ctx)?),
            "multi-device" => {
                Experiment::MultiDevice(multi_device::MultiDevice::check(body(&ctx, doc)?, &ctx)?)
            }
            "hummingbird" => {
                Experiment::Hummingbird(hummingbird::Hummingbird::check(body(&ctx, doc)?, &ctx)?)
            }
            "case-ai-pc" => {
                Experiment::CaseAiPc(Box::new(case_ai_pc::AiPc::check(body(&ctx, doc)?, &ctx)?))
            }
            "case-harvest" => Experiment::CaseHarvest(Box::new(case_harvest::Harvest::check(
                body(&ctx, doc)?,
                &ctx,
            )?)),
            "case-two-model" => Experiment::CaseTwoModel(Box::new(
                case_two_model::TwoModel::check(body(&ctx, doc)?, &ctx)?,
            )),
            other => {
                return Err(ctx.err(
                    ctx.header.experiment.span(),
                    format!(
                        "field `experiment`: unknown experiment `{other}`; known: {}",
                        EXPERIMENTS.join(", ")
                    ),
                ));
            }
        };
        Ok(Scenario {
            experiment,
            known_misses: ctx.header.known_miss,
        })
    }

    /// The misses the file lists as known, each with its reason.
    pub fn known_misses(&self) -> &[expect::KnownMiss] {
        &self.known_misses
    }

    /// Where `report` (this scenario's run) departs from what the file expects: misses it does
    /// not list, listed misses that were met or name no check ([`expect::surprises`]).
    pub fn surprises(&self, report: &Report) -> expect::Surprises {
        expect::surprises(report, &self.known_misses)
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
        let report = match &self.experiment {
            Experiment::CaseAiPc(s) => return s.run(tick),
            Experiment::CaseHarvest(s) => return s.run(tick),
            Experiment::CaseTwoModel(s) => return s.run(tick),
            Experiment::FgBg(s) => s.run(tick),
            Experiment::Preempt(s) => s.run(tick),
            Experiment::Bandwidth(s) => s.run(tick),
            Experiment::Overhead(s) => s.run(tick),
            Experiment::MultiDevice(s) => s.run(tick),
            Experiment::Hummingbird(s) => s.run(tick),
        };
        (report, Vec::new())
    }
}

/// The file being checked: its name and text, for errors at a span, and its header.
pub(crate) struct Ctx<'a> {
    pub file: &'a str,
    pub src: &'a str,
    pub header: Header,
}

impl Ctx<'_> {
    pub(crate) fn err(&self, span: Span, message: String) -> ScenarioError {
        at(self.file, self.src, Some(span), message)
    }
}
