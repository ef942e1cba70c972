"""Ray: a sweep's runs as Ray tasks give the serial run's tables, survive a killed worker and a
stopped node, and land on every node; a Tune sweep of two tiny training runs checkpoints
them and resumes a lost one from its checkpoint; --ray without Ray is a one-line error.

The cluster (a head and a second node, one CPU each) lives in a loopback-only network and PID
namespace (agents/loopback.py) shared by this module's tests, and ends with it: the fixture
fails if any of its processes is left. Not timed: scripts/bench_ray.py measures speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from agents import loopback

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


@pytest.fixture(scope="module")
def ray_cluster():
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    why = loopback.unavailable()
    if why:
        pytest.skip(f"no loopback-only namespace for a Ray cluster here: {why}")
    with loopback.LoopbackCluster(head_cpus=1) as c:
        yield c
    # LoopbackCluster.close() raised if any process of the namespace were left


@pytest.fixture
def cluster(ray_cluster):
    """The module's cluster with two nodes (one is added where a test stopped one)."""
    while len(ray_cluster.nodes) < 2:
        ray_cluster.add_node(num_cpus=1)
    return ray_cluster


def serial(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def same_table(serial_csv: Path, ray_csv: Path) -> set:
    """Assert the Ray run's CSV is the serial one plus the ray_node column; its node ids."""
    a, b = pd.read_csv(serial_csv), pd.read_csv(ray_csv)
    assert list(b.columns) == [*a.columns, "ray_node"]
    pd.testing.assert_frame_equal(a, b.drop(columns="ray_node"), check_exact=True)
    assert b.ray_node.notna().all()
    return set(b.ray_node)


def until(condition, timeout: float, every: float = 0.02):
    """The first true value of ``condition()`` within ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    return None


def test_benchmark_on_two_nodes_is_the_serial_run_bit_for_bit(cluster, tmp_path):
    serial([str(SCRIPTS / "benchmark.py"), "--quick", "--out", str(tmp_path / "serial")])
    out = cluster.run([sys.executable, str(SCRIPTS / "benchmark.py"), "--quick", "--out", str(tmp_path / "ray"),
                       "--ray", cluster.address], timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    nodes = set()
    for name in ("main", "bandwidth", "capacity", "jobs", "ablation"):
        nodes |= same_table(tmp_path / "serial" / f"{name}.csv", tmp_path / "ray" / f"{name}.csv")
    assert (tmp_path / "serial" / "summary.csv").read_bytes() == (tmp_path / "ray" / "summary.csv").read_bytes()
    assert len(nodes) == 2  # the tasks ran on both nodes


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    """An evaluate.py sweep with a (tiny, untrained) agent among the policies, whose replicates
    take long enough to be caught running, and its serial tables."""
    from agents.training import make_model, make_vec_env

    folder = tmp_path_factory.mktemp("evaluation")
    env = make_vec_env(1, "recurring", {"num_jobs": 40}, seed=0)
    make_model("maskable-ppo", env, seed=0, tensorboard_log=None, n_steps=32, batch_size=32).save(
        str(folder / "agent.zip"))
    args = [str(SCRIPTS / "evaluate.py"), "--policies", "bace_pipe", "sjf", str(folder / "agent.zip"),
            "--scenario", "recurring", "--scenario-kwargs", '{"num_jobs": 40}', "--seeds", "6"]
    serial([*args, "--out", str(folder / "serial")])
    return args, folder / "serial"


def check_evaluation(out: subprocess.CompletedProcess, serial_out: Path, ray_out: Path) -> set:
    assert out.returncode == 0, out.stderr[-3000:]
    nodes = same_table(serial_out / "runs.csv", ray_out / "runs.csv")
    assert (serial_out / "table.csv").read_bytes() == (ray_out / "table.csv").read_bytes()
    return nodes


def test_a_worker_killed_mid_sweep_is_retried_and_no_row_is_lost(cluster, evaluation, tmp_path):
    args, serial_out = evaluation
    run = cluster.popen([sys.executable, *args, "--out", str(tmp_path), "--ray", cluster.address])
    # a worker running one of the sweep's tasks (titled ray::evaluate while it does)
    busy = until(lambda: cluster.task_workers("evaluate"), timeout=300)
    assert busy, "no worker was seen running a task"
    os.kill(busy[0], signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=900)
    check_evaluation(subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr), serial_out, tmp_path)
    assert busy[0] not in cluster.pids()


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_tune_sweep_checkpoints_two_tiny_trials_and_resumes_a_lost_one(cluster, tmp_path):
    from agents.training import load_model

    # long enough after the first checkpoints that the kill lands while the trial still runs
    steps, every = 2048, 512
    cmd = [sys.executable, str(SCRIPTS / "sweep.py"), "--name", "s", "--seeds", "0", "1",
           "--timesteps", str(steps), "--scenario", "paper-default", "--uncertainty", "perfect",
           "--warmup-workloads", "0", "--num-envs", "2", "--n-steps", "128", "--eval-every", str(every),
           "--checkpoint-every", str(every), "--eval-seeds", "1", "--final-seeds", "1", "--ray", cluster.address]
    run = cluster.popen(cmd, cwd=tmp_path)
    sweep = tmp_path / "runs" / "s"
    # once both trials reported a checkpoint to Tune, kill the worker of one of them
    # (two checkpoints each: Tune restores a trial from the last checkpoint its driver has
    # registered, which can lag the one just written; and while neither has finished training:
    # a worker whose trial is done has nothing to restart)
    def two_each() -> bool:
        counts = Counter(p.parent for p in (sweep / "tune").glob("*/checkpoint_*"))
        return len(counts) == 2 and min(counts.values()) >= 2

    both = until(lambda: two_each() and not list(sweep.glob("*/eval.csv"))
                 and cluster.task_workers("ImplicitFunc.train"), timeout=600, every=0.1)
    assert both, "the trials were not seen running with a checkpoint each"
    os.kill(both[0], signal.SIGKILL)
    stdout, stderr = run.communicate(timeout=900)
    assert run.returncode == 0, stderr[-3000:]
    table = pd.read_csv(sweep / "summary.csv")
    assert sorted(table.trial) == [f"seed0-lr0.0003-steps{steps}", f"seed1-lr0.0003-steps{steps}"]
    assert table["rank"].tolist() == [1, 2] and table.objective_vs_best_fixed.is_monotonic_increasing
    assert table.error.isna().all() and (table.timesteps == steps).all()
    # the killed trial was restarted once, from a checkpoint it had reported, not from scratch
    assert sorted(table.restarts) == [0, 1]
    resumed = table[table.restarts == 1].iloc[0]
    assert resumed.restored_at in range(every, steps + 1, every)
    assert f"{resumed.trial}: restarted (1) from its checkpoint at {int(resumed.restored_at)} steps" in stdout + stderr
    for trial in table.trial:
        run_dir = sweep / trial
        for name in ("last.zip", "previous.zip", "comparison.csv", "protocol.json", "settings.json", "eval.csv"):
            assert (run_dir / name).is_file(), (trial, name)
        assert any((run_dir / "tb").rglob("events.out.tfevents.*"))
        assert load_model("maskable-ppo", run_dir / "last.zip").num_timesteps == steps
        assert pd.read_csv(run_dir / "eval.csv").timesteps.tolist() == list(range(every, steps + 1, every))
        assert len(list((sweep / "tune" / trial).glob("checkpoint_*"))) >= 1  # Tune's copies


# last of the cluster's tests: it stops the second node (the cluster fixture starts another
# one for any test after it)
def test_stopping_a_node_mid_sweep_loses_nothing(cluster, evaluation, tmp_path):
    args, serial_out = evaluation
    second = cluster.nodes[1]
    raylet = cluster.raylet(second)
    run = cluster.popen([sys.executable, *args, "--out", str(tmp_path), "--ray", cluster.address])

    def busy_on_second():  # a worker of the second node running one of the tasks
        return [pid for pid in cluster.task_workers("evaluate") if _parent(pid) == raylet]

    caught = until(busy_on_second, timeout=300)
    assert caught, "no task was seen running on the second node"
    cluster.stop_node(second)
    stdout, stderr = run.communicate(timeout=900)
    check_evaluation(subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr), serial_out, tmp_path)
    assert until(lambda: raylet not in cluster.pids(), timeout=60)  # the node is gone


@pytest.mark.parametrize("script", ["benchmark.py", "evaluate.py", "paper_claims.py", "sweep.py"])
def test_ray_flag_without_ray_is_a_one_line_error(script):
    code = ("import runpy, sys; sys.modules['ray'] = None; "  # as if Ray were not installed
            f"sys.argv = [{script!r}, '--ray']; runpy.run_path({str(SCRIPTS / script)!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{script}: error: --ray: Ray is not installed" in out.stderr.splitlines()[-1]
