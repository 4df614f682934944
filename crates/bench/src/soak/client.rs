//! A soak client's body (`xsched worker --role soak`): paced host commands, each counting its
//! own runs, so that the client can say at the end how many ran exactly once, more, or never.

use crate::error::BenchError;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};
use xsched_backend_cpu::{CpuCommand, CpuQueue};
use xsched_runtime::XQueue;

/// `xsched worker --role soak`: `commands` host commands with at most `window` outstanding, at
/// `rate` per second (0: unpaced), each counting its runs; how many ran once, more, never.
pub fn client(
    queue: &XQueue<CpuQueue>,
    commands: u32,
    window: usize,
    rate: u32,
) -> Result<Value, BenchError> {
    let start = Instant::now();
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..commands).map(|_| AtomicU8::new(0)).collect());
    let mut outstanding = VecDeque::new();
    let mut failed = 0u64;
    let mut settle = |h: xsched_runtime::CommandHandle| {
        if h.wait().is_err() {
            failed += 1;
        }
    };
    for i in 0..commands as usize {
        if rate > 0 && i % 64 == 0 {
            let due = start + Duration::from_secs_f64(i as f64 / f64::from(rate));
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        let runs = runs.clone();
        outstanding.push_back(queue.submit(CpuCommand::host(move || {
            runs[i].fetch_add(1, Ordering::SeqCst);
        }))?);
        if outstanding.len() > window.max(1)
            && let Some(h) = outstanding.pop_front()
        {
            settle(h);
        }
    }
    for h in outstanding {
        settle(h);
    }
    let count =
        |f: &dyn Fn(u8) -> bool| runs.iter().filter(|r| f(r.load(Ordering::SeqCst))).count();
    Ok(json!({
        "commands": commands,
        "exactly_once": count(&|n| n == 1),
        "more_than_once": count(&|n| n > 1),
        "never": count(&|n| n == 0),
        "failed": failed,
    }))
}
