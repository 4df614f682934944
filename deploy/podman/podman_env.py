"""Podman for the shape's scripts: the repository's containers.conf, the daemon's container and
the tenant pods derived from deploy/kubernetes/ (derive.py), and the daemon's log read back
with its timestamps. One job: run things; what to check is in shape.py and bench.py."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

import derive

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "deploy" / "podman" / "containers.conf"
IMAGE = os.environ.get("XSCHED_IMAGE", derive.XSCHED_IMAGE)
DAEMON = "xsched-daemon"
ENV = {**os.environ, "CONTAINERS_CONF": str(CONF)}
# Every pod and container these scripts make, and nothing else: `sweep` removes these only.
PODS = [
    "xsched-daemon", "xsched-inference", "xsched-training", "xsched-garbage", "xsched-claimer",
    "xsched-orphan-1000", "xsched-orphan-0", "xsched-oldglibc", "xsched-soak",
]
CONTAINERS = [DAEMON, "xsched-bad-daemon-1000", "xsched-bad-daemon-0"]
# The volume `kube play` makes from the daemon's ConfigMap.
VOLUMES = ["xsched-config"]


def podman(*args, check=True, timeout=120):
    """`podman ARGS`; its output (stdout and stderr kept apart). A podman that outlives its
    timeout is killed and the call fails saying so; what it may have left half made is for
    `sweep` (the scripts call it in their `finally`)."""
    try:
        r = subprocess.run(
            ["podman", *args], env=ENV, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"podman {' '.join(args)}: no answer in {timeout} s") from e
    if check and r.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {r.stderr.strip()}")
    return r


def ours(name):
    """Whether a container of this name is one these scripts make (a pod's containers are named
    `POD-CONTAINER`)."""
    return name in CONTAINERS or any(name == p or name.startswith(p + "-") for p in PODS)


def exit_on_sigterm():
    """A SIGTERM (a CI step's timeout, a `timeout` wrapper) ends the run through the callers'
    `finally`, which sweeps up; a second one (a wrapper forwards the first) is ignored, so it
    cannot cut that sweep short."""

    def stop(*_):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.exit(143)

    signal.signal(signal.SIGTERM, stop)


def recover_locks():
    """podman's lock table made whole after a reboot podman did not notice (locks.sh says why);
    call before any other podman command of a run."""
    subprocess.run(["bash", str(ROOT / "deploy" / "podman" / "locks.sh")], env=ENV, check=True,
                   timeout=120)


def sweep():
    """Remove every pod and container these scripts make, then whatever a killed podman left of
    them in podman's storage: such a container is in no `podman ps -a` (podman's own records
    lost it) yet holds its name, so the next `kube play` of the pod is refused ("the container
    name ... is already in use") until `podman rm --storage` removes it. The same for an
    orphaned pod's infra container (`<pod id>-infra`). And the ConfigMap's volume, so that no
    record of these scripts outlives the run holding a lock number (locks.sh)."""
    for pod in PODS:
        podman("pod", "rm", "-f", "-t", "0", pod, check=False, timeout=60)
    for c in CONTAINERS:
        podman("rm", "-f", "-t", "0", c, check=False, timeout=60)
    known = set(podman("ps", "-a", "--format", "{{.Names}}", check=False, timeout=60).stdout.split())
    listed = podman("ps", "-a", "--external", "--format", "{{.ID}} {{.Names}}", check=False,
                    timeout=60).stdout.splitlines()
    for line in listed:
        cid, _, name = line.partition(" ")
        if name not in known and (ours(name) or name.endswith("-infra")):
            podman("rm", "--storage", cid, check=False, timeout=60)
            print(f"swept {name} ({cid}) from podman's storage", flush=True)
    for volume in VOLUMES:
        podman("volume", "rm", "-f", volume, check=False, timeout=60)


def log_time(line):
    """The UTC time (seconds since the epoch) a daemon log line starts with, if any."""
    m = re.search(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
    if not m:
        return None
    return datetime.fromisoformat(m.group(1) + "+00:00").timestamp()


def plain(text):
    """Text without the terminal colours tracing adds."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class Node:
    """One machine's worth of the shape: a socket folder standing for the node's /run/xsched,
    the daemon's container, and the pods played against it."""

    def __init__(self, config_extra=""):
        self.dir = Path(tempfile.mkdtemp(prefix="xsched-shape-", dir="/run"))
        self.socket_dir = self.dir / "run-xsched"
        # As the kubelet creates a DirectoryOrCreate hostPath: root's, mode 0755.
        self.socket_dir.mkdir(mode=0o755)
        self.config_dir = self.dir / "config"
        self.config_extra = config_extra
        self.pods = []

    # The daemon.

    def start_daemon(self, kube=False, socket_dir=None, name=DAEMON):
        """The DaemonSet's pod: `podman run` with hostPID (default), or `podman kube play`,
        which in podman 4.3 gives the pod a PID namespace of its own."""
        socket_dir = str(socket_dir or self.socket_dir)
        if kube:
            docs = derive.daemon_pod(IMAGE, socket_dir)
            for d in docs:
                if d["kind"] == "ConfigMap":
                    d["data"]["xsched.toml"] += self.config_extra
            self.play(docs, "daemon")
            return f"{DAEMON}-xsched"
        argv, files = derive.daemon_run(IMAGE, socket_dir, str(self.config_dir), name)
        self.config_dir.mkdir(exist_ok=True)
        for f, text in files.items():
            (self.config_dir / f).write_text(text + self.config_extra)
        podman(*argv)
        return name

    def wait_log(self, container, pattern, after=0.0, timeout=20.0):
        """The first line of `container`'s log matching `pattern` stamped after `after`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log(container).splitlines():
                t = log_time(line)
                if re.search(pattern, line) and (t is None or t >= after):
                    return line
            time.sleep(0.05)
        raise TimeoutError(f"{container}: no {pattern!r} in {timeout} s:\n{self.log(container)}")

    def log(self, container):
        r = podman("logs", container, check=False)
        return plain(r.stdout + r.stderr)

    def top(self, container=DAEMON):
        r = podman("exec", container, "xsched", "top", "--once", "--json")
        return json.loads(r.stdout)["rows"]

    def host_pid(self, container):
        return int(podman("inspect", "--format", "{{.State.Pid}}", container).stdout)

    def worker_pids(self, container):
        """Host pids of the `xsched` processes in `container`."""
        # `podman top` fails when a process ends while it reads /proc: none seen this time.
        r = podman("top", container, "hpid", "comm", check=False)
        out = r.stdout.splitlines()[1:] if r.returncode == 0 else []
        return {int(p) for p, comm in (l.split(None, 1) for l in out) if comm.strip() == "xsched"}

    # Tenant pods.

    def tenants(self, commands, env=None, only=None):
        """The example pods with `commands` (container name -> sh command) and extra `env`
        (container name -> {var: value}, replacing the spec's)."""
        pods = derive.tenant_pods(IMAGE, str(self.socket_dir), commands)
        for pod in pods:
            for c in pod["spec"]["containers"]:
                for k, v in (env or {}).get(c["name"], {}).items():
                    c["env"] = [e for e in c["env"] if e["name"] != k] + [{"name": k, "value": v}]
        if only:
            pods = [p for p in pods if p["metadata"]["name"] in only]
        return pods

    def variant(self, pod, name, command, uid=None, priority=None):
        """`pod` renamed, running `command`, as another user or with another annotation."""
        pod = yaml.safe_load(yaml.safe_dump(pod))
        pod["metadata"]["name"] = name
        for v in pod["spec"]["volumes"]:
            hp = v.get("hostPath", {})
            if hp.get("path", "").startswith(f"{self.socket_dir}.empty/"):
                hp["path"] = f"{self.socket_dir}.empty/{name}-{v['name']}"
        pod["spec"]["containers"][0]["command"] = ["sh", "-c", command]
        if uid is not None:
            pod["spec"]["securityContext"]["runAsUser"] = uid
            pod["spec"]["securityContext"]["runAsGroup"] = uid
        if priority is not None:
            pod["metadata"]["annotations"]["xsched.io/priority"] = str(priority)
        return pod

    def play(self, docs, label):
        for path in derive.empty_dirs(docs):
            Path(path).mkdir(parents=True, exist_ok=True)
            os.chmod(path, 0o777)
        f = self.dir / f"{label}.yaml"
        f.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        podman("kube", "play", str(f))
        self.pods += [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"]

    def wait_exit(self, container, timeout=120.0):
        """Wait for `container` to exit; its exit code."""
        r = podman("wait", container, timeout=timeout)
        return int(r.stdout.strip() or -1)

    def report(self, container):
        """The JSON document a worker printed last."""
        lines = [l for l in self.log(container).splitlines() if l.startswith("{")]
        if not lines:
            raise RuntimeError(f"{container} printed no report:\n{self.log(container)}")
        return json.loads(lines[-1])

    def remove_pods(self):
        for p in self.pods:
            podman("pod", "rm", "-f", "-t", "0", p, check=False)
        self.pods = []

    def close(self):
        self.pods = []
        sweep()
        subprocess.run(["rm", "-rf", str(self.dir)], check=False)
