//! Figures every experiment can write (`--plot DIR`): lines (a measure against a swept
//! parameter, one line per policy), points (one marker per run, a trade-off between two
//! measures) and distributions (a CDF per policy). SVG, with text laid
//! out by plotters' built-in size estimate, so no font file is looked up or shipped.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// Why a figure could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing {path}: {message}")]
pub struct PlotError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// One named curve.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend entry (a policy, a mode).
    pub name: String,
    /// Lines: (x, y) points in order; CDFs: the samples, any order.
    pub values: Vec<(f64, f64)>,
}

/// What a figure draws.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// Each series' points joined, on linear axes.
    Lines,
    /// Each series' points as markers, unjoined; y linear from zero, x linear from zero or
    /// logarithmic when `log_x` (for measures that span orders of magnitude).
    Points {
        /// A logarithmic x axis.
        log_x: bool,
    },
    /// Each series' distribution of x values (the y of each point is ignored), the fraction
    /// of samples at or below x, on a log x axis when `log_x`.
    Cdf {
        /// A logarithmic x axis.
        log_x: bool,
    },
}

/// A figure to write as `<file>.svg`.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The file name without extension.
    pub file: String,
    /// The caption.
    pub title: String,
    /// The axes' labels.
    pub axes: (String, String),
    /// Lines or a CDF.
    pub kind: Kind,
    /// The curves.
    pub series: Vec<Series>,
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

/// Every value a nanosecond histogram recorded, divided by `per` (1e6: milliseconds), each as
/// often as it was recorded: the samples of a CDF.
pub fn samples(h: &hdrhistogram::Histogram<u64>, per: f64) -> Vec<f64> {
    h.iter_recorded()
        .flat_map(|v| {
            let x = v.value_iterated_to() as f64 / per;
            std::iter::repeat_n(x, v.count_at_value() as usize)
        })
        .collect()
}

/// A figure's size in pixels.
const SIZE: (u32, u32) = (900, 560);

/// Points per CDF curve at most (every k-th sorted sample, and the last).
const CDF_POINTS: usize = 400;

impl Figure {
    /// Write the figure into `dir` (created if missing); the file written.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, PlotError> {
        let path = dir.join(format!("{}.svg", self.file));
        let err = |message: String| PlotError {
            path: path.clone(),
            message,
        };
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        self.render(SVGBackend::new(&path, SIZE)).map_err(err)?;
        Ok(path)
    }

    /// The figure as SVG text (to inline in a page).
    pub fn svg(&self) -> Result<String, String> {
        let mut text = String::new();
        self.render(SVGBackend::with_string(&mut text, SIZE))?;
        Ok(text)
    }

    fn render(&self, backend: SVGBackend<'_>) -> Result<(), String> {
        let curves = self.curves();
        let (x0, x1, y1) = curves
            .iter()
            .flat_map(|(_, c)| c)
            .fold((f64::MAX, f64::MIN, 0.0f64), |(lo, hi, top), &(x, y)| {
                (lo.min(x), hi.max(x), top.max(y))
            });
        if x0 > x1 {
            return Err("nothing to plot".into());
        }
        let root = backend.into_drawing_area();
        let axes = (self.axes.0.as_str(), self.axes.1.as_str());
        // Lines from zero to just above the highest point; a CDF from 0 to 1.
        let (y, legend) = match self.kind {
            Kind::Lines => (0.0..(y1 * 1.05).max(1e-9), SeriesLabelPosition::UpperLeft),
            Kind::Points { .. } => (0.0..(y1 * 1.05).max(1e-9), SeriesLabelPosition::LowerRight),
            Kind::Cdf { .. } => (0.0..1.0, SeriesLabelPosition::LowerRight),
        };
        let markers = matches!(self.kind, Kind::Points { .. });
        // Markers on the axis' edge would be cut in half: points get room on both sides.
        let (x0, x1) = match self.kind {
            Kind::Points { log_x: true } => (x0.max(1e-9) / 1.2, x1.max(1e-9) * 1.2),
            Kind::Points { log_x: false } => (x0.min(0.0), x1 + 0.05 * (x1 - x0.min(0.0))),
            _ => (x0, x1),
        };
        let chart = Chart {
            root: &root,
            title: &self.title,
            axes,
            curves: &curves,
            legend,
            markers,
        };
        let drawn = if let Kind::Cdf { log_x: true } | Kind::Points { log_x: true } = self.kind {
            draw(
                chart,
                (x0.max(1e-9)..x1.max(x0 * 1.01 + 1e-9)).log_scale(),
                y,
            )
        } else {
            draw(chart, x0..x1.max(x0 + 1e-9), y)
        };
        drawn.and_then(|()| root.present().map_err(|e| e.to_string()))
    }

    /// Each series as the points to draw.
    fn curves(&self) -> Vec<(&str, Vec<(f64, f64)>)> {
        self.series
            .iter()
            .map(|s| {
                let points = match self.kind {
                    Kind::Lines => s.values.clone(),
                    Kind::Points { log_x } => s
                        .values
                        .iter()
                        .copied()
                        .filter(|(x, y)| x.is_finite() && y.is_finite() && (!log_x || *x > 0.0))
                        .collect(),
                    Kind::Cdf { log_x } => {
                        let mut xs: Vec<f64> = s
                            .values
                            .iter()
                            .map(|&(x, _)| x)
                            .filter(|x| x.is_finite() && (!log_x || *x > 0.0))
                            .collect();
                        xs.sort_by(f64::total_cmp);
                        let n = xs.len().max(1) as f64;
                        let every = (xs.len() / CDF_POINTS).max(1);
                        xs.iter()
                            .enumerate()
                            .filter(|(i, _)| i % every == 0 || *i + 1 == xs.len())
                            .map(|(i, &x)| (x, (i + 1) as f64 / n))
                            .collect()
                    }
                };
                (s.name.as_str(), points)
            })
            .collect()
    }
}

/// What a chart shows, whatever its axes' scales.
struct Chart<'a, 'b> {
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &'a str,
    axes: (&'a str, &'a str),
    curves: &'a [(&'a str, Vec<(f64, f64)>)],
    legend: SeriesLabelPosition,
    /// Markers instead of lines.
    markers: bool,
}

/// The chart's area filled white, a titled chart over `x` × `y` with its axes labelled, one line
/// (or set of markers) per curve and a legend.
fn draw<X, Y>(
    Chart {
        root,
        title,
        axes: (x_desc, y_desc),
        curves,
        legend,
        markers,
    }: Chart<'_, '_>,
    x: X,
    y: Y,
) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|x| e(&x))?;
    for (k, (name, points)) in curves.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let drawn = if markers {
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 5, color.filled())))
        } else {
            chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
        };
        drawn
            .map_err(|x| e(&x))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(kind: Kind, series: Vec<Series>) -> Figure {
        Figure {
            file: "f".into(),
            title: "t".into(),
            axes: ("x".into(), "y".into()),
            kind,
            series,
        }
    }

    #[test]
    fn lines_and_cdfs_are_written_as_svg_with_their_legends() {
        let dir = tempfile::tempdir().expect("dir");
        let a = Series {
            name: "fcfs".into(),
            values: (1..50).map(|i| (f64::from(i), f64::from(i * i))).collect(),
        };
        for kind in [
            Kind::Lines,
            Kind::Points { log_x: true },
            Kind::Points { log_x: false },
            Kind::Cdf { log_x: true },
            Kind::Cdf { log_x: false },
        ] {
            let path = figure(kind, vec![a.clone()])
                .write(dir.path())
                .expect("written");
            let svg = std::fs::read_to_string(&path).expect("svg");
            assert!(svg.starts_with("<svg") && svg.contains("fcfs"), "{kind:?}");
        }
    }

    #[test]
    fn a_cdf_rises_to_one_over_its_sorted_samples() {
        let f = figure(
            Kind::Cdf { log_x: false },
            vec![Series {
                name: "s".into(),
                values: vec![(3.0, 0.0), (1.0, 0.0), (2.0, 0.0), (f64::NAN, 0.0)],
            }],
        );
        let c = f.curves();
        assert_eq!(c[0].1, vec![(1.0, 1.0 / 3.0), (2.0, 2.0 / 3.0), (3.0, 1.0)]);
    }

    #[test]
    fn nothing_to_plot_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let e = figure(Kind::Lines, Vec::new())
            .write(dir.path())
            .expect_err("empty");
        assert!(e.to_string().contains("f.svg"), "{e}");
    }
}
