//! The MiniLM model files found and loaded: where they are (a flag's directory, else
//! `$XSCHED_MINILM_DIR`, the one rule of every command), its embedder and its WordPiece token
//! counter, built only with the `minilm` feature (candle and tokenizers are most of a cold
//! build, so the default build leaves them out); without it, an error that says how to build it.

use crate::PredictError;
use crate::embedding::Embedder;
use crate::tokenize::TokenCounter;
use std::path::{Path, PathBuf};

/// The MiniLM model directory: `explicit` (a flag's) if given, else `$XSCHED_MINILM_DIR`;
/// `None` when neither names one.
pub fn minilm_dir(explicit: Option<PathBuf>) -> Option<PathBuf> {
    explicit.or_else(|| std::env::var_os("XSCHED_MINILM_DIR").map(PathBuf::from))
}

/// all-MiniLM-L6-v2 from the model files in `dir`: built only with the `minilm` feature
/// (candle and tokenizers are most of a cold build, so the default build leaves them out);
/// without it, an error that says how to build it.
pub fn load_minilm(dir: &Path) -> Result<Box<dyn Embedder>, PredictError> {
    #[cfg(feature = "minilm")]
    {
        Ok(Box::new(crate::minilm::MiniLm::load(dir)?))
    }
    #[cfg(not(feature = "minilm"))]
    {
        let _ = dir;
        Err(PredictError::EmbedNotBuilt)
    }
}

/// The WordPiece tokenizer of the MiniLM model directory `dir` (its `tokenizer.json`).
pub fn load_wordpiece(dir: &Path) -> Result<Box<dyn TokenCounter>, PredictError> {
    #[cfg(feature = "minilm")]
    {
        Ok(Box::new(crate::minilm::WordPiece::load(dir)?))
    }
    #[cfg(not(feature = "minilm"))]
    {
        let _ = dir;
        Err(PredictError::TokenizerNotBuilt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_directory_is_a_clear_error() {
        let err = load_minilm(Path::new("/nonexistent/minilm"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let expected = if cfg!(feature = "minilm") {
            "config.json"
        } else {
            "--features minilm"
        };
        assert!(err.contains(expected), "{err}");
    }

    #[test]
    fn a_directory_given_is_the_one_used() {
        let dir = PathBuf::from("/models/minilm");
        assert_eq!(minilm_dir(Some(dir.clone())), Some(dir));
    }
}
