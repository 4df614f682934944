//! Where an engine preset's numbers come from, one line each ([`Fact`]): what `xsched llm
//! presets` prints, for the presets derived from GPUs' data sheets (`presets.rs`) and those
//! measured here (`measured.rs`) alike.

/// Where a number comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Published (a paper's fit, a vendor's data sheet, vLLM's code).
    Published,
    /// Computed from published numbers by a stated formula.
    Derived,
    /// A judgement, or a formula fitted on other presets.
    Estimated,
    /// Fitted from timings of the real engine here (`measured.rs`).
    Measured,
}

impl Provenance {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Provenance::Published => "published",
            Provenance::Derived => "derived",
            Provenance::Estimated => "estimated",
            Provenance::Measured => "measured",
        }
    }
}

/// One line of a preset's provenance: what, its value, where it comes from and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Fact {
    /// The parameter.
    pub what: &'static str,
    /// Its value.
    pub value: f64,
    /// Published, derived, estimated or measured.
    pub source: Provenance,
    /// From what.
    pub how: String,
}
