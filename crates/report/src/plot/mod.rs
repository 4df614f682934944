//! Figures every experiment can write (`--plot DIR`): lines (a measure against a swept
//! parameter, one line per policy), points (one marker per run, a trade-off between two
//! measures) and distributions (a CDF per policy). SVG, with text laid
//! out by plotters' built-in size estimate, so no font file is looked up or shipped. The legend
//! sits right of the plot, never over it: a corner inside the plot is empty for some data and
//! covers the curves of other data (a CDF's upper left is where its fastest curves rise).

mod render;

use crate::ReportError;
use plotters::prelude::*;
use render::{Chart, LEGEND_GAP, Legend, SIZE, data_layer, draw};
use std::path::{Path, PathBuf};

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

/// Points per CDF curve at most (every k-th sorted sample, and the last).
const CDF_POINTS: usize = 400;

impl Figure {
    /// Write the figure into `dir` (created if missing); the file written.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        let path = dir.join(format!("{}.svg", self.file));
        let write = |source| ReportError::Write {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(write)?;
        let svg = self.svg().map_err(|e| ReportError::Draw {
            path: path.clone(),
            source: Box::new(e),
        })?;
        std::fs::write(&path, svg).map_err(write)?;
        Ok(path)
    }

    /// The figure as SVG text (to inline in a page or write to a file).
    ///
    /// plotters draws the frame (title, axes, grid); the data layer (the curves and the
    /// legend) is written here, so that a reader can find each part: every curve is a
    /// `polyline.curve` (or a `g.curve` of `circle.point` markers) named by `data-series`,
    /// and the legend is a `g.legend` framed by a `rect.legend-box`, right of the plot, where
    /// it can never hide a point.
    pub fn svg(&self) -> Result<String, ReportError> {
        let curves = self.curves();
        let (x0, x1, y1) = curves
            .iter()
            .flat_map(|(_, c)| c)
            .fold((f64::MAX, f64::MIN, 0.0f64), |(lo, hi, top), &(x, y)| {
                (lo.min(x), hi.max(x), top.max(y))
            });
        if x0 > x1 {
            return Err(ReportError::Empty);
        }
        // Lines from zero to just above the highest point; a CDF from 0 to 1.
        let y = match self.kind {
            Kind::Lines | Kind::Points { .. } => 0.0..(y1 * 1.05).max(1e-9),
            Kind::Cdf { .. } => 0.0..1.0,
        };
        let markers = matches!(self.kind, Kind::Points { .. });
        // Markers on the axis' edge would be cut in half: points get room on both sides.
        let (x0, x1) = match self.kind {
            Kind::Points { log_x: true } => (x0.max(1e-9) / 1.2, x1.max(1e-9) * 1.2),
            Kind::Points { log_x: false } => (x0.min(0.0), x1 + 0.05 * (x1 - x0.min(0.0))),
            _ => (x0, x1),
        };
        let mut text = String::new();
        let layer = {
            let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
            let names: Vec<&str> = curves.iter().map(|(name, _)| *name).collect();
            let legend = Legend::sized(&root, &names, markers)?;
            let chart = Chart {
                root: &root,
                title: &self.title,
                axes: (self.axes.0.as_str(), self.axes.1.as_str()),
                curves: &curves,
                room_right: legend.width + LEGEND_GAP,
            };
            let drawn = if let Kind::Cdf { log_x: true } | Kind::Points { log_x: true } = self.kind
            {
                draw(
                    chart,
                    (x0.max(1e-9)..x1.max(x0 * 1.01 + 1e-9)).log_scale(),
                    y,
                )
            } else {
                draw(chart, x0..x1.max(x0 + 1e-9), y)
            }?;
            root.present()?;
            data_layer(&drawn, &legend)
        };
        let end = text.rfind("</svg>").ok_or(ReportError::Unclosed)?;
        text.insert_str(end, &layer);
        Ok(text)
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

    /// The value of `attr` in each element of class `class` in `svg`.
    fn attr(svg: &str, class: &str, attr: &str) -> Vec<String> {
        svg.split('<')
            .filter(|e| e.contains(&format!("class=\"{class}\"")))
            .filter_map(|e| {
                let from = e.find(&format!(" {attr}=\""))? + attr.len() + 3;
                Some(e[from..from + e[from..].find('"')?].to_string())
            })
            .collect()
    }

    #[test]
    fn the_legend_is_right_of_every_point_of_every_curve() {
        let rising = |name: &str, scale: f64| Series {
            name: name.into(),
            values: (1..=100).map(|i| (scale * f64::from(i), 0.0)).collect(),
        };
        for kind in [
            Kind::Cdf { log_x: false },
            Kind::Points { log_x: true },
            Kind::Lines,
        ] {
            let svg = figure(kind, vec![rising("fast <a&b>", 1.0), rising("slow", 100.0)])
                .svg()
                .expect("drawn");
            let left: Vec<i32> = attr(&svg, "legend-box", "x")
                .iter()
                .map(|x| x.parse().expect("a number"))
                .collect();
            assert_eq!(left.len(), 1, "one legend box: {kind:?}");
            let xs: Vec<i32> = attr(&svg, "curve", "points")
                .iter()
                .flat_map(|p| {
                    p.split(' ')
                        .map(|xy| xy.split(',').next().unwrap_or("").to_string())
                })
                .chain(attr(&svg, "point", "cx"))
                .map(|x| x.parse().expect("a number"))
                .collect();
            assert!(xs.len() >= 100, "{kind:?}: {} points", xs.len());
            assert!(
                xs.iter().all(|&x| x < left[0]),
                "{kind:?}: a point under the legend"
            );
            assert!(
                svg.contains("data-series=\"fast &lt;a&amp;b&gt;\""),
                "names escaped"
            );
            assert!(
                svg.trim_end().ends_with("</svg>"),
                "the data inside the figure"
            );
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
