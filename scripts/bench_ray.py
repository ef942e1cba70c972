"""Throughput of a sweep of many short simulations: Ray tasks on 2 workers vs the serial loop.

    python scripts/bench_ray.py                       # 200 runs per workload size, 3 rounds
    python scripts/bench_ray.py --num-jobs 8 1000 --tasks 100 --repeat 5

The sweep is the paper's main experiment (baselines/paper.py: BACE-Pipe, LDF, LCF, CR-LCF,
CR-LDF) on `paper-default` over as many seeds as --tasks needs, at each --num-jobs (8 is the
paper's default; more jobs make each simulation longer). A Ray cluster of one node with 2
worker CPUs is started in a loopback-only namespace (agents/loopback.py), and one driver in
it runs, round after round, the serial loop and the same calls as Ray tasks
(``agents.scale.Tasks.map``, one task per run, results checked equal to the serial ones), so
that both meet the same machine load. The workers are warmed up first (imports, numba's cache).

Printed per size: one simulation's time, runs/s of the serial loop and of Ray (best round of
each, and the median), the speed-up, and Ray's overhead per task: a sweep of empty tasks on the
same 2 workers, wall time per task, against one simulation's time. The load average is printed
before and after: on a machine shared with other work the measured speed-up is only as good as
the machine is quiet (2 workers cannot go faster than the cores left free to them). So the CPU
time of each run is printed too, which other work changes far less: the serial loop's, and
that of every process of the cluster (driver, workers, Ray's daemons) during the Ray rounds
(medians); workers x their ratio is the speed-up to expect where that many cores are free.
(Linux's autogroup scheduler, where enabled, shares a busy machine's CPU between sessions, not
processes: the 2 workers of this script's session then get no more CPU than its serial loop.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from agents import loopback, scale
from baselines import paper
from geo_gym import cli

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--tasks", type=cli.positive_int, default=200, help="runs per workload size")
parser.add_argument("--num-jobs", type=cli.positive_int, nargs="+", default=[8, 2000], help="jobs per workload")
parser.add_argument("--repeat", type=cli.positive_int, default=3, help="rounds of serial then Ray")
parser.add_argument("--workers", type=cli.positive_int, default=2, help="worker CPUs of the Ray node")
parser.add_argument("--inner", metavar="ADDRESS", help=argparse.SUPPRESS)  # the driver, in the namespace


def calls(num_jobs: int, tasks: int) -> list[tuple]:
    seeds = -(-tasks // len(paper.MAIN))
    cells = paper.cells("bench", "num_jobs", [num_jobs], paper.MAIN, seeds)[:tasks]
    return [("paper-default", "memory", *cell) for cell in cells]


def nothing(i: int) -> int:
    return i


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def namespace_cpu_s() -> float:
    """CPU seconds used so far by every live process this driver sees: inside the cluster's
    PID namespace, the driver, the workers and Ray's own daemons."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def inner(args) -> None:
    """The driver: serial and Ray rounds back to back; one JSON line of results."""
    tasks = scale.Tasks(args.inner)
    tasks.map(paper.run_cell, calls(args.num_jobs[0], 4 * args.workers), "warm-up")  # imports, numba cache
    out = []
    for num_jobs in args.num_jobs:
        runs = calls(num_jobs, args.tasks)
        [paper.run_cell(*c) for c in runs[: len(paper.MAIN)]]  # this process warm too
        serial_s, ray_s, serial_cpu, ray_cpu = [], [], [], []
        for _ in range(args.repeat):
            c0 = time.process_time()
            s, want = timed(lambda runs=runs: [paper.run_cell(*c) for c in runs])
            serial_cpu.append(time.process_time() - c0)
            c0 = namespace_cpu_s()
            r, got = timed(lambda runs=runs: tasks.map(paper.run_cell, runs, "bench"))
            ray_cpu.append(namespace_cpu_s() - c0)
            if got != want:
                raise SystemExit(f"num_jobs={num_jobs}: the Ray results differ from the serial ones")
            serial_s.append(s)
            ray_s.append(r)
        empty = [timed(lambda: tasks.map(nothing, [(i,) for i in range(args.tasks)], "empty"))[0]
                 for _ in range(args.repeat)]
        out.append({"num_jobs": num_jobs, "tasks": len(runs), "serial_s": serial_s, "ray_s": ray_s,
                    "serial_cpu_s": serial_cpu, "ray_cpu_s": ray_cpu, "empty_s": empty})
    print(json.dumps(out))


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def main() -> None:
    args = parser.parse_args()
    if args.inner:
        inner(args)
        return
    if why := scale.ray_missing() or loopback.unavailable():
        parser.error(why)
    before = load()
    print(f"before: {load()}", flush=True)
    with loopback.LoopbackCluster(head_cpus=args.workers) as cluster:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--inner", cluster.address, "--tasks", str(args.tasks),
               "--repeat", str(args.repeat), "--workers", str(args.workers), "--num-jobs", *map(str, args.num_jobs)]
        res = cluster.run(cmd, timeout=3600)
    if res.returncode != 0:
        raise SystemExit(f"the benchmark driver failed: {res.stderr[-3000:]}")
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"{args.workers} Ray workers vs the serial loop, {args.repeat} rounds each (best / median):")
    for row in rows:
        n = row["tasks"]
        s, r, e = min(row["serial_s"]), min(row["ray_s"]), min(row["empty_s"])
        sm, rm = statistics.median(row["serial_s"]), statistics.median(row["ray_s"])
        sim_ms = 1e3 * s / n
        cpu_s, cpu_r = statistics.median(row["serial_cpu_s"]), statistics.median(row["ray_cpu_s"])
        print(f"  paper-default num_jobs={row['num_jobs']}: {n} runs, one simulation {sim_ms:.1f} ms; "
              f"serial {n / s:.0f} / {n / sm:.0f} runs/s, Ray {n / r:.0f} / {n / rm:.0f} runs/s: "
              f"speed-up {s / r:.2f}x / {sm / rm:.2f}x; Ray overhead {1e3 * e / n:.2f} ms per task "
              f"({1e3 * e / n / sim_ms:.2f}x a simulation); CPU per run {1e3 * cpu_s / n:.1f} ms serial, "
              f"{1e3 * cpu_r / n:.1f} ms on Ray (all its processes): {args.workers} x their ratio "
              f"{args.workers * cpu_s / cpu_r:.2f}x")
    print(f"before: {before}; after: {load()}")


if __name__ == "__main__":
    main()
