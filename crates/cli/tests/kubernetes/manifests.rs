//! Reading the manifests: every YAML document with the file it came from, and the lookups the
//! checks share (a pod's containers, their variables, volumes and mounts, the annotated
//! priority).

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The annotation a pod's xsched priority comes from.
const PRIORITY_ANNOTATION: &str = "xsched.io/priority";

/// The Downward API field that hands [`PRIORITY_ANNOTATION`] to `XSCHED_PRIORITY`.
pub(super) const PRIORITY_FIELD: &str = "metadata.annotations['xsched.io/priority']";

/// The repository root.
pub(super) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every document of every manifest, with the file it came from.
pub(super) struct Manifests(pub(super) Vec<(String, Value)>);

impl Manifests {
    pub(super) fn load() -> Manifests {
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

    pub(super) fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.0
            .iter()
            .map(|(_, v)| v)
            .filter(|v| v["kind"] == kind)
            .collect()
    }

    pub(super) fn one(&self, kind: &str) -> &Value {
        match self.of_kind(kind).as_slice() {
            [one] => one,
            other => panic!("expected one {kind}, found {}", other.len()),
        }
    }

    /// The daemon's pod spec and its one container.
    pub(super) fn daemon(&self) -> (&Value, &Value) {
        let spec = &self.one("DaemonSet")["spec"]["template"]["spec"];
        match spec["containers"].as_array().map(Vec::as_slice) {
            Some([container]) => (spec, container),
            _ => panic!("the DaemonSet must have exactly one container: {spec}"),
        }
    }
}

pub(super) fn name(object: &Value) -> &str {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("no metadata.name: {object}"))
}

/// A pod spec's init containers and containers.
pub(super) fn containers(spec: &Value) -> Vec<&Value> {
    ["initContainers", "containers"]
        .into_iter()
        .filter_map(|key| spec[key].as_array())
        .flatten()
        .collect()
}

/// A container's environment entries, by name.
pub(super) fn env(container: &Value) -> Vec<(&str, &Value)> {
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
pub(super) fn literal<'a>(container: &'a Value, var: &str) -> Option<&'a str> {
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
pub(super) fn scheduled(pod: &Value) -> Vec<&Value> {
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

pub(super) fn volume<'a>(spec: &'a Value, volume: &str) -> &'a Value {
    spec["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == volume))
        .unwrap_or_else(|| panic!("no volume {volume} in {spec}"))
}

/// The volume mount of `container` under which `path` lies, and the rest of the path.
pub(super) fn mount_of<'a>(container: &'a Value, path: &'a Path) -> (&'a Value, &'a Path) {
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
pub(super) fn on_node(spec: &Value, container: &Value, path: &str) -> PathBuf {
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

pub(super) fn pods_named<'a>(m: &'a Manifests, pod: &str) -> &'a Value {
    m.of_kind("Pod")
        .into_iter()
        .find(|p| name(p) == pod)
        .unwrap_or_else(|| panic!("no pod {pod}"))
}

/// A pod's xsched priority: its annotation, as an i32 (what `XSCHED_PRIORITY` accepts).
pub(super) fn annotated_priority(pod: &Value) -> i32 {
    let value = pod["metadata"]["annotations"][PRIORITY_ANNOTATION]
        .as_str()
        .unwrap_or_else(|| panic!("{} has no {PRIORITY_ANNOTATION} annotation", name(pod)));
    value
        .parse()
        .unwrap_or_else(|e| panic!("{PRIORITY_ANNOTATION}: {value:?}: {e}"))
}
