//! The image's layout: the shims the workspace builds, and the files the Dockerfile (a
//! registry's base) and the registry-free build (`deploy/podman`) install, which must agree.

use crate::manifests::root;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The file names of the LD_PRELOAD shims the workspace builds: `lib<name>.so` for the cdylib
/// of each `xsched-shim-*` member.
pub(super) fn shim_libraries() -> BTreeSet<String> {
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
