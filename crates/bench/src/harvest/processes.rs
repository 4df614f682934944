//! The harvesting benchmark under a real policy with the HP service and the LP job in two
//! processes of their own (`xsched worker --role hp-service` and `--role lp`), scheduled
//! through a daemon this module starts: what an operator gets with `xsched serve` and two
//! unchanged programs. Each process has its own CPU device, both pinned to core 0, so the
//! kernels of the two processes share one core.
//!
//! The processes report on standard output as one JSON document each; times are wall-clock
//! (Unix epoch) nanoseconds so that the two processes' reports can be put on one time line.

use super::params::{AGAIN, HarvestParams, Measured, requests};
use super::scheduled::{self, LP_WINDOW};
use super::service::{self, HpMeasured, KernelWait, Unobserved};
use crate::error::{BenchError, io};
use crate::roles::{self, Role};
use serde_json::{Value, json};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use xsched_backend_cpu::CpuDevice;
use xsched_core::PolicySpec;
use xsched_runtime::{QueueOptions, Runtime};

fn unix_ns(t: Instant) -> u64 {
    let now = Instant::now();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let back = now.saturating_duration_since(t);
    wall.saturating_sub(back).as_nanos() as u64
}

/// `xsched worker --role hp-service`: the HP service on one queue configured from `XSCHED_*`,
/// on a CPU device pinned to core 0; its measurements as JSON.
pub fn hp_service_process(p: &HarvestParams) -> Result<Value, BenchError> {
    let runtime = Runtime::from_env()?;
    let device = CpuDevice::pinned(1, 0)?;
    let hp = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::from_env()?)?;
    let reqs = requests(p);
    let start = Instant::now() + Duration::from_millis(50);
    let m = service::serve(
        &hp,
        &reqs,
        p.warmup,
        start,
        &Unobserved,
        None,
        KernelWait::Block,
    );
    let us = |d: &Duration| d.as_secs_f64() * 1e6;
    Ok(json!({
        "latencies_us": m.latencies.iter().map(us).collect::<Vec<f64>>(),
        "kernel_waits_us": m.kernel_waits.iter().map(us).collect::<Vec<f64>>(),
        "kernel_time_us": us(&m.kernel_time),
        "from_unix_ns": m.from.map(unix_ns),
        "until_unix_ns": m.until.map(unix_ns),
    }))
}

/// `xsched worker --role lp`: the LP job (`kernel`-long kernels) on one queue configured from
/// `XSCHED_*` until standard input closes; each completion's wall-clock time as JSON.
pub fn lp_process(kernel: Duration) -> Result<Value, BenchError> {
    let runtime = Runtime::from_env()?;
    let device = CpuDevice::pinned(1, 0)?;
    let lp = runtime.create_queue(Arc::new(device.create_queue()), QueueOptions::from_env()?)?;
    let stop = AtomicBool::new(false);
    let done = std::thread::scope(|s| {
        s.spawn(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stop.store(true, Ordering::Relaxed);
        });
        scheduled::lp_job(&lp, kernel, &stop)
    });
    Ok(json!({
        "kernel_us": kernel.as_secs_f64() * 1e6,
        "completed_unix_ns": done.iter().map(|(t, _)| unix_ns(*t)).collect::<Vec<u64>>(),
        "window": LP_WINDOW,
    }))
}

/// One run's environment for a worker.
struct Env {
    vars: Vec<(&'static str, String)>,
}

fn worker(exe: &Path, role: Role, requests: u32, env: &Env) -> Command {
    let mut c = roles::command(exe, role);
    c.args(["--requests", &requests.to_string()]);
    for (k, v) in &env.vars {
        c.env(k, v);
    }
    c
}

/// The JSON report of a worker process that ended (`what` names it in the error).
pub(crate) fn report_of(
    out: std::process::Output,
    what: &'static str,
) -> Result<Value, BenchError> {
    if !out.status.success() {
        return Err(BenchError::WorkerFailed {
            what,
            status: out.status,
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|source| BenchError::WorkerReport { what, source })
}

fn durations(v: &Value) -> Vec<Duration> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_f64)
                .map(|us| Duration::from_secs_f64(us / 1e6))
                .collect()
        })
        .unwrap_or_default()
}

/// Run the HP process (and, with `lp`, the LP process beside it) under `policy` through a daemon
/// at `socket`.
fn run_pair(
    exe: &Path,
    p: &HarvestParams,
    socket: &Path,
    policy: &PolicySpec,
    slo_hint: Duration,
    lp: bool,
) -> Result<Measured, BenchError> {
    let daemon = xsched_daemon::Daemon::bind(socket, policy)?.spawn()?;
    let common = vec![
        ("XSCHED_SCHEDULER", "global".to_string()),
        ("XSCHED_SOCKET", socket.display().to_string()),
        ("XSCHED_LEVEL", "3".to_string()),
    ];
    let hp_env = hp_env_for(&common, policy, slo_hint);
    let lp_kernel = p
        .slices
        .first()
        .copied()
        .unwrap_or(Duration::from_micros(200));
    let lp_child = if lp {
        Some(start_lp(exe, common, lp_kernel)?)
    } else {
        None
    };
    // Give the LP process time to register and fill its queue before HP starts.
    std::thread::sleep(Duration::from_millis(200));
    let hp_out = worker(exe, Role::HpService, p.shape.requests, &hp_env)
        .output()
        .map_err(io("running the HP process"));
    let lp_out = lp_child.map(|mut child| {
        drop(child.stdin.take()); // closing its standard input ends the LP job
        child.wait_with_output()
    });
    daemon.stop();
    let hp = report_of(hp_out?, "HP")?;
    let lp_done = lp_completions(lp_out)?;
    Ok(measured_of(&hp, &lp_done, lp_kernel))
}

/// The HP process's environment: `common`, and its SLO (under `policy`'s SLO hint) or priority 10.
fn hp_env_for(common: &[(&'static str, String)], policy: &PolicySpec, slo_hint: Duration) -> Env {
    let mut hp_env = Env {
        vars: common.to_vec(),
    };
    match scheduled::hp_hint(policy, slo_hint) {
        xsched_core::Hint::Slo(s) => hp_env
            .vars
            .push(("XSCHED_SLO_US", (s.0 / 1000).to_string())),
        _ => hp_env.vars.push(("XSCHED_PRIORITY", "10".into())),
    }
    hp_env
}

/// Start the LP process (`lp_kernel`-long kernels at priority 0, environment `common`) with its
/// standard input piped: closing it ends the LP job.
fn start_lp(
    exe: &Path,
    common: Vec<(&'static str, String)>,
    lp_kernel: Duration,
) -> Result<Child, BenchError> {
    let mut env = Env { vars: common };
    env.vars.push(("XSCHED_PRIORITY", "0".into()));
    let mut c = worker(exe, Role::Lp, 0, &env);
    c.arg("--kernel-us")
        .arg(lp_kernel.as_micros().to_string())
        .stdin(Stdio::piped());
    c.spawn().map_err(io("starting the LP process"))
}

/// The wall-clock times (Unix ns) the LP process's kernels completed at, from its report
/// (none without an LP process).
fn lp_completions(
    lp_out: Option<std::io::Result<std::process::Output>>,
) -> Result<Vec<u64>, BenchError> {
    let Some(out) = lp_out else {
        return Ok(Vec::new());
    };
    let out = out.map_err(io("waiting for the LP process"))?;
    let v = report_of(out, "LP")?;
    let done: Vec<u64> = v["completed_unix_ns"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    Ok(done)
}

/// The measurement from the HP process's report `hp`, with the LP work of the completions in
/// `lp_done` that fall within HP's measured window.
fn measured_of(hp: &Value, lp_done: &[u64], lp_kernel: Duration) -> Measured {
    let from = hp["from_unix_ns"].as_u64().unwrap_or(0);
    let until = hp["until_unix_ns"].as_u64().unwrap_or(from);
    let in_window = lp_done.iter().filter(|&&t| t >= from && t <= until).count();
    Measured {
        hp: HpMeasured {
            latencies: durations(&hp["latencies_us"]),
            kernel_time: Duration::from_secs_f64(
                hp["kernel_time_us"].as_f64().unwrap_or(0.0) / 1e6,
            ),
            kernel_waits: durations(&hp["kernel_waits_us"]),
            from: None,
            until: None,
        },
        lp_work: lp_kernel * in_window as u32,
        window: Duration::from_nanos(until.saturating_sub(from)),
    }
}

/// The rows of the two-process run: HP alone through the daemon, then HP beside the LP
/// process under each of `policies`; the SLO hint is given to the HP process under
/// `slo-aware`.
pub(crate) fn run(
    exe: &Path,
    p: &HarvestParams,
    policies: &[&'static str],
    slo_hint: impl Fn(&Measured) -> Duration,
    progress: &dyn Fn(usize, usize),
) -> Result<Vec<(&'static str, Measured)>, BenchError> {
    let socket = std::env::temp_dir().join(format!("xsched-harvest-{}.sock", std::process::id()));
    let total = policies.len() + 2;
    progress(0, total);
    let hpf = PolicySpec::registered("hpf");
    let alone = run_pair(exe, p, &socket, &hpf, Duration::ZERO, false)?;
    let hint = slo_hint(&alone);
    let mut out = vec![("standalone", alone)];
    progress(1, total);
    out.push((
        AGAIN,
        run_pair(exe, p, &socket, &hpf, Duration::ZERO, false)?,
    ));
    for (i, &policy) in policies.iter().enumerate() {
        progress(i + 2, total);
        let spec = PolicySpec::registered(policy);
        out.push((policy, run_pair(exe, p, &socket, &spec, hint, true)?));
    }
    progress(total, total);
    Ok(out)
}
