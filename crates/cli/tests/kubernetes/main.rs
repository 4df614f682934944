//! The Kubernetes manifests (`deploy/kubernetes/*.yaml`) are never applied to a cluster here, so
//! this test checks their wiring against the code they configure: the DaemonSet's command line
//! against `xsched serve --help` and the policy registry; the socket, as a file on the node,
//! between the daemon and every pod; the ConfigMap against the daemon's own configuration
//! parser; the pods' `XSCHED_*` variables against the runtime's names and parsers; `LD_PRELOAD`
//! against the shims the workspace builds; the priorities between the pods' annotations, what
//! the Downward API hands the runtime, and the PriorityClasses; and the image's layout between
//! the Dockerfile (a registry's base) and the registry-free build (`deploy/podman`).

mod daemonset;
mod image;
mod manifests;
mod pods;

use manifests::{Manifests, name};
use std::collections::BTreeSet;

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
