//! The sweep's plots (`xsched llm --plot DIR`): mean TTLT against load per policy, and the
//! TTLT distribution (CDF) of every policy at one load. SVG, with text laid out by plotters'
//! built-in size estimate, so no font file is looked up or shipped.

use crate::experiment::Point;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing {path}: {message}")]
pub struct PlotError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn policies(points: &[Point]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        if !names.contains(&p.policy.as_str()) {
            names.push(&p.policy);
        }
    }
    names
}

/// A chart drawn on an SVG.
type Chart<'a, 'b, X, Y> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        <X as plotters::coord::ranged1d::AsRangedCoord>::CoordDescType,
        <Y as plotters::coord::ranged1d::AsRangedCoord>::CoordDescType,
    >,
>;

/// `root` filled white, with a titled chart over `x` × `y`, its axes labelled.
fn chart<'a, 'b, X, Y>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    (x, y): (X, Y),
    (x_desc, y_desc): (&str, &str),
) -> Result<Chart<'a, 'b, X, Y>, String>
where
    X: plotters::coord::ranged1d::AsRangedCoord,
    Y: plotters::coord::ranged1d::AsRangedCoord,
    X::CoordDescType: plotters::coord::ranged1d::ValueFormatter<X::Value>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<Y::Value>,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(chart)
}

fn fail(path: &Path) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError {
        path: path.to_path_buf(),
        message,
    }
}

/// Mean TTLT (s) against load, one line per policy, into `path`.
pub fn ttlt_against_load(points: &[Point], title: &str, path: &Path) -> Result<(), PlotError> {
    let err = fail(path);
    let (lo, hi) = points.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.load), hi.max(p.load))
    });
    let top = points
        .iter()
        .map(|p| p.ttlt_mean_ms / 1e3)
        .fold(0.0, f64::max)
        * 1.05;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let mut chart = chart(
        &root,
        title,
        (lo..hi.max(lo + 1e-9), 0.0..top.max(1e-9)),
        (
            "load (offered / measured saturated throughput)",
            "mean TTLT (s)",
        ),
    )
    .map_err(&err)?;
    for (k, name) in policies(points).into_iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let line: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.policy == name)
            .map(|p| (p.load, p.ttlt_mean_ms / 1e3))
            .collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// The CDF of TTLT (s) of every policy at `load`, into `path`.
pub fn ttlt_cdf(points: &[Point], load: f64, title: &str, path: &Path) -> Result<(), PlotError> {
    let err = fail(path);
    let at: Vec<&Point> = points.iter().filter(|p| p.load == load).collect();
    let right = at
        .iter()
        .flat_map(|p| p.ttlts.last().copied())
        .fold(0.0, f64::max)
        .max(1e-9);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let mut chart = chart(
        &root,
        title,
        ((0.1f64..right).log_scale(), 0.0..1.0),
        ("TTLT (s, log scale)", "fraction of requests"),
    )
    .map_err(&err)?;
    for (k, p) in at.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let n = p.ttlts.len().max(1) as f64;
        // At most ~400 points per curve: every k-th sorted sample.
        let every = (p.ttlts.len() / 400).max(1);
        let line: Vec<(f64, f64)> = p
            .ttlts
            .iter()
            .enumerate()
            .filter(|(i, _)| i % every == 0 || *i + 1 == p.ttlts.len())
            .map(|(i, t)| (t.max(0.1), (i + 1) as f64 / n))
            .collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(p.policy.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}
