"""How the compiled core scales: time per job and peak memory against jobs, concurrency,
regions and queue length.

    python scripts/bench_scale.py --out out/bench_scale            # the four sweeps below
    python scripts/bench_scale.py --quick --out /tmp/bench_scale    # smoke run (tests)
    python scripts/bench_scale.py --sweeps jobs --jobs 10000 100000 1000000 \
        --base-capacity 16 --base-interarrival 7200 --out /tmp/stable  # a stable queue

Workload: the `random` scenario (regions with random capacities, prices and links; catalog jobs
that fit its largest region; Poisson arrivals), run to the end under --policy on the fast path
(`geo_gym.simulate`). Four sweeps (--sweeps), each varying one axis around a base case (--base-jobs jobs,
11 regions, one arrival per --base-interarrival seconds, capacity x --base-capacity, 1 by
default: then the queue grows for the whole run; x16 with an arrival every 7,200 s keeps it
short):

* ``jobs``: the job count (--jobs);
* ``concurrency``: every region's capacity x each of --factors (more jobs run at once; times
  --base-capacity);
* ``regions``: the region count (--regions), at --region-jobs jobs;
* ``queue``: arrivals --factors times as often as the base (the queue grows).

Each case runs in its own process, so ``peak_mb`` is that case's peak resident memory (the
interpreter and its imports included; ``base_mb``: the same process before the workload is
drawn). Per case: ``draw_s`` (drawing the workload's jobs), ``sim_s`` (``geo_gym.simulate``:
profiling and loading the jobs into the core, the compiled run and the result table),
``us_per_job`` = 1e6 x sim_s / jobs, ``run_us_per_job`` the same for the compiled run alone
(``fixed.run_fixed_policy``, timed around its call), and what the case really was: ``mean_running``
(time-averaged running jobs, sum of run times / makespan) and ``mean_queue`` (time-averaged
queued jobs, sum of waits / makespan, Little's law). A tiny run first compiles or loads the
numba caches in each process; the best of --repeat runs is reported. Writes bench_scale.csv and
bench_scale.png to --out.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from geo_gym import cli

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--out", type=Path, default=Path("out/bench_scale"), help="where the CSV and plot go")
parser.add_argument("--policy", default="bace_pipe", help="a fixed policy (baselines.names())")
parser.add_argument("--jobs", type=cli.positive_int, nargs="+", default=[1_000, 10_000, 100_000],
                    help="the jobs sweep")
parser.add_argument("--regions", type=cli.positive_int, nargs="+", default=[11, 100, 1000],
                    help="the regions sweep")
parser.add_argument("--base-jobs", type=cli.positive_int, default=10_000, help="jobs of the other sweeps")
parser.add_argument("--region-jobs", type=cli.positive_int, default=1_000, help="jobs of the regions sweep")
parser.add_argument("--base-interarrival", type=cli.finite_positive, default=3600.0,
                    help="seconds between arrivals in the base case")
parser.add_argument("--base-capacity", type=cli.finite_positive, default=1.0,
                    help="every region's capacity x this in the base case")
parser.add_argument("--sweeps", nargs="+", choices=["jobs", "concurrency", "regions", "queue"],
                    default=["jobs", "concurrency", "regions", "queue"], help="which sweeps to run")
parser.add_argument("--factors", type=cli.finite_positive, nargs="+", default=[1.0, 4.0, 16.0],
                    help="the concurrency sweep's capacity scales and the queue sweep's arrival-rate factors")
parser.add_argument("--repeat", type=cli.positive_int, default=1, help="runs per case; the fastest is reported")
parser.add_argument("--seed", type=cli.non_negative_int, default=0)
parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
parser.add_argument("--case", type=cli.json_object, default=None, help=argparse.SUPPRESS)  # one case, in a child


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def timed_runs() -> list[float]:
    """Seconds of each ``fixed.run_fixed_policy`` call from now on (``geo_gym.simulate`` calls
    it through the module, so this wrapper sees every compiled run)."""
    from geo_gym import fixed

    compiled, spent = fixed.run_fixed_policy, []

    def run(*args):
        t = time.perf_counter()
        ok = compiled(*args)
        spent.append(time.perf_counter() - t)
        return ok

    fixed.run_fixed_policy = run
    return spent


def run_case(case: dict) -> dict:
    """One case in this process: the row of the table."""
    import baselines
    import geo_gym

    spent = timed_runs()
    policy = baselines.make(case["policy"])
    knobs = {"num_jobs": case["jobs"], "num_regions": case["regions"],
             "mean_interarrival": case["interarrival"], "capacity_scale": case["capacity_scale"]}
    geo_gym.simulate("random", policy, seed=case["seed"], scenario_kwargs={**knobs, "num_jobs": 20})  # compile
    base = peak_mb()
    best = None
    for _ in range(case["repeat"]):
        t = time.perf_counter()
        scen = geo_gym.make_scenario("random", case["seed"], **knobs)
        draw_s = time.perf_counter() - t
        t = time.perf_counter()
        res = geo_gym.simulate(scen, policy, seed=case["seed"])
        sim_s = time.perf_counter() - t
        if best is None or sim_s < best[1]:
            best = (draw_s, sim_s, spent[-1], res)
    draw_s, sim_s, run_s, res = best
    jobs = res.jobs
    makespan_h = float(res.summary["makespan_h"])
    run_h = (jobs["jct_h"] - jobs["wait_h"]).sum()
    return {
        **{k: case[k] for k in ("sweep", "jobs", "regions", "capacity_scale", "interarrival")},
        "draw_s": round(draw_s, 3), "sim_s": round(sim_s, 3), "us_per_job": round(1e6 * sim_s / case["jobs"], 1),
        "run_us_per_job": round(1e6 * run_s / case["jobs"], 1),
        "mean_running": round(run_h / makespan_h, 1) if makespan_h > 0 else 0.0,
        "mean_queue": round(float(jobs["wait_h"].sum()) / makespan_h, 1) if makespan_h > 0 else 0.0,
        "base_mb": round(base), "peak_mb": round(peak_mb()),
    }


def sweeps(args) -> list[dict]:
    base = {"policy": args.policy, "seed": args.seed, "repeat": args.repeat, "regions": 11,
            "capacity_scale": args.base_capacity, "interarrival": args.base_interarrival, "jobs": args.base_jobs}
    out = [{**base, "sweep": "jobs", "jobs": n} for n in args.jobs]
    out += [{**base, "sweep": "concurrency", "capacity_scale": args.base_capacity * c} for c in args.factors]
    out += [{**base, "sweep": "regions", "regions": k, "jobs": args.region_jobs} for k in args.regions]
    out += [{**base, "sweep": "queue", "interarrival": args.base_interarrival / f} for f in args.factors]
    return [case for case in out if case["sweep"] in args.sweeps]


def plot(df, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_of = {"jobs": "jobs", "concurrency": "mean_running", "regions": "regions", "queue": "mean_queue"}
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.2))
    for ax, (sweep, x) in zip(axes, axes_of.items(), strict=True):
        s = df[df.sweep == sweep].sort_values(x)
        if s.empty:
            ax.set_axis_off()
            continue
        ax.plot(s[x], s.us_per_job, "o-", label="us per job")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_title(f"sweep: {sweep}", fontsize=9)
        twin = ax.twinx()
        twin.plot(s[x], s.peak_mb, "s--", color="grey", label="peak MB")
        twin.set_ylabel("peak MB", fontsize=8)
    axes[0].set_ylabel("simulate: us per job")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(args) -> None:
    if args.case is not None:
        print(json.dumps(run_case(args.case)))
        return
    import pandas as pd

    if args.quick:
        args.jobs, args.regions, args.base_jobs, args.region_jobs, args.factors = [200], [4], 200, 200, [1.0, 4.0]
    rows = []
    for case in cli.progress(sweeps(args), desc="cases", unit="cases"):
        out = subprocess.run([sys.executable, __file__, "--case", json.dumps(case)], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"case {case}: failed:\n{out.stderr[-3000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    df = pd.DataFrame(rows)
    print(df.to_markdown(index=False))
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "bench_scale.csv", index=False)
    plot(df, args.out / "bench_scale.png")
    print(f"wrote 2 files to {args.out}/: bench_scale.csv, bench_scale.png")


if __name__ == "__main__":
    main(parser.parse_args())
