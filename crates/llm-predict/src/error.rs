//! Why MiniLM or its tokenizer could not be loaded or run, or the embedding cache opened: the
//! one error of this crate.

use std::path::PathBuf;

/// Why MiniLM or its tokenizer could not be loaded or run, or the embedding cache opened.
#[derive(Debug, thiserror::Error)]
pub enum PredictError {
    /// A model file is missing or unreadable.
    #[error("{}", path.display())]
    Files {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// MiniLM's `config.json` is not a model configuration.
    #[error("{}", path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: serde_json::Error,
    },
    /// The tokenizer file could not be loaded or set up (the `tokenizers` crate's error).
    #[cfg(feature = "minilm")]
    #[error("{}", path.display())]
    Tokenizer {
        /// The file (`tokenizer.json`).
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: tokenizers::Error,
    },
    /// The model could not be built from its files.
    #[cfg(feature = "minilm")]
    #[error("loading MiniLM")]
    Model(#[source] candle_core::Error),
    /// A prompt could not be run through the model.
    #[cfg(feature = "minilm")]
    #[error("running MiniLM")]
    Prompt(#[source] candle_core::Error),
    /// The tokenizer failed on the input.
    #[cfg(feature = "minilm")]
    #[error("tokenizing")]
    Tokenize(#[source] tokenizers::Error),
    /// This build has no MiniLM.
    #[error(
        "this xsched was built without MiniLM; build it with `--features minilm` (cargo build --release --features minilm)"
    )]
    EmbedNotBuilt,
    /// This build has no tokenizer.
    #[error(
        "counting ShareGPT's tokens needs the MiniLM tokenizer, and this xsched was built without it; build it with `--features minilm` (cargo build --release --features minilm)"
    )]
    TokenizerNotBuilt,
    /// The embedding cache's folder or file could not be opened.
    #[error("embedding cache {}", path.display())]
    Cache {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}
