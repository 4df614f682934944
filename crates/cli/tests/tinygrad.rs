//! tinygrad (PyPI, unchanged, `DEV=CL` on POCL) under the OpenCL shim through `xsched run`: an
//! inference loop and a training loop as two processes scheduled by the daemon compute exactly
//! what they compute without xsched, and both show their queues in `xsched top`. Correctness
//! only; the timing of this pair is a benchmark (docs/guides/shims.md).
//!
//! tinygrad reaches OpenCL through ctypes (it opens libOpenCL.so.1 by path and looks functions
//! up through the handle), which `LD_PRELOAD` never reaches. Needs XSCHED_TINYGRAD_PYTHON
//! (scripts/tinygrad.sh installs it; scripts/test.sh sets it); without it this fails under CI
//! and is skipped elsewhere, saying why.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::{Daemon, XSCHED, skip, top, wait_for};

struct Setup {
    python: PathBuf,
    script: PathBuf,
    shim: PathBuf,
}

fn setup() -> Option<Setup> {
    let Some(python) = std::env::var_os("XSCHED_TINYGRAD_PYTHON").map(PathBuf::from) else {
        return skip("XSCHED_TINYGRAD_PYTHON is not set (bash scripts/tinygrad.sh)");
    };
    let shim = support::opencl_shim()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/tinygrad/mlp.py");
    Some(Setup {
        python,
        script,
        shim,
    })
}

impl Setup {
    /// `mlp.py ARGS`, natively or (with a socket) through `xsched run --global`.
    fn command(&self, args: &[&str], under: Option<(&Path, i32)>) -> Command {
        let mut c = match under {
            None => Command::new(&self.python),
            Some((socket, priority)) => {
                let mut c = Command::new(XSCHED);
                c.args(["run", "--global", "--priority", &priority.to_string()])
                    .arg("--socket")
                    .arg(socket)
                    .arg("--")
                    .arg(&self.python);
                c
            }
        };
        c.arg(&self.script)
            .args(args)
            .env("XSCHED_OPENCL_SHIM", &self.shim)
            .env("DEV", "CL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

fn result(child: Child) -> serde_json::Value {
    let out = child.wait_with_output().expect("ends");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn tinygrad_inference_beside_training_under_the_daemon_computes_what_it_does_natively() {
    let Some(s) = setup() else { return };
    let (infer, train) = (["infer", "40", "20"], ["train", "6"]);
    let native_train = s.command(&train, None).spawn().expect("train");
    let native_infer = s.command(&infer, None).spawn().expect("infer");
    let (native_infer, native_train) = (result(native_infer), result(native_train));

    let socket = support::socket("tinygrad");
    let _daemon = Daemon::start(&socket);
    let mut bg = s
        .command(&["train-until-stdin-closes"], Some((&socket, 0)))
        .stdin(Stdio::piped())
        .spawn()
        .expect("background training");
    let mut bg_lines = BufReader::new(bg.stdout.take().expect("stdout")).lines();
    let started = bg_lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(started.contains("started"), "{started}");
    let fg = s
        .command(&infer, Some((&socket, 10)))
        .spawn()
        .expect("infer");
    let (fg_pid, bg_pid) = (fg.id(), bg.id());
    wait_for(
        || {
            let rows = top(&socket);
            let prio = |pid: u32| {
                rows.iter()
                    .find(|r| r["pid"] == pid)
                    .map(|r| r["priority"].clone())
            };
            prio(fg_pid) == Some(10.into()) && prio(bg_pid) == Some(0.into())
        },
        "both processes' queues in `xsched top` with their priorities",
    );
    let trained = s
        .command(&train, Some((&socket, 0)))
        .spawn()
        .expect("train");
    let (shimmed_infer, shimmed_train) = (result(fg), result(trained));
    drop(bg.stdin.take());
    let last: Vec<String> = bg_lines.map_while(Result::ok).collect();
    assert!(bg.wait().expect("ends").success(), "{last:?}");
    assert_eq!(
        shimmed_infer["outputs"], native_infer["outputs"],
        "inference outputs bit-identical under the shim"
    );
    for key in ["loss", "losses", "weights"] {
        assert_eq!(shimmed_train[key], native_train[key], "training {key}");
    }
}

#[test]
fn tinygrad_with_kernel_slicing_computes_bit_identical_results_and_cuts_long_kernels() {
    let Some(s) = setup() else { return };
    let train = ["train", "8"];
    let native = result(s.command(&train, None).spawn().expect("train"));
    let socket = support::socket("tinygrad-sliced");
    let _daemon = Daemon::start(&socket);
    // tinygrad compiles here (CACHELEVEL=0: not from its disk cache), so the shim sees each
    // kernel's source; a 200 µs budget cuts its matmuls.
    let mut c = s.command(&train, Some((&socket, 0)));
    c.env("XSCHED_SLICE_US", "200")
        .env("CACHELEVEL", "0")
        .env("XSCHED_LOG", "info");
    let out = c.output().expect("runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let text = String::from_utf8_lossy(&out.stdout);
    let sliced: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    let cut = log.matches(" cut into ").count();
    assert!(cut >= 3, "kernels cut: {cut}\n{log}");
    for key in ["loss", "losses", "weights"] {
        assert_eq!(sliced[key], native[key], "training {key}, sliced");
    }
}
