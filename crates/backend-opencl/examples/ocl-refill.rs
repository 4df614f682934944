//! What refilling on OpenCL's callback thread saves: a stream of short commands on
//! the first OpenCL device (POCL here), launched straight onto the queue ("direct"), through an
//! XQueue whose queue runs the completion hook ("hook"), and through one whose queue refuses it,
//! so its launcher thread refills at every synchronization point ("launcher", the path before
//! the hook). Per round the three run back to back, in a rotating order; per mode the median
//! round's throughput loss against that round's direct run and the context switches of the
//! process per command. One JSON line per mode:
//!
//! ```sh
//! cargo run --release -p xsched-backend-opencl --example ocl-refill -- \
//!     rounds=11 commands=500 length_us=100 threshold=8 batch=4
//! ```

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use xsched_backend_opencl::{OclCommand, OclQueue, SpinKernel};
use xsched_core::{Capabilities, CommandId, DeviceId, LaunchConfig};
use xsched_runtime::{
    CommandError, Completion, CompletionHook, CompletionSink, HwError, HwQueue, QueueOptions,
    Runtime, RuntimeConfig, WhoSchedules, XQueue,
};

fn arg(name: &str, default: u64) -> u64 {
    std::env::args()
        .skip(1)
        .find_map(|a| a.strip_prefix(&format!("{name}=")).map(str::to_string))
        .map_or(default, |v| v.parse().expect("a number"))
}

/// Context switches of this process so far, all threads (`getrusage(RUSAGE_SELF)`).
fn switches() -> u64 {
    // SAFETY: `usage` is a valid, writable rusage for the duration of the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0;
    if ok {
        u64::try_from(usage.ru_nvcsw + usage.ru_nivcsw).unwrap_or(0)
    } else {
        0
    }
}

/// An OpenCL queue that refuses the completion hook: its XQueue refills from the launcher.
struct Refusing(OclQueue);

impl HwQueue for Refusing {
    type Command = OclCommand;
    fn capabilities(&self) -> &Capabilities {
        self.0.capabilities()
    }
    fn device(&self) -> DeviceId {
        self.0.device()
    }
    fn launch(&self, cmd: OclCommand, done: Completion) {
        self.0.launch(cmd, done);
    }
    fn synchronize(&self) -> Result<(), HwError> {
        self.0.synchronize()
    }
    fn before_queue_lock(&self) {
        self.0.before_queue_lock();
    }
    fn set_completion_hook(&self, hook: CompletionHook) -> Result<(), HwError> {
        drop(hook);
        Err(HwError::NoCompletionHook)
    }
}

/// Counts direct completions and wakes the waiter only at the last one.
struct Counter {
    done: Mutex<u64>,
    cond: Condvar,
    of: u64,
}

impl CompletionSink for Counter {
    fn complete(&self, _: CommandId, _: bool, result: Result<(), CommandError>) {
        result.expect("the command ran");
        let mut d = self.done.lock().expect("counter");
        *d += 1;
        if *d >= self.of {
            self.cond.notify_all();
        }
    }
}

fn direct(kernel: &SpinKernel, hw: &OclQueue, n: u64, length: Duration) -> Duration {
    let counter = Arc::new(Counter {
        done: Mutex::new(0),
        cond: Condvar::new(),
        of: n,
    });
    let cmds: Vec<_> = (0..n)
        .map(|_| kernel.command(length).expect("command"))
        .collect();
    let t = Instant::now();
    for (i, cmd) in cmds.into_iter().enumerate() {
        hw.launch(
            cmd,
            Completion::new(counter.clone(), CommandId(i as u64), false),
        );
    }
    let mut d = counter.done.lock().expect("counter");
    while *d < n {
        d = counter.cond.wait(d).expect("counter");
    }
    t.elapsed()
}

fn through<H: HwQueue<Command = OclCommand>>(
    kernel: &SpinKernel,
    q: &XQueue<H>,
    n: u64,
    length: Duration,
) -> Duration {
    let cmds: Vec<_> = (0..n)
        .map(|_| kernel.command(length).expect("command"))
        .collect();
    let t = Instant::now();
    for cmd in cmds {
        q.submit(cmd).expect("submit");
    }
    q.wait_all().expect("every command ran");
    t.elapsed()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (rounds, n, length_us) = (
        arg("rounds", 11),
        arg("commands", 500),
        arg("length_us", 100),
    );
    let (threshold, batch) = (arg("threshold", 8), arg("batch", 4));
    let length = Duration::from_micros(length_us);
    let mut kernel = SpinKernel::first_device().expect("an OpenCL device");
    kernel.calibrate().expect("calibrate");
    let rt = Runtime::new(RuntimeConfig {
        scheduler: WhoSchedules::App,
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let config = LaunchConfig::new(threshold as u32, batch as u32)
        .expect("config")
        .with_inflight_budget(None);
    let options = QueueOptions::default().with_config(config);
    let raw = kernel.queue().expect("queue");
    let hooked = rt
        .create_queue(Arc::new(kernel.queue().expect("queue")), options)
        .expect("xqueue");
    let refusing = rt
        .create_queue(Arc::new(Refusing(kernel.queue().expect("queue"))), options)
        .expect("xqueue");
    // mode -> (loss % per round, switches per command per round)
    let mut loss: [Vec<f64>; 2] = Default::default();
    let mut per_cmd: [Vec<f64>; 3] = Default::default();
    direct(&kernel, &raw, n, length); // warm-up
    for round in 0..rounds {
        let mut times = [Duration::ZERO; 3];
        for k in 0..3 {
            let mode = (k + round as usize) % 3;
            let before = switches();
            times[mode] = match mode {
                0 => direct(&kernel, &raw, n, length),
                1 => through(&kernel, &hooked, n, length),
                _ => through(&kernel, &refusing, n, length),
            };
            per_cmd[mode].push((switches() - before) as f64 / n as f64);
        }
        for m in 0..2 {
            loss[m].push((times[m + 1].as_secs_f64() / times[0].as_secs_f64() - 1.0) * 100.0);
        }
    }
    let stats = [
        None,
        Some(hooked.refill_stats()),
        Some(refusing.refill_stats()),
    ];
    for (mode, name) in ["direct", "hook", "launcher"].iter().enumerate() {
        let line = serde_json::json!({
            "mode": name,
            "commands": n,
            "length_us": length_us,
            "threshold": threshold,
            "batch": batch,
            "rounds": rounds,
            "loss_pct_median": (mode > 0).then(|| median(loss[mode - 1].clone())),
            "loss_pct": (mode > 0).then(|| loss[mode - 1].clone()),
            "switches_per_cmd_median": median(per_cmd[mode].clone()),
            "refill_stats": stats[mode].map(|s| format!("{s:?}")),
        });
        println!("{line}");
    }
}
