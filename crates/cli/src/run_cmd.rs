//! `xsched run [--priority N] [--global] -- CMD`: a program run unchanged with its OpenCL
//! queues under xsched. The command that runs it (the shim in place of `libOpenCL.so.1`, the
//! hints set) is `xsched_runtime::launch`'s; here `CMD` replaces this process (its pid is the
//! one `xsched top` shows, and its exit status is the command's).

use anyhow::{Context, Result};
use std::os::unix::process::CommandExt;
use std::path::Path;
use xsched_runtime::launch;

/// What to run, and under which hints.
pub use xsched_runtime::launch::LaunchSpec as RunArgs;

/// Replace this process with `args.command`, the shim first on its library path.
pub fn run(args: &RunArgs) -> Result<()> {
    let mut cmd = launch::opencl_command(args)?;
    let err = cmd.exec();
    Err(err).with_context(|| format!("running {}", Path::new(cmd.get_program()).display()))
}
