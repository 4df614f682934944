//! The DaemonSet against the daemon it runs: its command line against `xsched serve --help` and
//! the policy registry, the metrics port, the socket as one file on the node for the daemon and
//! every pod, and the ConfigMap against the daemon's own configuration parser.

use crate::manifests::{Manifests, literal, mount_of, name, on_node, scheduled, volume};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// `--flag value` and `--flag=value` pairs.
fn flags(args: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = args.iter();
    while let Some(&arg) = rest.next() {
        assert!(arg.starts_with("--"), "{arg}: expected a --flag");
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, value),
            None => (
                arg,
                *rest.next().unwrap_or_else(|| panic!("{arg} has no value")),
            ),
        };
        let earlier = out.insert(flag.to_string(), value.to_string());
        assert!(earlier.is_none(), "{flag} is given twice");
    }
    out
}

/// The daemon's command line after `serve`, as flags.
fn serve_flags(container: &Value) -> BTreeMap<String, String> {
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("the daemon container has args")
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap_or_else(|| panic!("{a}: args are strings"))
        })
        .collect();
    assert_eq!(args.first(), Some(&"serve"), "{args:?}");
    flags(&args[1..])
}

fn flag<'a>(flags: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    flags
        .get(name)
        .unwrap_or_else(|| panic!("the daemon is not given {name}: {flags:?}"))
}

/// The long flags `xsched serve --help` lists.
fn serve_help_flags() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_xsched"))
        .args(["serve", "--help"])
        .output()
        .expect("xsched runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let help = String::from_utf8(out.stdout).expect("UTF-8 help");
    let listed: BTreeSet<String> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split([' ', ',', '=']).find(|w| w.starts_with("--")))
        .map(str::to_string)
        .collect();
    assert!(listed.contains("--help"), "unreadable help: {help}");
    listed
}

/// The daemon's configuration file, found the way the daemon finds it (`--config`, through the
/// ConfigMap volume): where it is, and its text.
pub(super) fn config_file(m: &Manifests) -> (String, &str) {
    let (spec, container) = m.daemon();
    let given = serve_flags(container);
    let config = flag(&given, "--config");
    let (mount, rest) = mount_of(container, Path::new(config));
    let volume = volume(spec, mount["name"].as_str().expect("a volume name"));
    let map_name = volume["configMap"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("--config {config} is not on a ConfigMap volume"));
    let rest = rest.to_str().expect("a UTF-8 path");
    let key = match volume["configMap"]["items"].as_array() {
        None => rest,
        Some(items) => items
            .iter()
            .find(|i| i["path"] == rest)
            .and_then(|i| i["key"].as_str())
            .unwrap_or_else(|| panic!("no ConfigMap item for {rest}")),
    };
    let namespace = &m.one("DaemonSet")["metadata"]["namespace"];
    let map = m
        .of_kind("ConfigMap")
        .into_iter()
        .find(|c| name(c) == map_name && c["metadata"]["namespace"] == *namespace)
        .unwrap_or_else(|| panic!("no ConfigMap {map_name} beside the DaemonSet"));
    let text = map["data"][key]
        .as_str()
        .unwrap_or_else(|| panic!("ConfigMap {map_name} has no key {key}"));
    (format!("ConfigMap {map_name}, {key}"), text)
}

#[test]
fn the_daemonset_runs_serve_with_flags_the_binary_has() {
    let m = Manifests::load();
    let (spec, container) = m.daemon();
    let binary = Path::new(env!("CARGO_BIN_EXE_xsched"))
        .file_name()
        .and_then(|n| n.to_str())
        .expect("the binary's name");
    assert_eq!(
        container["command"],
        serde_json::json!([binary]),
        "the container runs the xsched binary"
    );
    let given = serve_flags(container);
    let listed = serve_help_flags();
    for flag in given.keys() {
        assert!(
            listed.contains(flag),
            "{flag} is not an `xsched serve` flag: {listed:?}"
        );
    }
    let policy = flag(&given, "--policy");
    if let Err(e) = policy.parse::<xsched_core::PolicySpec>() {
        panic!("--policy {policy}: {e}");
    }
    assert_eq!(
        spec["hostPID"], true,
        "the daemon reads clients' /proc/<pid> entries and needs their real pids"
    );
    assert!(
        container["resources"]["requests"].is_object(),
        "the daemon has resource requests"
    );
}

#[test]
fn the_metrics_port_is_the_one_served_probed_and_scraped() {
    let m = Manifests::load();
    let (_, container) = m.daemon();
    let given = serve_flags(container);
    let addr = flag(&given, "--metrics-addr");
    let served: u64 = addr
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("--metrics-addr {addr}: no port"));
    let ports = container["ports"].as_array().expect("container ports");
    let port_named = |name: &str| {
        ports
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("no container port named {name}"))
    };
    assert_eq!(port_named("metrics"), served, "the metrics container port");
    let probe = &container["readinessProbe"]["httpGet"];
    assert_eq!(probe["path"], "/metrics", "the readiness probe's path");
    let probed = match &probe["port"] {
        Value::String(name) => port_named(name),
        port => port.as_u64().expect("a probe port"),
    };
    assert_eq!(probed, served, "the readiness probe's port");
    let annotations = &m.one("DaemonSet")["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    let scraped = annotations["prometheus.io/port"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(scraped, served.to_string(), "the scrape annotation's port");
}

#[test]
fn the_socket_is_one_file_on_the_node_for_the_daemon_and_every_pod() {
    let m = Manifests::load();
    let (spec, container) = m.daemon();
    let given = serve_flags(container);
    let socket = flag(&given, "--socket");
    let (mount, _) = mount_of(container, Path::new(socket));
    assert_eq!(
        Path::new(socket).parent(),
        Some(Path::new(
            mount["mountPath"].as_str().expect("a mount path")
        )),
        "the socket's directory is the mount"
    );
    let volume = volume(spec, mount["name"].as_str().expect("a volume name"));
    assert_eq!(volume["hostPath"]["type"], "DirectoryOrCreate");
    let on_node_daemon = on_node(spec, container, socket);
    if let Some(own) = literal(container, "XSCHED_SOCKET") {
        assert_eq!(
            own, socket,
            "the daemon container's XSCHED_SOCKET (for `xsched top`)"
        );
    }
    for pod in m.of_kind("Pod") {
        for c in scheduled(pod) {
            let path = literal(c, "XSCHED_SOCKET")
                .unwrap_or_else(|| panic!("{}: no XSCHED_SOCKET", name(pod)));
            assert_eq!(
                on_node(&pod["spec"], c, path),
                on_node_daemon,
                "{}: XSCHED_SOCKET={path} is not the daemon's socket",
                name(pod)
            );
        }
    }
}

#[test]
fn the_config_map_is_the_file_serve_reads_and_the_daemon_accepts_it() {
    let m = Manifests::load();
    let (place, text) = config_file(&m);
    let parsed =
        xsched_daemon::DaemonConfig::parse(text).unwrap_or_else(|e| panic!("{place}: {e}"));
    if let Err(e) = parsed.authority() {
        panic!("{place}: {e}");
    }
}
