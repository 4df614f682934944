//! One logging set-up for everything that hosts xsched: the CLI and the interception shims
//! loaded into other programs. Logs go to stderr, filtered by `XSCHED_LOG` (default `warn`).

/// Install the stderr logger unless the process already has a subscriber of its own (a
/// program an interception shim is loaded into may). `ansi`: colour escapes.
pub fn init_logging(ansi: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("XSCHED_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}
