#!/usr/bin/env python3
"""The Kubernetes shape run for real under podman, checked: the daemon's pod (the DaemonSet's
template, hostPID, the hostPath socket) and the two example pods (each in its own PID
namespace, with the shim, socket and XSCHED_* from their specs) on the CPU device, then what a
cluster does to them, what a hostile pod sends, and a workload image with an older glibc than
the build's. Prints every check and its figures; exits 1 if any failed.

Needs the image (build-image.sh), root, podman and runc. The workloads are the CPU device's
demo workers (`xsched worker`), so the workload image is the xsched image; the init
containers still copy the shim and LD_PRELOAD still loads it, as the specs say, but these
workers make no CUDA call for it to intercept: they talk to the daemon through the runtime.

Usage: shape.py [--keep]   (--keep leaves the containers for a look afterwards)
"""

import os
import signal
import subprocess
import sys
import time

import podman_env
from podman_env import Node, podman

# Per-tenant priority ranges by uid (the pods' runAsUser), added to the ConfigMap's file for
# the check: the inference pod's user may use 1..=100, the training pod's -100..=0.
RANGES = """
[[authority.priorities]]
who = ["1000"]
min = 1
max = 100

[[authority.priorities]]
who = ["1001"]
min = -100
max = 0
"""

FG = "xsched worker --role fg --core 0 --requests {n}"
BG = "sleep infinity | xsched worker --role bg --core 0"
SOAK = "xsched worker --role soak --core 0 --commands {n} --window 16 --rate 1000"
# A client that mounts the socket and sends garbage, then prints what the daemon answered
# (perl is in every Debian base; the image has no other socket tool).
GARBAGE = (
    "perl -MIO::Socket::UNIX -e '"
    '$s = IO::Socket::UNIX->new(Peer => "/run/xsched/xsched.sock") or die "connect: $!";'
    'print $s "\\xff" x 64, "GET / HTTP/1.0\\r\\n\\r\\n"; shutdown($s, 1);'
    'local $/; $r = <$s>; $r =~ s/[^ -~]//g; print STDERR "daemon answered: $r\\n"\''
)

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def rows_of(node, uid):
    return [r for r in node.top() if r["uid"] == uid]


def wait_rows(node, want, timeout=20.0, container=podman_env.DAEMON):
    """Poll `top` until `want(rows)`; the rows and the seconds it took."""
    start = time.monotonic()
    rows = []
    while time.monotonic() - start < timeout:
        try:
            rows = node.top(container)
        except RuntimeError:
            rows = []
        if want(rows):
            return rows, time.monotonic() - start
        time.sleep(0.05)
    return rows, None


def uids(rows):
    return sorted({r["uid"] for r in rows})


def shape(node):
    """The daemon and both pods; `top` from the daemon's container."""
    t0 = time.time()
    node.start_daemon()
    node.wait_log(podman_env.DAEMON, "listening", after=t0 - 1)
    mode = oct(node.socket_dir.stat().st_mode & 0o777)
    check(mode == "0o755", f"the node's socket folder stays root's, {mode}")
    node.play(
        node.tenants({"inference": FG.format(n=100000), "training": BG}),
        "tenants",
    )
    rows, took = wait_rows(node, lambda r: uids(r) == [1000, 1001])
    check(took is not None, f"top lists both pods' queues ({took and round(took, 2)} s): {rows}")
    pids = {
        1000: node.worker_pids("xsched-inference-inference"),
        1001: node.worker_pids("xsched-training-training"),
    }
    for uid, prio in [(1000, 10), (1001, 0)]:
        mine = [r for r in rows if r["uid"] == uid]
        check(
            bool(mine) and all(r["pid"] in pids[uid] and r["priority"] == prio for r in mine),
            f"uid {uid}: pid(s) {[r['pid'] for r in mine]} are its worker's host pids "
            f"{sorted(pids[uid])}, priority {prio} from the annotation",
        )
    # With hostPID the operator names a pod's process by its host pid, from the daemon's pod.
    (pid,) = pids[1001] or {0}
    for prio in (-5, 0):
        podman("exec", podman_env.DAEMON, "xsched", "hint", "--pid", str(pid), "--priority", str(prio))
        seen = [r["priority"] for r in node.top() if r["pid"] == pid]
        check(seen == [prio], f"`xsched hint --pid {pid} --priority {prio}` in the daemon's pod: {seen}")
    return rows


def bad_input(node):
    """Garbage on the socket and another tenant's priority: refused, nobody disturbed."""
    spec = {p["metadata"]["name"]: p for p in node.tenants({"inference": "true", "training": "true"})}
    t0 = time.time()
    node.play([node.variant(spec["xsched-training"], "xsched-garbage", GARBAGE, uid=1002)], "xsched-garbage")
    node.wait_exit("xsched-garbage-training")
    said = node.log("xsched-garbage-training")
    check("no handshake" in said, f"garbage: the pod's stderr has the reason: {said.strip()}")
    line = node.wait_log(podman_env.DAEMON, "uid 1002.*no handshake", after=t0)
    check(True, f"garbage: the daemon's log says why: {line.strip()}")

    # A training-tenant pod (uid 1001) claiming the inference tenant's priority 10.
    t0 = time.time()
    pod = node.variant(spec["xsched-training"], "xsched-claimer", FG.format(n=50), priority=10)
    node.play([pod], "xsched-claimer")
    node.wait_exit("xsched-claimer-training")
    said = node.log("xsched-claimer-training")
    check(
        "outside uid 1001's range -100..=0" in said,
        "claimer: the pod's stderr has the reason: "
        + next((l for l in said.splitlines() if "range" in l), said[-300:]).strip(),
    )
    line = node.wait_log(podman_env.DAEMON, "uid 1001.*outside", after=t0)
    check(True, f"claimer: the daemon's log says why: {line.strip()}")
    rows = node.top()
    check(
        uids(rows) == [1000, 1001] and all(r["priority"] in (10, 0) for r in rows),
        f"nobody else disturbed: {[(r['pid'], r['uid'], r['priority']) for r in rows]}",
    )


def bad_socket_dirs(node):
    """A socket folder another user owns, or that anyone may write: the daemon refuses."""
    spec = node.tenants({"inference": "true", "training": "true"}, only=["xsched-training"])[0]
    for label, owner, mode in [("owned by uid 1000", 1000, 0o755), ("mode 0777", 0, 0o777)]:
        d = node.dir / f"bad-{owner}-{mode:o}"
        d.mkdir()
        d.chmod(mode)
        os.chown(d, owner, owner)
        name = f"xsched-bad-daemon-{owner}"
        node.start_daemon(socket_dir=d, name=name)
        time.sleep(1.0)
        said = node.log(name)
        podman("rm", "-f", "-t", "0", name, check=False)
        # A tenant on that node: it runs unscheduled and says why.
        pod = node.variant(spec, f"xsched-orphan-{owner}", FG.format(n=20))
        for v in pod["spec"]["volumes"]:
            if v.get("hostPath", {}).get("path") == str(node.socket_dir):
                v["hostPath"]["path"] = str(d)
        node.play([pod], f"xsched-orphan-{owner}")
        rc = node.wait_exit(f"xsched-orphan-{owner}-training")
        orphan = next((l for l in node.log(f"xsched-orphan-{owner}-training").splitlines() if "unavailable" in l), "")
        check(
            rc == 0 and "unscheduled" in orphan,
            f"socket folder {label}: a pod there runs unscheduled and says why: {orphan.strip()}",
        )
        reason = next((l for l in said.splitlines() if "refus" in l or "Error" in l), said)
        check(
            "/run/xsched" in said and ("belongs to uid 1000" in said or "may write" in said),
            f"socket folder {label}: the daemon refuses: {reason.strip()}",
        )


def old_glibc(node):
    """A workload image whose glibc (Debian 11's 2.31) is older than the build's: the shim
    cannot load, and ld.so stops every program of the container with a message naming the
    shim and the missing version (the pod fails loudly; it never runs unscheduled)."""
    base = subprocess.run(
        ["bash", str(podman_env.ROOT / "deploy/podman/base.sh")],
        env={**podman_env.ENV, "XSCHED_BASE_SUITE": "bullseye"},
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout.splitlines()[-1]
    image = "localhost/xsched-workload:bullseye"
    podman("import", "--change", f"ENV=PATH={PATH}", base, image)
    spec = node.tenants({"inference": "true", "training": "true"}, only=["xsched-training"])[0]
    pod = node.variant(spec, "xsched-oldglibc", "echo the workload ran")
    pod["spec"]["containers"][0]["image"] = image
    node.play([pod], "xsched-oldglibc")
    rc = node.wait_exit("xsched-oldglibc-training")
    said = node.log("xsched-oldglibc-training")
    line = next((l for l in said.splitlines() if "GLIBC_2.34" in l), said.strip())
    check(
        rc != 0 and "required by /opt/xsched/lib/libxsched_cuda.so" in line
        and "the workload ran" not in said,
        f"glibc 2.31 workload image: the container stops at once (exit {rc}): {line.strip()}",
    )
    rows = node.top()
    check(uids(rows) == [1000, 1001], "nobody else disturbed")


def kill_tenant(node):
    """The training pod killed: its queues leave at once."""
    pids = node.worker_pids("xsched-training-training")
    pid = next(iter(pids))
    # SIGKILL to every process of the pod's container at once, as the kubelet's runtime does
    # (`podman pod kill` itself can take seconds on a busy machine, which would blur the figure).
    everyone = podman("top", "xsched-training-training", "hpid").stdout.split()[1:]
    t0 = time.time()
    for p in everyone:
        try:
            os.kill(int(p), signal.SIGKILL)
        except ProcessLookupError:
            pass
    line = node.wait_log(podman_env.DAEMON, rf"client {pid} .*gone", after=t0 - 1)
    gone = podman_env.log_time(line) - t0
    rows, took = wait_rows(node, lambda r: uids(r) == [1000])
    check(
        took is not None,
        f"training pod killed: its queues released {gone * 1000:.1f} ms after the kill "
        f"(daemon log); top shows inference only",
    )
    return gone


def restart_daemon(node):
    """The daemon's container killed (SIGKILL) under running pods and restarted by its
    restart policy: every tenant registers again, and a tenant counting its commands' runs
    sees each once."""
    spec = {p["metadata"]["name"]: p for p in node.tenants({"inference": "true", "training": "true"})}
    soak = node.variant(spec["xsched-training"], "xsched-soak", SOAK.format(n=20000))
    node.play([soak], "xsched-soak")
    rows, took = wait_rows(node, lambda r: uids(r) == [1000, 1001])
    check(took is not None, "a soak tenant (uid 1001) registered")
    before = node.host_pid(podman_env.DAEMON)
    t0 = time.time()
    tenants = node.worker_pids("xsched-inference-inference") | node.worker_pids("xsched-soak-training")
    os.kill(before, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and node.host_pid(podman_env.DAEMON) in (0, before):
        time.sleep(0.02)
    started = podman("inspect", "--format", "{{.State.StartedAt}}", podman_env.DAEMON).stdout
    up = started_at(started) - t0
    stamps = {}
    deadline = time.monotonic() + 60
    while set(stamps) != tenants and time.monotonic() < deadline:
        for line in node.log(podman_env.DAEMON).splitlines():
            for pid in tenants:
                t = podman_env.log_time(line)
                if f"client {pid} (xsched) connected" in line and t and t > t0:
                    stamps.setdefault(pid, t)
        time.sleep(0.2)
    back = max(stamps.values(), default=t0) - t0
    check(
        set(stamps) == tenants,
        f"daemon SIGKILLed: its container restarted {up:.2f} s after the kill (podman's "
        f"restart policy); every tenant ({sorted(tenants)}) registered again "
        f"{back:.2f} s after the kill (daemon log)",
    )
    node.wait_exit("xsched-soak-training")
    r = node.report("xsched-soak-training")
    check(
        r["exactly_once"] == r["commands"] and r["never"] == 0 and r["more_than_once"] == 0,
        f"commands through the restart: {r['commands']} sent, {r['exactly_once']} once, "
        f"{r['never']} lost, {r['more_than_once']} doubled",
    )
    return up, back


def started_at(text):
    """podman's StartedAt (`2026-12-05 02:55:40.123456789 +0000 UTC`) in epoch seconds."""
    from datetime import datetime

    day, clock = text.split()[:2]
    whole, _, frac = clock.partition(".")
    return datetime.fromisoformat(f"{day}T{whole}+00:00").timestamp() + float(f"0.{frac or 0}")


def unseen_pids(node):
    """The daemon in a PID namespace of its own (`kube play`, which drops hostPID): tenants
    show as pid 0, are scheduled, and `--pid 0` is refused."""
    podman("rm", "-f", "-t", "5", podman_env.DAEMON)
    t0 = time.time()
    name = node.start_daemon(kube=True)
    node.wait_log(name, "listening", after=t0 - 1)
    rows, took = wait_rows(node, lambda r: 1000 in uids(r), timeout=60, container=name)
    check(
        took is not None and all(r["pid"] == 0 for r in rows),
        f"daemon without hostPID: the inference pod re-registered, seen as pid "
        f"{sorted({r['pid'] for r in rows})}, priority {[r['priority'] for r in rows]}",
    ) or print(node.log("xsched-inference-inference")[-1500:])
    r = podman("exec", name, "xsched", "hint", "--pid", "0", "--priority", "50", check=False)
    check(
        r.returncode != 0 and "pid 0 names no one process" in r.stdout + r.stderr,
        f"`hint --pid 0` refused: {(r.stdout + r.stderr).strip()}",
    )
    line = node.wait_log(name, "PID namespace this daemon cannot see", after=t0)
    check(True, f"the daemon's log says so: {line.strip()[:160]}...")


def main():
    keep = "--keep" in sys.argv
    podman_env.exit_on_sigterm()
    # Leftovers of an interrupted run (these scripts' own names only) would stop `kube play`.
    podman_env.recover_locks()
    podman_env.sweep()
    node = Node(config_extra=RANGES)
    start = time.monotonic()
    try:
        shape(node)
        first_pids = node.worker_pids("xsched-inference-inference")
        bad_input(node)
        bad_socket_dirs(node)
        old_glibc(node)
        kill_tenant(node)
        restart_daemon(node)
        unseen_pids(node)
        running = podman("inspect", "--format", "{{.State.Running}} {{.RestartCount}}",
                         "xsched-inference-inference").stdout.split()
        pids = node.worker_pids("xsched-inference-inference")
        check(
            running == ["true", "0"] and pids == first_pids,
            f"the inference pod ran through all of it: running, never restarted, worker {pids}",
        )
    except Exception as e:  # a step that could not run is a failure with its reason
        check(False, f"{type(e).__name__}: {e}")
    finally:
        if not keep:
            node.close()
    print(f"{len(failures)} failed; {time.monotonic() - start:.0f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
