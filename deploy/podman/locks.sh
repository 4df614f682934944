#!/usr/bin/env bash
# Makes podman's lock table whole again after a reboot podman did not notice. Run before the other
# podman commands of these scripts (build-image.sh and podman_env.py call it); cheap and idempotent.
#
# Why: podman keeps its records (containers, pods, volumes, each with a lock number) on disk and
# its lock table in /dev/shm, and renumbers every lock when it sees a reboot, by a marker in
# /run/libpod. On this project's machines /run is on disk and survives the reboot that begins a
# session while /dev/shm (tmpfs) does not: podman misses the reboot and starts an empty lock
# table, then hands a new container a lock number an old record still holds. A pod whose
# container mounts such a volume (the shape's `xsched-config`, made from the ConfigMap) then
# waits on its own lock: `podman kube play` hangs until killed, leaving a container in storage
# that `podman ps -a` does not list (measured: docs/guides/kubernetes.md, "Podman on these
# machines"). `podman system renumber` is podman's own repair for a lost lock table.
#
# When: the machine booted since the last run here (the kernel's boot id differs from the one
# kept in the cache), or it is the first run here and no container is running (renumber needs
# none to run; after a reboot none can be).
set -euo pipefail
MARK="${XDG_CACHE_HOME:-$HOME/.cache}/xsched/podman-boot-id"
BOOT="$(cat /proc/sys/kernel/random/boot_id)"
if [ "$(cat "$MARK" 2>/dev/null || true)" = "$BOOT" ]; then
  exit 0
fi
if [ ! -e "$MARK" ] && [ -n "$(podman ps -q 2>/dev/null)" ]; then
  echo "podman: first run here with containers running: lock table left as it is" >&2
else
  podman system renumber
  echo "podman: locks renumbered for this boot (a reboot podman does not see on this machine)"
fi
mkdir -p "$(dirname "$MARK")"
echo "$BOOT" > "$MARK"
