//! How a figure is drawn: plotters lays out the frame (title, axes, grid) and says where each
//! point falls, and the data layer (the curves and the legend right of the plot) is written
//! here as plain SVG elements, so that a reader can find each part by its class.

use crate::ReportError;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::fmt::Write as _;

/// A figure's size in pixels.
pub(super) const SIZE: (u32, u32) = (900, 560);

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

/// The legend's text size (px), the height of one entry, the padding inside its box and the
/// gap between the plot and the box.
const LEGEND_FONT: u32 = 13;
const LEGEND_ROW: i32 = 18;
const LEGEND_PAD: i32 = 8;
pub(super) const LEGEND_GAP: i32 = 12;
/// The legend's sample (a line, or a marker for points) and the gap before its name.
const SWATCH: i32 = 16;
const SWATCH_GAP: i32 = 6;

/// The legend's entries and the width its box needs.
pub(super) struct Legend<'a> {
    names: Vec<&'a str>,
    /// Markers instead of lines.
    markers: bool,
    /// The box's width (px).
    pub(super) width: i32,
}

impl<'a> Legend<'a> {
    /// Sized for the longest name (plotters' text estimate, plus a tenth: a browser's sans-serif
    /// runs wider), at most a third of the figure.
    pub(super) fn sized(
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        names: &[&'a str],
        markers: bool,
    ) -> Result<Legend<'a>, ReportError> {
        let font = ("sans-serif", LEGEND_FONT).into_font();
        let mut text = 0;
        for name in names {
            let (w, _) = root.estimate_text_size(name, &font.clone().into())?;
            text = text.max(i32::try_from(w + w / 10).unwrap_or(i32::MAX));
        }
        let width = (2 * LEGEND_PAD + SWATCH + SWATCH_GAP).saturating_add(text);
        let most = i32::try_from(SIZE.0 / 3).unwrap_or(i32::MAX);
        Ok(Legend {
            names: names.to_vec(),
            markers,
            width: width.min(most),
        })
    }
}

/// What a chart shows, whatever its axes' scales.
pub(super) struct Chart<'a, 'b> {
    pub(super) root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    pub(super) title: &'a str,
    pub(super) axes: (&'a str, &'a str),
    pub(super) curves: &'a [(&'a str, Vec<(f64, f64)>)],
    /// Pixels kept free right of the plot (for the legend).
    pub(super) room_right: i32,
}

/// Where a chart's data fell, in the figure's pixels.
pub(super) struct Drawn {
    /// Each curve's points, in order.
    curves: Vec<Vec<(i32, i32)>>,
    /// The plot's right edge and top.
    right: i32,
    top: i32,
}

/// The chart's area filled white and a titled chart over `x` × `y` with its axes labelled;
/// the curves' points mapped to pixels for [`data_layer`].
pub(super) fn draw<X, Y>(
    Chart {
        root,
        title,
        axes: (x_desc, y_desc),
        curves,
        room_right,
    }: Chart<'_, '_>,
    x: X,
    y: Y,
) -> Result<Drawn, ReportError>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .margin_right(12 + room_right)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    Ok(Drawn {
        curves: curves
            .iter()
            .map(|(_, points)| points.iter().map(|p| chart.backend_coord(p)).collect())
            .collect(),
        right: xs.end,
        top: ys.start,
    })
}

/// The curves (lines or markers) and, right of the plot, the legend, as SVG elements.
pub(super) fn data_layer(drawn: &Drawn, legend: &Legend<'_>) -> String {
    let mut svg = String::from("<g class=\"curves\">\n");
    for (k, (points, name)) in drawn.curves.iter().zip(&legend.names).enumerate() {
        let (colour, name) = (hex(k), crate::escape::escape(name));
        if legend.markers {
            let _ = writeln!(
                svg,
                "<g class=\"curve\" data-series=\"{name}\" fill=\"{colour}\">"
            );
            for (x, y) in points {
                let _ = writeln!(
                    svg,
                    "<circle class=\"point\" cx=\"{x}\" cy=\"{y}\" r=\"5\"/>"
                );
            }
            svg.push_str("</g>\n");
        } else {
            let at: Vec<String> = points.iter().map(|(x, y)| format!("{x},{y}")).collect();
            let _ = writeln!(
                svg,
                "<polyline class=\"curve\" data-series=\"{name}\" fill=\"none\" \
                 stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
                at.join(" ")
            );
        }
    }
    svg.push_str("</g>\n<g class=\"legend\">\n");
    let (x, y) = (drawn.right + LEGEND_GAP, drawn.top);
    let rows = i32::try_from(legend.names.len()).unwrap_or(i32::MAX);
    let _ = writeln!(
        svg,
        "<rect class=\"legend-box\" x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{}\" \
         fill=\"#FFFFFF\" stroke=\"#000000\"/>",
        legend.width,
        2 * LEGEND_PAD + LEGEND_ROW.saturating_mul(rows)
    );
    for (k, name) in legend.names.iter().enumerate() {
        let row = i32::try_from(k).unwrap_or(i32::MAX);
        let mid = y + LEGEND_PAD + LEGEND_ROW.saturating_mul(row) + LEGEND_ROW / 2;
        let (sx, colour) = (x + LEGEND_PAD, hex(k));
        let _ = if legend.markers {
            writeln!(
                svg,
                "<circle cx=\"{}\" cy=\"{mid}\" r=\"5\" fill=\"{colour}\"/>",
                sx + SWATCH / 2
            )
        } else {
            writeln!(
                svg,
                "<line x1=\"{sx}\" y1=\"{mid}\" x2=\"{}\" y2=\"{mid}\" stroke=\"{colour}\" \
                 stroke-width=\"2\"/>",
                sx + SWATCH
            )
        };
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{mid}\" dy=\"0.35em\" font-family=\"sans-serif\" \
             font-size=\"{LEGEND_FONT}\">{}</text>",
            sx + SWATCH + SWATCH_GAP,
            crate::escape::escape(name)
        );
    }
    svg.push_str("</g>\n");
    svg
}

/// The `k`-th series' colour as `#RRGGBB`.
fn hex(k: usize) -> String {
    let RGBColor(r, g, b) = COLORS[k % COLORS.len()];
    format!("#{r:02X}{g:02X}{b:02X}")
}
