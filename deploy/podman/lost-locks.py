#!/usr/bin/env python3
"""Reproduce the `kube play` hang this project's machines gave podman 4.3, and its repair
(docs/guides/kubernetes.md, "Podman on these machines"): with the daemon pod's `xsched-config`
volume left from an earlier run, empty podman's lock table as the reboot that begins a session
does (/dev/shm is emptied, /run is not), then play the daemon's pod. Without `--renumber` it hangs
until the 120 s limit and leaves a container in podman's storage (which the closing sweep
removes); with `--renumber` (`podman system renumber` first, what locks.sh does once a boot) it
takes well under a second.

Needs root, podman, runc and the image (build-image.sh). It empties podman's lock table: run it
with no other container of the machine's running.

Usage: lost-locks.py [--renumber]
"""

import os
import sys
import time

import podman_env
from podman_env import Node, podman


def main():
    renumber = "--renumber" in sys.argv
    podman_env.exit_on_sigterm()
    podman_env.sweep()
    podman("volume", "create", "xsched-config")  # what an earlier run's kube play left
    os.remove("/dev/shm/libpod_lock")  # the reboot podman does not see here
    if renumber:
        podman("system", "renumber")
    node = Node()
    start = time.monotonic()
    try:
        node.start_daemon(kube=True)
        print(f"kube play of the daemon's pod: {time.monotonic() - start:.2f} s")
    except RuntimeError as e:
        print(f"kube play of the daemon's pod failed after {time.monotonic() - start:.1f} s: {e}")
    finally:
        if not renumber:
            podman("system", "renumber")  # so the sweep can remove the volume
        node.close()


if __name__ == "__main__":
    main()
