//! The sweep's figures (`xsched llm --plot DIR`): mean TTLT against load per policy, and the
//! TTLT distribution (CDF) of every policy at one load, drawn by `xsched_report::plot`.

use crate::experiment::Point;
use xsched_report::plot::{Figure, Kind, Series};

fn policies(points: &[Point]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        if !names.contains(&p.policy.as_str()) {
            names.push(&p.policy);
        }
    }
    names
}

/// Mean TTLT (s) against load, one line per policy (`ttlt-vs-load.svg`).
pub fn ttlt_against_load(points: &[Point], title: &str) -> Figure {
    Figure {
        file: "ttlt-vs-load".into(),
        title: title.into(),
        axes: (
            "load (offered / measured saturated throughput)".into(),
            "mean TTLT (s)".into(),
        ),
        kind: Kind::Lines,
        series: policies(points)
            .into_iter()
            .map(|name| Series {
                name: name.into(),
                values: points
                    .iter()
                    .filter(|p| p.policy == name)
                    .map(|p| (p.load, p.ttlt_mean_ms / 1e3))
                    .collect(),
            })
            .collect(),
    }
}

/// The CDF of TTLT (s, log scale) of every policy at `load` (`ttlt-cdf.svg`).
pub fn ttlt_cdf(points: &[Point], load: f64, title: &str) -> Figure {
    Figure {
        file: "ttlt-cdf".into(),
        title: title.into(),
        axes: ("TTLT (s, log scale)".into(), "fraction of requests".into()),
        kind: Kind::Cdf { log_x: true },
        series: points
            .iter()
            .filter(|p| p.load == load)
            .map(|p| Series {
                name: p.policy.clone(),
                values: p.ttlts.iter().map(|t| (t.max(0.1), 0.0)).collect(),
            })
            .collect(),
    }
}
