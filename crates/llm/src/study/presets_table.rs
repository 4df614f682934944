//! `xsched llm presets`: every engine preset's numbers as a table, each with where it comes
//! from.

use serde_json::json;
use xsched_llm_sim::engine::EngineConfig;
use xsched_llm_sim::presets;
use xsched_report::{Report, columns, round3};

/// `xsched llm presets`: every engine preset's numbers, each with where it comes from.
pub fn presets_report() -> Report {
    let rows = EngineConfig::PRESETS
        .iter()
        .flat_map(|name| {
            presets::provenance(name).into_iter().map(move |f| {
                xsched_report::cells(&[
                    ("preset", json!(presets::describe(name))),
                    ("parameter", json!(f.what)),
                    ("value", json!(round3(f.value))),
                    ("source", json!(f.source.name())),
                    ("how", json!(f.how)),
                ])
            })
        })
        .collect();
    Report::new(
        "llm engine presets (vLLM server defaults; step time beta0 + beta1 prefill + beta2 decode + beta3 attended, us)",
        columns(&["preset", "parameter", "value", "source", "how"]),
        rows,
    )
}
