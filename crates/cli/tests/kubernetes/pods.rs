//! The example pods against the runtime they load: their `XSCHED_*` variables against the
//! runtime's names and parsers, `LD_PRELOAD` against the shims the workspace builds, and their
//! priorities between the annotations, the Downward API and the PriorityClasses.

use crate::daemonset::config_file;
use crate::image::shim_libraries;
use crate::manifests::{
    Manifests, PRIORITY_FIELD, annotated_priority, containers, env, literal, mount_of, name,
    pods_named, scheduled,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use xsched_runtime::{QueueOptions, RolloutMode, RuntimeConfig, WhoSchedules};

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
            assert_eq!(config.scheduler, WhoSchedules::Global, "{pod_name}");
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
