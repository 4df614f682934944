//! The `xsched llm` studies as library calls: which files a dataset or an arrival trace means,
//! which embedding serves the predictor, the policy sweep with the targets, and the
//! predictor's own evaluation. The binary only parses arguments into a [`Study`].

mod contract;
mod eval;
mod inputs;
mod presets_table;
mod sweep;

pub use contract::{Arrivals, Dataset, EmbeddingKind, Study};
pub use eval::predict_eval;
pub use presets_table::presets_report;
pub use sweep::sweep;
