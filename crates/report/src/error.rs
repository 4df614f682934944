//! Why a report could not be made: a figure could not be drawn (nothing to plot, plotters
//! failed) or written (the file and what went wrong), or a run's record could not be read.

use std::path::PathBuf;

/// Why a figure could not be drawn or written, or a run's record read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No series has a point to draw.
    #[error("nothing to plot")]
    Empty,
    /// plotters could not lay out or draw the figure.
    #[error(transparent)]
    Plotters(#[from] plotters::drawing::DrawingAreaErrorKind<std::io::Error>),
    /// The SVG plotters wrote has no closing tag to put the data layer before.
    #[error("plotters wrote no closing </svg>")]
    Unclosed,
    /// The figure's directory or file could not be written.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The figure to write at `path` could not be drawn ([`Empty`](Self::Empty),
    /// [`Plotters`](Self::Plotters) or [`Unclosed`](Self::Unclosed)).
    #[error("writing {path}")]
    Draw {
        /// The file.
        path: PathBuf,
        /// Why it could not be drawn.
        #[source]
        source: Box<ReportError>,
    },
    /// A run's record is not valid JSON of its shape (the message names the line, the column
    /// and the field).
    #[error(transparent)]
    Record(#[from] serde_json::Error),
}
