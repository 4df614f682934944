#!/usr/bin/env bash
# Builds the image the manifests name (ghcr.io/xsched/xsched:latest, or $XSCHED_IMAGE) with
# podman, without a registry: the base from Debian's packages (base.sh, cached), imported as
# localhost/xsched-base:bookworm, then the release binaries on top (Containerfile). Needs
# target/release/{xsched,libxsched_cuda.so,libxsched_opencl.so}:
#   cargo build --release --locked -p xsched-cli -p xsched-shim-cuda -p xsched-shim-opencl
# Prints the image's name on its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CONTAINERS_CONF="$PWD/deploy/podman/containers.conf"
bash deploy/podman/locks.sh
IMAGE="${XSCHED_IMAGE:-ghcr.io/xsched/xsched:latest}"
BASE=localhost/xsched-base:bookworm

BINS=(target/release/xsched target/release/libxsched_cuda.so target/release/libxsched_opencl.so)
for f in "${BINS[@]}"; do
  [ -f "$f" ] || { echo "$f missing: cargo build --release --locked -p xsched-cli -p xsched-shim-cuda -p xsched-shim-opencl" >&2; exit 1; }
done

TARBALL="$(bash deploy/podman/base.sh | tail -1)"
# Import the base once per tarball: the label remembers which one.
if [ "$(podman image inspect --format '{{index .Labels "xsched.base"}}' "$BASE" 2>/dev/null)" \
    != "$(stat -c %Y "$TARBALL")" ]; then
  podman import -q --change "LABEL xsched.base=$(stat -c %Y "$TARBALL")" \
    --change "ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    "$TARBALL" "$BASE" >/dev/null
fi

CTX="$(mktemp -d)"
trap 'rm -rf "$CTX"' EXIT
cp deploy/podman/Containerfile "${BINS[@]}" "$CTX/"
# The release profile keeps debug info (about 80 % of the bytes); the image does not need it
# (the Dockerfile strips the same way). Symbols stay, so backtraces still name functions.
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug "$CTX/xsched" "$CTX/libxsched_cuda.so" "$CTX/libxsched_opencl.so"
fi
podman build -q -t "$IMAGE" "$CTX" >/dev/null
echo "$IMAGE"
