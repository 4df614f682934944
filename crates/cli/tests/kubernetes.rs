//! The Kubernetes manifests (`deploy/kubernetes/*.yaml`) are never applied to a cluster here, so
//! this test checks their wiring against the code they configure: the DaemonSet's command line
//! against `xsched serve --help` and the policy registry; the socket, as a file on the node,
//! between the daemon and every pod; the ConfigMap against the daemon's own configuration
//! parser; the pods' `XSCHED_*` variables against the runtime's names and parsers; `LD_PRELOAD`
//! against the shims the workspace builds; the priorities between the pods' annotations, what
//! the Downward API hands the runtime, and the PriorityClasses; and the image's layout between
//! the Dockerfile (a registry's base) and the registry-free build (`deploy/podman`).

use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use xsched_runtime::{QueueOptions, RolloutMode, RuntimeConfig, SchedulerMode};

/// The annotation a pod's xsched priority comes from.
const PRIORITY_ANNOTATION: &str = "xsched.io/priority";

/// The Downward API field that hands [`PRIORITY_ANNOTATION`] to `XSCHED_PRIORITY`.
const PRIORITY_FIELD: &str = "metadata.annotations['xsched.io/priority']";

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every document of every manifest, with the file it came from.
struct Manifests(Vec<(String, Value)>);

impl Manifests {
    fn load() -> Manifests {
        let dir = root().join("deploy/kubernetes");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no manifests in {}", dir.display());
        let mut docs = Vec::new();
        for path in files {
            let file = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).expect("a readable manifest");
            for (i, document) in yaml_serde::Deserializer::from_str(&text).enumerate() {
                let number = i + 1;
                let value = Value::deserialize(document)
                    .unwrap_or_else(|e| panic!("{file}, document {number}: {e}"));
                // An empty document (a stray `---`) is no object.
                if !value.is_null() {
                    docs.push((format!("{file}, document {number}"), value));
                }
            }
        }
        Manifests(docs)
    }

    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.0
            .iter()
            .map(|(_, v)| v)
            .filter(|v| v["kind"] == kind)
            .collect()
    }

    fn one(&self, kind: &str) -> &Value {
        match self.of_kind(kind).as_slice() {
            [one] => one,
            other => panic!("expected one {kind}, found {}", other.len()),
        }
    }

    /// The daemon's pod spec and its one container.
    fn daemon(&self) -> (&Value, &Value) {
        let spec = &self.one("DaemonSet")["spec"]["template"]["spec"];
        match spec["containers"].as_array().map(Vec::as_slice) {
            Some([container]) => (spec, container),
            _ => panic!("the DaemonSet must have exactly one container: {spec}"),
        }
    }
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("no metadata.name: {object}"))
}

/// A pod spec's init containers and containers.
fn containers(spec: &Value) -> Vec<&Value> {
    ["initContainers", "containers"]
        .into_iter()
        .filter_map(|key| spec[key].as_array())
        .flatten()
        .collect()
}

/// A container's environment entries, by name.
fn env(container: &Value) -> Vec<(&str, &Value)> {
    container["env"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| (e["name"].as_str().expect("an env entry has a name"), e))
                .collect()
        })
        .unwrap_or_default()
}

/// The literal value of a container's variable `var`, if it sets one (a value must be a string:
/// the API server refuses a bare number).
fn literal<'a>(container: &'a Value, var: &str) -> Option<&'a str> {
    env(container)
        .into_iter()
        .find(|(n, _)| *n == var)
        .and_then(|(_, e)| e.get("value"))
        .map(|v| {
            v.as_str()
                .unwrap_or_else(|| panic!("{var}: {v} is not a string (quote it)"))
        })
}

/// The containers of a pod that load a shim (those xsched schedules).
fn scheduled(pod: &Value) -> Vec<&Value> {
    let found: Vec<&Value> = pod["spec"]["containers"]
        .as_array()
        .expect("a pod has containers")
        .iter()
        .filter(|c| literal(c, "LD_PRELOAD").is_some())
        .collect();
    assert!(
        !found.is_empty(),
        "{}: no container loads a shim",
        name(pod)
    );
    found
}

fn volume<'a>(spec: &'a Value, volume: &str) -> &'a Value {
    spec["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == volume))
        .unwrap_or_else(|| panic!("no volume {volume} in {spec}"))
}

/// The volume mount of `container` under which `path` lies, and the rest of the path.
fn mount_of<'a>(container: &'a Value, path: &'a Path) -> (&'a Value, &'a Path) {
    container["volumeMounts"]
        .as_array()
        .and_then(|mounts| {
            mounts.iter().find_map(|m| {
                let rest = path.strip_prefix(m["mountPath"].as_str()?).ok()?;
                Some((m, rest))
            })
        })
        .unwrap_or_else(|| panic!("{} is on no volume of {container}", path.display()))
}

/// Where `path`, as `container` sees it, is on the node (through a hostPath volume).
fn on_node(spec: &Value, container: &Value, path: &str) -> PathBuf {
    let (mount, rest) = mount_of(container, Path::new(path));
    assert!(mount["subPath"].is_null(), "subPath mounts: {mount}");
    let volume = volume(
        spec,
        mount["name"].as_str().expect("a mount names a volume"),
    );
    let host = volume["hostPath"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("{path} is not on a hostPath volume: {volume}"));
    Path::new(host).join(rest)
}

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

/// The file names of the LD_PRELOAD shims the workspace builds: `lib<name>.so` for the cdylib
/// of each `xsched-shim-*` member.
fn shim_libraries() -> BTreeSet<String> {
    let root = root();
    let read = |path: PathBuf| -> Value {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let workspace = read(root.join("Cargo.toml"));
    let mut libraries = BTreeSet::new();
    for member in workspace["workspace"]["members"]
        .as_array()
        .expect("workspace members")
    {
        let manifest = read(
            root.join(member.as_str().expect("a path"))
                .join("Cargo.toml"),
        );
        let package = manifest["package"]["name"].as_str().expect("a name");
        let cdylib = manifest["lib"]["crate-type"]
            .as_array()
            .is_some_and(|types| types.iter().any(|t| t.as_str() == Some("cdylib")));
        if package.starts_with("xsched-shim-") && cdylib {
            let lib = manifest["lib"]["name"]
                .as_str()
                .map_or_else(|| package.replace('-', "_"), str::to_string);
            libraries.insert(format!("lib{lib}.so"));
        }
    }
    assert!(!libraries.is_empty(), "the workspace builds no shim");
    libraries
}

/// A pod container's `XSCHED_*` variables as its process sees them: the literal values, and the
/// annotation for each that the Downward API fills in.
fn resolved_env(pod: &Value, container: &Value) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for (var, entry) in env(container) {
        if !var.starts_with("XSCHED_") {
            continue;
        }
        let value = match literal(container, var) {
            Some(v) => v,
            None => {
                let field = entry["valueFrom"]["fieldRef"]["fieldPath"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{var}: neither a value nor a fieldRef: {entry}"));
                let key = field
                    .strip_prefix("metadata.annotations['")
                    .and_then(|k| k.strip_suffix("']"))
                    .unwrap_or_else(|| panic!("{var}: {field} is not an annotation"));
                pod["metadata"]["annotations"][key]
                    .as_str()
                    .unwrap_or_else(|| panic!("{var}: {} has no annotation {key}", name(pod)))
            }
        };
        vars.insert(var.to_string(), value.to_string());
    }
    vars
}

/// The daemon's configuration file, found the way the daemon finds it (`--config`, through the
/// ConfigMap volume): where it is, and its text.
fn config_file(m: &Manifests) -> (String, &str) {
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

fn pods_named<'a>(m: &'a Manifests, pod: &str) -> &'a Value {
    m.of_kind("Pod")
        .into_iter()
        .find(|p| name(p) == pod)
        .unwrap_or_else(|| panic!("no pod {pod}"))
}

/// A pod's xsched priority: its annotation, as an i32 (what `XSCHED_PRIORITY` accepts).
fn annotated_priority(pod: &Value) -> i32 {
    let value = pod["metadata"]["annotations"][PRIORITY_ANNOTATION]
        .as_str()
        .unwrap_or_else(|| panic!("{} has no {PRIORITY_ANNOTATION} annotation", name(pod)));
    value
        .parse()
        .unwrap_or_else(|e| panic!("{PRIORITY_ANNOTATION}: {value:?}: {e}"))
}

#[test]
fn every_document_is_a_named_object_in_a_declared_namespace() {
    let m = Manifests::load();
    let namespaces: BTreeSet<&str> = m.of_kind("Namespace").into_iter().map(name).collect();
    assert!(!namespaces.is_empty(), "no Namespace");
    let mut seen = BTreeSet::new();
    for (place, doc) in &m.0 {
        for key in ["apiVersion", "kind"] {
            assert!(
                doc[key].as_str().is_some_and(|s| !s.is_empty()),
                "{place}: no {key}"
            );
        }
        let kind = doc["kind"].as_str().unwrap_or_default();
        let object = doc["metadata"]["name"].as_str().unwrap_or_default();
        assert!(!object.is_empty(), "{place}: no metadata.name");
        let namespace = doc["metadata"]["namespace"].as_str();
        if ["Namespace", "PriorityClass"].contains(&kind) {
            assert_eq!(namespace, None, "{place}: {kind} is cluster-scoped");
        } else {
            let namespace = namespace.unwrap_or_else(|| panic!("{place}: no metadata.namespace"));
            assert!(
                namespaces.contains(namespace),
                "{place}: namespace {namespace} is not declared"
            );
        }
        assert!(
            seen.insert((kind, namespace, object)),
            "{place}: a second {kind} {object}"
        );
    }
    for kind in ["ConfigMap", "DaemonSet", "PriorityClass", "Pod"] {
        assert!(!m.of_kind(kind).is_empty(), "no {kind}");
    }
    let ds = m.one("DaemonSet");
    let labels = &ds["spec"]["template"]["metadata"]["labels"];
    let selector = ds["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("the DaemonSet selects by labels");
    for (key, value) in selector {
        assert_eq!(
            &labels[key], value,
            "the selector must match the pod template"
        );
    }
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

#[test]
fn every_xsched_variable_is_one_the_runtime_reads_and_parses() {
    let m = Manifests::load();
    let (daemon_spec, _) = m.daemon();
    let pods = m.of_kind("Pod");
    let specs = std::iter::once(daemon_spec).chain(pods.iter().map(|p| &p["spec"]));
    for spec in specs {
        for c in containers(spec) {
            for (var, entry) in env(c) {
                if var.starts_with("XSCHED_") {
                    assert!(
                        xsched_runtime::ENV_NAMES.contains(&var),
                        "{var} is not read by xsched: {:?}",
                        xsched_runtime::ENV_NAMES
                    );
                }
                assert!(
                    entry.get("value").is_some() != entry.get("valueFrom").is_some(),
                    "{var}: exactly one of value and valueFrom"
                );
            }
        }
    }
    for pod in pods {
        let pod_name = name(pod);
        for c in scheduled(pod) {
            let vars = resolved_env(pod, c);
            let lookup = |var: &str| vars.get(var).cloned();
            let config =
                RuntimeConfig::from_lookup(&lookup).unwrap_or_else(|e| panic!("{pod_name}: {e}"));
            assert_eq!(config.scheduler, SchedulerMode::Global, "{pod_name}");
            let options =
                QueueOptions::from_lookup(&lookup).unwrap_or_else(|e| panic!("{pod_name}: {e}"));
            let mode = vars
                .get("XSCHED_MODE")
                .unwrap_or_else(|| panic!("{pod_name}: no XSCHED_MODE"));
            if let Err(e) = mode.parse::<RolloutMode>() {
                panic!("{pod_name}: XSCHED_MODE={mode}: {e}");
            }
            assert_eq!(
                options.hints.priority,
                annotated_priority(pod),
                "{pod_name}"
            );
            if let Some(slo) = vars.get("XSCHED_SLO_US") {
                let us: u64 = slo.parse().expect("a checked SLO");
                assert_eq!(
                    options.hints.slo,
                    Some(xsched_core::Nanos::from_us(us)),
                    "{pod_name}"
                );
            }
        }
    }
    let inference = pods_named(&m, "xsched-inference");
    for c in scheduled(inference) {
        assert!(
            literal(c, "XSCHED_SLO_US").is_some(),
            "the inference pod states its SLO"
        );
    }
}

#[test]
fn ld_preload_names_a_shim_the_workspace_builds_and_the_pod_installs() {
    let m = Manifests::load();
    let shims = shim_libraries();
    for pod in m.of_kind("Pod") {
        let pod_name = name(pod);
        let spec = &pod["spec"];
        for c in scheduled(pod) {
            let preload = literal(c, "LD_PRELOAD").expect("a scheduled container");
            let file = Path::new(preload)
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or_else(|| panic!("{pod_name}: LD_PRELOAD={preload}"));
            assert!(
                shims.contains(file),
                "{pod_name}: LD_PRELOAD={preload} is none of the shims {shims:?}"
            );
            let (mount, _) = mount_of(c, Path::new(preload));
            let volume_name = mount["name"].as_str().expect("a volume name");
            let installer = spec["initContainers"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|init| {
                    let mounts = init["volumeMounts"].as_array().into_iter().flatten();
                    let copies = ["command", "args"]
                        .into_iter()
                        .filter_map(|key| init[key].as_array())
                        .flatten()
                        .filter_map(Value::as_str)
                        .any(|word| word.ends_with(file));
                    copies && mounts.into_iter().any(|m| m["name"] == volume_name)
                });
            assert!(
                installer.is_some(),
                "{pod_name}: no init container puts {file} into volume {volume_name}"
            );
        }
    }
}

#[test]
fn priorities_come_from_the_annotation_and_agree_with_the_priority_classes() {
    let m = Manifests::load();
    let classes: BTreeMap<&str, i64> = m
        .of_kind("PriorityClass")
        .into_iter()
        .map(|c| (name(c), c["value"].as_i64().expect("a PriorityClass value")))
        .collect();
    let (place, text) = config_file(&m);
    let config =
        xsched_daemon::DaemonConfig::parse(text).unwrap_or_else(|e| panic!("{place}: {e}"));
    let range = config.authority.priority;
    let mut pods = Vec::new();
    for pod in m.of_kind("Pod") {
        let pod_name = name(pod);
        for c in scheduled(pod) {
            let field = env(c)
                .into_iter()
                .find(|(var, _)| *var == "XSCHED_PRIORITY")
                .map(|(_, e)| &e["valueFrom"]["fieldRef"]["fieldPath"])
                .unwrap_or_else(|| panic!("{pod_name}: no XSCHED_PRIORITY"));
            assert_eq!(
                field, PRIORITY_FIELD,
                "{pod_name}: XSCHED_PRIORITY comes from the annotation"
            );
        }
        let priority = annotated_priority(pod);
        // The example pods run as users no [[authority.priorities]] rule names, so the
        // daemon holds them to the default range.
        let uid = pod["spec"]["securityContext"]["runAsUser"].as_u64();
        assert!(
            uid.is_some_and(|u| u != 0),
            "{pod_name}: runs as a non-root user"
        );
        assert!(
            config.authority.priorities.is_empty(),
            "{place}: a rule may now name {pod_name}'s user: check its range here"
        );
        assert!(
            (range.min..=range.max).contains(&priority),
            "{pod_name}: priority {priority} is outside the daemon's range {}..={}",
            range.min,
            range.max
        );
        let class = pod["spec"]["priorityClassName"]
            .as_str()
            .unwrap_or_else(|| panic!("{pod_name}: no priorityClassName"));
        let value = *classes
            .get(class)
            .unwrap_or_else(|| panic!("{pod_name}: no PriorityClass {class}"));
        pods.push((pod_name, priority, value));
    }
    for (a, pa, va) in &pods {
        for (b, pb, vb) in &pods {
            assert_eq!(
                pa.cmp(pb),
                va.cmp(vb),
                "{a} and {b}: xsched priorities and PriorityClasses in another order"
            );
        }
    }
    let inference = annotated_priority(pods_named(&m, "xsched-inference"));
    let training = annotated_priority(pods_named(&m, "xsched-training"));
    assert!(
        inference > training,
        "inference {inference} must outrank training {training}"
    );
}

/// The files an image-building recipe's final stage installs: each `COPY`'s sources (their file
/// names) put into its destination folder, as absolute paths.
fn installed_by(recipe: &str) -> BTreeSet<String> {
    let path = root().join(recipe);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{recipe}: {e}"));
    let joined = text.replace("\\\n", " ");
    let last_stage = joined
        .rsplit_once("\nFROM ")
        .map_or(joined.as_str(), |(_, stage)| stage);
    let mut files = BTreeSet::new();
    for line in last_stage.lines().filter(|l| l.starts_with("COPY ")) {
        let words: Vec<&str> = line
            .split_whitespace()
            .skip(1)
            .filter(|w| !w.starts_with("--"))
            .collect();
        let (dest, sources) = words.split_last().expect("COPY names a destination");
        for source in sources {
            let file = Path::new(source).file_name().and_then(|f| f.to_str());
            let file = file.unwrap_or_else(|| panic!("{recipe}: COPY {source}"));
            files.insert(if dest.ends_with('/') {
                format!("{dest}{file}")
            } else {
                (*dest).to_string()
            });
        }
    }
    files
}

#[test]
fn the_dockerfile_and_the_registry_free_build_install_the_same_files() {
    let docker = installed_by("deploy/kubernetes/Dockerfile");
    let podman = installed_by("deploy/podman/Containerfile");
    assert_eq!(docker, podman, "the two images' layouts differ");
    assert!(docker.contains("/usr/bin/xsched"), "{docker:?}");
    for shim in shim_libraries() {
        assert!(
            docker.contains(&format!("/usr/lib/xsched/{shim}")),
            "{shim} is not installed: {docker:?}"
        );
    }
}
