//! What the XQueue test files share: an application-scheduled runtime, a spin kernel command,
//! and waiting for a condition (with a generous limit, never a timing claim).
#![allow(dead_code)] // each test binary uses its own part

use std::sync::Arc;
use std::time::{Duration, Instant};
use xsched_backend_cpu::CpuCommand;
use xsched_backend_cpu::kernels::Spin;
use xsched_runtime::{Runtime, RuntimeConfig, WhoSchedules};

/// A runtime whose queues only the application suspends and resumes.
pub fn app_runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// A kernel spinning for `us` microseconds.
pub fn spin(us: u64) -> CpuCommand {
    CpuCommand::Kernel(Arc::new(Spin::new(Duration::from_micros(us))))
}

/// Wait until `ok` holds, failing after 30 s.
pub fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}
