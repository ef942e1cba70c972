"""Ray for the scripts: a sweep's runs as Ray tasks, on this machine or on a cluster.

    python scripts/benchmark.py --ray              # a local Ray instance started for the run
    python scripts/benchmark.py --ray auto         # the cluster that `ray start` runs here
    python scripts/benchmark.py --ray HOST:6379    # the cluster whose head is HOST

A sweep is a list of calls of one module-level function (``baselines.paper.run_cell``, a
replicate of ``scripts/evaluate.py``). ``Tasks.map`` runs them one after the other (no --ray),
or each as one Ray task, and returns their results in the order of the calls either way: every
run draws from its own seed, so the tables are the serial run's, bit for bit (tests/test_scale.py).
A task whose worker process dies, or whose node is lost, is run again (``max_retries``; an
exception raised by the run itself is not retried but reported), and each call's result is
taken once, from its own task: no row is lost or duplicated. ``Tasks.nodes`` names the node
that ran each call. Training sweeps run as Ray Tune trials instead (``scripts/sweep.py``).

Ray is optional (``pip install -e '.[ray]'``): it is imported only when --ray is given, and
geo_gym never imports it. Every node of a cluster runs this repository's code as installed
there (``pip install -e '.[ray]'`` on each machine, at the driver's commit), so that a task
computes on every node what it computes here. docs/scale.md walks through a two-node cluster.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator

from geo_gym import cli

LOCAL = "local"  # --ray without an address: start a Ray instance on this machine
RETRIES = 5  # runs of a task after its worker or node died (Ray's max_retries)
# arguments sent with each task as they are; anything else is put in the object store once,
# however many calls share it (a trace window, the env settings)
_INLINE = (str, bytes, int, float, bool, type(None))


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]`` on a script's parser."""
    parser.add_argument(
        "--ray", nargs="?", const=LOCAL, default=None, metavar="ADDRESS",
        help="run each simulation as a Ray task: without ADDRESS on a local Ray instance, "
             "with 'auto' or HOST:PORT on a running cluster (pip install -e '.[ray]'; docs/scale.md)",
    )


def ray_missing() -> str | None:
    """Why --ray cannot be used here, in one line, or None when Ray imports."""
    try:
        import ray  # noqa: F401
    except ImportError as err:
        return f"--ray: Ray is not installed ({err}); pip install -e '.[ray]' (docs/scale.md)"
    return None


def check_argument(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A one-line argparse error (exit 2) for --ray where Ray is not installed."""
    if getattr(args, "ray", None) is not None and (why := ray_missing()):
        parser.error(why)


def connect(address: str):
    """``ray`` connected to ``address`` (LOCAL: a new local instance; 'auto' or HOST:PORT: an
    existing cluster), once per process."""
    import ray

    if not ray.is_initialized():
        ray.init(address=None if address == LOCAL else address, include_dashboard=False)
    return ray


def node_id() -> str:
    """The Ray node id of the calling task's node."""
    import ray

    return ray.get_runtime_context().get_node_id()


def _call(fn: Callable, *args):
    """The Ray task: one call, and the node that ran it."""
    return fn(*args), node_id()


class Tasks:
    """Runs a sweep's calls serially (``address`` None) or as Ray tasks on ``address``."""

    def __init__(self, address: str | None = None, *, max_retries: int = RETRIES):
        self.address = address
        self.max_retries = int(max_retries)
        self.nodes: list[str] = []  # the node of each call of the last map (empty when serial)

    @property
    def on_ray(self) -> bool:
        return self.address is not None

    def map(self, fn: Callable, calls: Iterable[tuple], desc: str, *, leave: bool = True,
            unit: str = "runs") -> list:
        """``[fn(*call) for call in calls]``, with a progress bar counting finished calls."""
        calls = [tuple(call) for call in calls]
        self.nodes = []
        if not self.on_ray:
            return [fn(*call) for call in cli.progress(calls, desc=desc, leave=leave, unit=unit)]
        ray = connect(self.address)
        task = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(_call).options(name=desc)
        shared: dict[int, object] = {}

        def ref(value):
            if isinstance(value, _INLINE):
                return value
            if id(value) not in shared:
                shared[id(value)] = ray.put(value)
            return shared[id(value)]

        fn_ref = ray.put(fn)
        refs = [task.remote(fn_ref, *map(ref, call)) for call in calls]
        index = {r: i for i, r in enumerate(refs)}
        out: list = [None] * len(refs)
        nodes: list = [None] * len(refs)
        for r in cli.progress(_finished(ray, refs), desc=desc, total=len(refs), leave=leave, unit=unit):
            out[index[r]], nodes[index[r]] = ray.get(r)
        self.nodes = nodes
        return out


def _finished(ray, refs: list) -> Iterator:
    """``refs`` as their tasks finish (retried ones included), each once."""
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        if pending:  # everything else that is done too, without waiting
            more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            ready += more
        yield from ready
