"""A Ray cluster on this machine that only the loopback interface can reach: the tests' and
the benchmarks' clusters (tests/test_scale.py, scripts/bench_ray.py, docs/scale.md).

Ray picks its node address by probing for a routable interface and binds every interface; a
cluster started for a test must not. ``LoopbackCluster`` makes a user, network, PID and mount
namespace (``unshare -rn --pid --fork --mount-proc``) whose only interface is ``lo``, starts the
head node (``ray start --head``) and further nodes (``ray start --address=...``) inside it, and
runs the drivers (``python scripts/benchmark.py --ray 127.0.0.1:6379``) inside it with
``nsenter``. Every Ray process lives in that PID namespace, so closing the cluster (killing the
namespace's first process) ends them all, and so does the death of the Python process that
made it (its pipe to that first process closes): nothing outlives a failed test. Processes are
found and stopped by their PID in that namespace, never by name, so Ray clusters of other users
of the machine are untouched.

Each cluster has its own Ray session folder (``RAY_TMPDIR``) and its own authentication token
(``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``), shared by its nodes and drivers only.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAD_PORT = 6379
INIT = """
import os, subprocess, sys, threading, time
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(0.1)
"""
NAMESPACE = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]


def unavailable() -> str | None:
    """Why no loopback-only namespace can be made here (one line), or None when one can."""
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux, iproute2)"
    try:
        res = subprocess.run([*NAMESPACE, "ip", "link", "set", "lo", "up"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unshare failed: {err}"
    if res.returncode != 0:
        return f"cannot make a loopback-only namespace ({' '.join(NAMESPACE[:3])} ...): {res.stderr.strip()}"
    return None


@dataclass
class Node:
    name: str
    node_manager_port: int
    num_cpus: int


class LoopbackCluster:
    """``with LoopbackCluster() as c: c.add_node(); c.run([...python, script, "--ray", c.address])``"""

    def __init__(self, head_cpus: int = 1, *, python: str = sys.executable, object_store_mb: int = 150,
                 env: dict | None = None):
        self.python = python
        self.head_cpus = int(head_cpus)
        self.object_store = int(object_store_mb) * 1024 * 1024
        self.tmp = tempfile.mkdtemp(prefix="geo-ray-")  # short: Ray's socket paths must fit 107 bytes
        self.env = {
            **os.environ, **(env or {}),
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
            "RAY_TMPDIR": self.tmp, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.address = f"127.0.0.1:{HEAD_PORT}"
        self.nodes: list[Node] = []
        self._holder: subprocess.Popen | None = None
        self._init: int | None = None  # host PID of the namespace's first process
        self._ns: str | None = None  # its PID namespace (/proc/PID/ns/pid)

    # ------------------------------------------------------------------ the namespace
    def open(self) -> LoopbackCluster:
        """Make the namespace and start the head node."""
        # the first process reaps the namespace's orphans (Ray's daemons are) and waits on its
        # stdin: when this process dies, the pipe closes, it exits, and the kernel ends every
        # process of the namespace
        self._holder = subprocess.Popen([*NAMESPACE, self.python, "-c", INIT], stdin=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while self._init is None:
            children = Path(f"/proc/{self._holder.pid}/task/{self._holder.pid}/children")
            pids = children.read_text().split() if children.exists() else []
            if pids and self._has_lo_up(int(pids[0])):
                self._init = int(pids[0])
                self._ns = os.readlink(f"/proc/{self._init}/ns/pid")
            elif self._holder.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the namespace did not start ({unavailable() or 'no first process'})")
            else:
                time.sleep(0.05)
        self._ray_start(["--head", f"--port={HEAD_PORT}", f"--num-cpus={self.head_cpus}",
                         "--include-dashboard=false"], "head", self.head_cpus, 6380)
        return self

    def _has_lo_up(self, pid: int) -> bool:
        res = subprocess.run(self._enter(pid) + ["cat", "/sys/class/net/lo/operstate"], capture_output=True,
                             text=True)
        return res.returncode == 0 and res.stdout.strip() in ("unknown", "up")

    def _enter(self, pid: int | None = None, cwd: str | Path = ROOT) -> list[str]:
        # entering the mount namespace moves to its root: --wd keeps the working directory
        return ["nsenter", "-t", str(pid or self._init), "--user", "--net", "--pid", "--mount",
                "--preserve-credentials", f"--wd={Path(cwd).resolve()}", "--"]

    def ray_cli(self) -> list[str]:
        return [self.python, "-m", "ray.scripts.scripts"]

    def _ray_start(self, flags: list[str], name: str, num_cpus: int, manager_port: int) -> Node:
        cmd = [*self.ray_cli(), "start", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
               f"--object-store-memory={self.object_store}", f"--node-manager-port={manager_port}", *flags]
        res = self.run(cmd, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(f"ray start ({name}) failed: {res.stderr[-2000:]}")
        node = Node(name, manager_port, num_cpus)
        self.nodes.append(node)
        return node

    def add_node(self, num_cpus: int = 1) -> Node:
        """A further node (``ray start --address=...``), as on a second machine."""
        k = len(self.nodes)
        return self._ray_start([f"--address={self.address}", f"--num-cpus={num_cpus}"], f"node{k}", num_cpus,
                               6380 + 10 * k)

    def run(self, cmd: list[str], timeout: float = 600, cwd: str | Path = ROOT) -> subprocess.CompletedProcess:
        """``cmd`` inside the namespace, in ``cwd`` (a driver: ``--ray 127.0.0.1:6379`` reaches
        the head)."""
        return subprocess.run(self._enter(cwd=cwd) + cmd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def popen(self, cmd: list[str], cwd: str | Path = ROOT) -> subprocess.Popen:
        """``cmd`` started inside the namespace, its output piped."""
        return subprocess.Popen(self._enter(cwd=cwd) + cmd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    # ------------------------------------------------------------------ its processes
    def pids(self) -> dict[int, str]:
        """Host PID: command line of every process in the namespace."""
        if self._ns is None:
            return {}
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.readlink(entry / "ns" / "pid") == self._ns:
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except (OSError, ValueError):
                continue
        return found

    def task_workers(self, task_name: str) -> list[int]:
        """Host PIDs of the workers running a task named ``task_name`` now (Ray titles a busy
        worker ``ray::<task name>``, an idle one ``ray::IDLE``)."""
        return [pid for pid, cmd in self.pids().items() if cmd.split(" ")[0] == f"ray::{task_name}"]

    def raylet(self, node: Node) -> int:
        """Host PID of ``node``'s raylet."""
        flag = f"--node_manager_port={node.node_manager_port}"
        found = [pid for pid, cmd in self.pids().items() if "/raylet " in cmd + " " and flag in cmd.split(" ")]
        if len(found) != 1:
            raise RuntimeError(f"{node.name}: {len(found)} raylets with {flag}")
        return found[0]

    def stop_node(self, node: Node) -> None:
        """Stop ``node`` as ``ray stop`` would on its machine: SIGTERM to its raylet, which
        ends that node's workers; the cluster carries on without it."""
        os.kill(self.raylet(node), signal.SIGTERM)
        self.nodes.remove(node)

    def close(self) -> None:
        """End every process of the namespace and remove the session folder."""
        if self._init is not None:
            try:
                os.kill(self._init, signal.SIGKILL)  # the kernel then kills the whole PID namespace
            except ProcessLookupError:
                pass
        if self._holder is not None:
            try:
                self._holder.stdin.close()
            except OSError:
                pass
            try:
                self._holder.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._holder.kill()
                self._holder.wait()
        deadline = time.monotonic() + 30
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = self.pids()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._init = self._ns = None
        if left:
            raise RuntimeError(f"processes left in the Ray namespace: {left}")

    def __enter__(self) -> LoopbackCluster:
        try:
            return self.open()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()
