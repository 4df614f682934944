//! Why a figure could not be drawn (nothing to plot, plotters failed) or written (the file and
//! what went wrong).

use std::path::PathBuf;

/// Why a figure could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing {path}: {message}")]
pub struct PlotError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// Why a figure could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum DrawError {
    /// No series has a point to draw.
    #[error("nothing to plot")]
    Empty,
    /// plotters could not lay out or draw the figure.
    #[error(transparent)]
    Plotters(#[from] plotters::drawing::DrawingAreaErrorKind<std::io::Error>),
    /// The SVG plotters wrote has no closing tag to put the data layer before.
    #[error("plotters wrote no closing </svg>")]
    Unclosed,
}
