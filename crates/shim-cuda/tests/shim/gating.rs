//! The shim's gates on an unchanged program: identical results and status codes with and
//! without it, every scheduled command behind its gate (graph launches included), and the
//! launches that must go to the driver ungated (a first launch that loads its kernel, a launch
//! under `CUDA_LAUNCH_BLOCKING=1`) going ungated.

use super::{gated_items, lines_of_stream, setup, waits};

#[test]
fn an_unchanged_program_gets_identical_results_and_status_codes_through_the_shim() {
    let Some(s) = setup() else { return };
    let native = s.run(false, &[], "native");
    let shimmed = s.run(true, &[], "shim");
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        v["proc_is_driver"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&shimmed.json), strip(&native.json));
    assert_eq!(
        native.json["errors"]["launch"], 1,
        "CUDA_ERROR_INVALID_VALUE"
    );
    assert_eq!(native.json["errors"]["ex"], 1);
    assert_eq!(native.json["proc_is_driver"], true);
    assert_eq!(
        shimmed.json["proc_is_driver"], false,
        "dlsym + cuGetProcAddress hand out the shim's cuLaunchKernel"
    );
    assert_eq!(waits(&native.driver), 0);
    // Every scheduled call waited behind its gate: the copy from pinned memory, the memset,
    // launches (plain but the kernel's first, Ex, found through cuGetProcAddress on the legacy
    // and per-thread streams); the failing calls add theirs (their gates are in the stream
    // too). The copies through pageable memory (one in, the readback out) ran ungated: behind a
    // gate they deadlock (the fake driver blocks their caller as a real one may).
    assert!(
        waits(&shimmed.driver) >= 19 + 5,
        "{} gates: {}",
        waits(&shimmed.driver),
        shimmed.driver
    );
    let log = &shimmed.log;
    assert!(
        log.matches("scheduled as XQueue").count() >= 4,
        "the created streams, the legacy and the per-thread stream: {log}"
    );
    assert!(log.contains("stream 0x1 scheduled"), "legacy stream: {log}");
    assert!(
        log.contains("stream 0x2 scheduled"),
        "per-thread stream: {log}"
    );
    assert!(log.contains("captured into a graph"), "{log}");
    assert!(log.contains("pageable host memory"), "{log}");
    // On the program's first stream the pinned copy waits behind a gate and the pageable one
    // (same size, next) does not.
    let (gated, on_stream) = gated_items(&shimmed.driver, "copy ");
    assert!(gated.len() >= 2, "{on_stream:?}");
    assert!(
        gated[0],
        "the pinned copy waited behind its gate: {on_stream:?}"
    );
    assert!(!gated[1], "the pageable copy ran ungated: {on_stream:?}");
    // The graph launch is scheduled: on its stream, a gate comes right before the graph's
    // nodes (the fake driver logs each node as it runs, then `graph <stream> <nodes>`).
    let graph = shimmed
        .driver
        .lines()
        .find(|l| l.starts_with("graph "))
        .unwrap_or_else(|| panic!("the graph ran: {}", shimmed.driver));
    let fields: Vec<&str> = graph.split(' ').collect();
    let (stream, nodes) = (fields[1], fields[2].parse::<usize>().expect("node count"));
    let on_stream = lines_of_stream(&shimmed.driver, stream);
    let at = on_stream.iter().position(|l| *l == graph).unwrap_or(0);
    assert!(
        at > nodes && on_stream[at - nodes - 1].starts_with("wait "),
        "the graph waited behind its gate: {on_stream:?}"
    );
    assert!(
        native.driver.contains("graph ") && waits(&native.driver) == 0,
        "natively the same graph ran ungated: {}",
        native.driver
    );
}

/// A driver whose first launch of a kernel synchronizes the context (lazy loading may): the
/// first launch goes ungated, so the program finishes with the native result instead of
/// waiting for its own gate; every later launch of the kernel is gated again.
#[test]
fn a_first_launch_that_synchronizes_the_context_does_not_wait_behind_its_gate() {
    let Some(s) = setup() else { return };
    let lazy = [("FAKE_CUDA_LAZY_LOAD", "1")];
    let native = s.run(false, &lazy, "lazy-native");
    let shimmed = s.run(true, &lazy, "lazy-shim");
    assert_eq!(shimmed.json["checksum"], native.json["checksum"]);
    assert!(shimmed.log.contains("first launch"), "{}", shimmed.log);
    // On the stream of the first launch, the first axpy ran without a gate right before it and
    // the next one behind its gate.
    let (gated, on_stream) = gated_items(&shimmed.driver, "axpy ");
    assert!(gated.len() >= 2, "{on_stream:?}");
    assert!(!gated[0], "the first launch ran ungated: {on_stream:?}");
    assert!(
        gated[1],
        "the second launch waited behind its gate: {on_stream:?}"
    );
    assert!(
        waits(&shimmed.driver) >= 19,
        "the later launches waited behind their gates: {}",
        shimmed.driver
    );
}

/// A module unloaded and loaded again: the fake driver hands out the same kernel address for a
/// kernel new to it, whose first launch loads it (and synchronizes the context). That launch
/// goes ungated too, instead of counting as loaded by its address and waiting behind its gate.
#[test]
fn a_kernel_at_a_reused_address_after_an_unload_is_launched_ungated_first() {
    let Some(s) = setup() else { return };
    let lazy = [("FAKE_CUDA_LAZY_LOAD", "1")];
    let args = ["reload", "4096", "5"];
    let native = s.run_mode(&args, false, &lazy, "reload-native");
    let shimmed = s.run_mode(&args, true, &lazy, "reload-shim");
    assert_eq!(shimmed.json["checksum"], native.json["checksum"]);
    let (gated, on_stream) = gated_items(&shimmed.driver, "axpy ");
    assert_eq!(gated.len(), 10, "{on_stream:?}");
    for (i, gated) in gated.iter().enumerate() {
        let first_of_its_module = i % 5 == 0;
        assert_eq!(
            *gated, !first_of_its_module,
            "launch {i}: only each module's first launch runs ungated: {on_stream:?}"
        );
    }
    assert!(
        !shimmed.log.contains("behind its own gate"),
        "no launch waited for the backend's backstop: {}",
        shimmed.log
    );
}

/// Under `CUDA_LAUNCH_BLOCKING=1` (the real driver's variable, which the fake driver follows)
/// every launch returns only once its stream ran it, so a gated launch would wait behind its own
/// gate until the backend's backstop let it through (milliseconds a launch). The shim knows the
/// setting: every launch goes to the driver ungated, in stream order, and the program finishes
/// with the native result; only its other commands wait behind gates.
#[test]
fn under_launch_blocking_every_launch_goes_ungated_with_the_native_result() {
    let Some(s) = setup() else { return };
    let blocking = [("CUDA_LAUNCH_BLOCKING", "1")];
    let native = s.run(false, &blocking, "blocking-native");
    let shimmed = s.run(true, &blocking, "blocking-shim");
    let gated = s.run(true, &[], "blocking-off-shim");
    assert_eq!(shimmed.json["checksum"], native.json["checksum"]);
    assert_eq!(shimmed.json["errors"], native.json["errors"]);
    assert!(
        shimmed.log.contains("CUDA_LAUNCH_BLOCKING=1")
            && !shimmed.log.contains("behind its own gate"),
        "said once, and no launch waited for the backstop: {}",
        shimmed.log
    );
    assert!(
        waits(&shimmed.driver) < waits(&gated.driver),
        "fewer gates than with asynchronous launches: {} against {}",
        waits(&shimmed.driver),
        waits(&gated.driver)
    );
}
