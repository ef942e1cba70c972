"""Speed of the fast path on traces: jobs simulated per second under a fixed policy.

    python scripts/bench_traces.py                      # the real RFold Philly table, BACE-Pipe
    python scripts/bench_traces.py --trace-file PATH --policy fcfs --out out/bench_traces
    python scripts/bench_traces.py --policy sjf --uncertainty '{"predictor": "metadata-only"}'
    python scripts/bench_traces.py --tile 1000000     # the table tiled to 1M jobs, phase by phase

Cases (rows of the printed table):

* ``sample-1k``, ``sample-10k``, ``sample-100k``: seeded samples of that many jobs of the whole
  table. A sample keeps the trace's arrival span and its load relative to the capacity (the
  mapping scales the cluster to the same target load), so the job count is what changes.
* ``full``: every job of the table.
* ``week``: a one-week window, by default days 56-63 of the RFold clock (the busiest week:
  15,783 jobs).

Per case: ``map_s`` (traces.mapping), ``sim_s`` (geo_gym.simulate: loading the jobs into the
core and running the compiled fast path), ``jobs_per_s`` = jobs / sim_s, and the outcome
(avg JCT, avg queueing) so that a speed-up can be checked not to change results. A tiny run
first compiles or loads the numba caches; the best of --repeat runs is reported. Without the
real file (``$GEO_GYM_TRACES_DIR/philly/rfold_philly_trace.csv.gz``, by default
../shared/traces/philly/rfold_philly_trace.csv.gz) a SYNTHETIC Philly job log of the
same size is generated (traces.synthetic) and the output says so.

``--tile N`` runs one case instead, ``tiled-N``: the whole table tiled to N jobs (copy k of
the table shifted in time by k x (span + span / jobs), so that copy k+1 starts one mean
interarrival after copy k's last submission; the first N jobs kept), mapped at the same target
load (the cluster stays the size of the one-table case, the running set too) and simulated
phase by phase, each phase timed: ``read_s`` (read_trace), ``tile_s``, ``map_s``
(traces.mapping), ``load_s`` (drawing the episode and writing it into the core), ``run_s``
(the compiled run), ``table_s`` (the summary and the per-job result table); the phases after
``map`` are those of ``geo_gym.simulate`` on the fast path. Memory: ``peak_mb`` is the
process's peak resident memory, the interpreter, its imports and the numba code included;
``base_mb`` the same before the table is read; ``peak_b_per_job`` = peak / jobs and
``added_b_per_job`` = (peak - base) / jobs; ``rss_<phase>_mb`` the resident memory after each
phase (what it keeps), ``peak_<phase>_mb`` the peak so far (the phase that sets the peak). Run one ``--tile`` per process: the peak is the process's.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from gymnasium.utils import seeding

import baselines
import geo_gym
from geo_gym import cli, fixed, runner, sim
from geo_gym.env import as_uncertainty
from geo_gym.loading import start_episode
from geo_gym.scenarios import scenario_factory
from traces.mapping import map_trace
from traces.readers import read_trace
from traces.synthetic import generate_philly_job_log, write_philly_job_log

ROOT = Path(__file__).resolve().parents[1]
TRACES_DIR = Path(os.environ.get("GEO_GYM_TRACES_DIR") or ROOT.parent / "shared" / "traces")
RFOLD = TRACES_DIR / "philly" / "rfold_philly_trace.csv.gz"
RFOLD_JOBS = 111_549
DAY = 86_400.0

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--trace-file", type=Path, default=None, help=f"default: {RFOLD} if present")
parser.add_argument("--policy", default="bace_pipe")
parser.add_argument("--uncertainty", type=cli.uncertainty, default="perfect",
                    help='a preset (perfect | realistic | schedmate) or JSON, e.g. \'{"predictor": "metadata-only"}\'')
parser.add_argument("--sizes", type=cli.positive_int, nargs="+", default=[1_000, 10_000, 100_000])
parser.add_argument("--week-start-days", type=float, default=56.0)
parser.add_argument("--target-load", type=float, default=0.5)
parser.add_argument("--repeat", type=cli.positive_int, default=1, help="runs per case; the fastest is reported")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--start-rule", type=cli.start_rule, default=None,
                    help="memory | any | fraction:X | kstar | request; default: the mapping's (request)")
parser.add_argument("--out", type=Path, default=None, help="write bench.csv and bench.png here")
parser.add_argument("--tile", type=cli.positive_int, default=None,
                    help="run only the case of the whole table tiled to this many jobs, phase by phase")


def source_table(path: Path | None):
    if path is None and RFOLD.exists():
        path = RFOLD
    if path is not None:
        return read_trace(path), str(path)
    with tempfile.TemporaryDirectory() as tmp:  # 40 MB of JSON: read it, then delete it
        file = Path(tmp) / "synthetic_philly_job_log.json"
        write_philly_job_log(generate_philly_job_log(RFOLD_JOBS, 1), file)
        return read_trace(file, "philly_job_log"), f"SYNTHETIC Philly job log ({RFOLD_JOBS} jobs, seed 1)"


def size_label(size: int) -> str:
    return f"sample-{size // 1000}k" if size % 1000 == 0 else f"sample-{size}"


def cases(table, sizes, week_start_days):
    n = len(table)
    for size in sizes:
        if size < n:
            yield size_label(size), {"sample": size / n}
    yield "full", {}
    yield "week", {"start": week_start_days * DAY, "length": 7 * DAY}


def run_case(table, options, policy, env_kwargs, seed, repeat):
    t = time.perf_counter()
    mapped = map_trace(table, sample_seed=seed, **options)
    map_s = time.perf_counter() - t
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        res = geo_gym.simulate(mapped.scenario, baselines.make(policy), seed=seed, env_kwargs=env_kwargs)
        sim_s = time.perf_counter() - t
        best = sim_s if best is None else min(best, sim_s)
    return mapped, res, map_s, best


def rss_mb() -> float:
    """Resident memory now (MB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def tile_table(table: pd.DataFrame, jobs: int) -> pd.DataFrame:
    """The table repeated to ``jobs`` rows: copy k shifted by k x (span + span / rows) seconds
    (the next copy starts one mean interarrival after the last submission), first ``jobs``
    rows kept; copy k's job ids end in ``~k`` (ids are unique in a table). The other object
    columns share their values with the original table."""
    n = len(table)
    span = float(table["submit"].max() - table["submit"].min())
    shift = span + span / n
    copies = -(-jobs // n)
    out = pd.concat([table] * copies, ignore_index=True).iloc[:jobs]
    offsets = np.repeat(np.arange(copies) * shift, n)[:jobs]
    out["submit"] = out["submit"].to_numpy() + offsets
    copy = np.repeat(np.arange(copies), n)[:jobs]
    suffix = np.array([""] + [f"~{k}" for k in range(1, copies)], dtype=object)[copy]
    out["job_id"] = out["job_id"].to_numpy(dtype=object) + suffix
    out.attrs = dict(table.attrs)
    return out


def run_tiled(args) -> None:
    """One tiled case, phase by phase (the module docstring)."""
    env_kwargs = {"uncertainty": args.uncertainty, "start_rule": args.start_rule}
    policy = baselines.make(args.policy)
    warm_table, _ = source_table(args.trace_file)  # compile / load the caches on a small map
    geo_gym.simulate(map_trace(warm_table, max_jobs=50, target_load=args.target_load).scenario, policy,
                     env_kwargs=env_kwargs)
    del warm_table
    row = {"case": f"tiled-{args.tile}"}
    base = rss_mb()
    times = {}

    def phase(name, t):
        times[name] = time.perf_counter() - t
        row[f"{name}_s"] = round(times[name], 2)
        row[f"rss_{name}_mb"] = round(rss_mb())
        row[f"peak_{name}_mb"] = round(peak_mb())

    t = time.perf_counter()
    table, label = source_table(args.trace_file)
    phase("read", t)
    t = time.perf_counter()
    table = tile_table(table, args.tile)
    phase("tile", t)
    t = time.perf_counter()
    mapped = map_trace(table, sample_seed=args.seed, target_load=args.target_load)
    phase("map", t)
    del table
    # geo_gym.simulate's fast path (geo_gym/runner.py), one phase at a time
    t = time.perf_counter()
    unc = as_uncertainty(args.uncertainty)
    if getattr(policy, "uncertainty", None):
        unc = unc.replace(**policy.uncertainty)
    rng, _ = seeding.np_random(args.seed)
    make = scenario_factory(mapped.scenario, args.start_rule)
    core, jobs, scen, _ = start_episode(sim.allocate(1, make(0).cluster.num_regions, 1, attempts=0), 0, make, rng, unc)
    phase("load", t)
    t = time.perf_counter()
    ok = fixed.run_fixed_policy(core, 0, policy.order_code, policy.rule_code, 0, bool(getattr(policy, "strict", False)))
    if not ok:
        raise SystemExit(f"policy {args.policy} could not place every job")
    phase("run", t)
    t = time.perf_counter()
    if hasattr(runner, "_collect"):  # as geo_gym.simulate does: the core goes before the table is built
        columns, summary = runner._collect(core, jobs, scen)
        del core
        res = runner._table(columns, summary)
    else:  # the commit before traces as columns (back-to-back comparisons)
        res = runner._result(core, jobs, scen)
    phase("table", t)
    n = len(res.jobs)
    peak = peak_mb()
    row.update({
        "jobs": n, "gpus": mapped.scenario.cluster.total_gpus,
        "sim_s": round(times["load"] + times["run"] + times["table"], 2),
        "total_s": round(sum(times.values()), 2),
        "base_mb": round(base), "peak_mb": round(peak),
        "peak_b_per_job": round(peak * 2**20 / n), "added_b_per_job": round((peak - base) * 2**20 / n),
        "avg_jct_h": res.summary["avg_jct_h"], "avg_wait_h": res.summary["avg_wait_h"],
        "total_cost": res.summary["total_cost"],
    })
    print(f"trace: {label} tiled to {args.tile} jobs; policy {args.policy}; uncertainty {args.uncertainty}; "
          f"target load {args.target_load}")
    for key, value in row.items():
        print(f"{key:>16} {value}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame([row]).to_csv(args.out / f"bench_tiled_{args.tile}.csv", index=False)
        print(f"wrote {args.out}/bench_tiled_{args.tile}.csv")


def main(args) -> None:
    if args.tile:
        return run_tiled(args)
    table, label = source_table(args.trace_file)
    span_days = float(table["submit"].max()) / DAY if len(table) else 0.0
    if args.week_start_days > span_days:
        raise SystemExit(
            f"--week-start-days {args.week_start_days:g}: the trace's submissions end at day {span_days:.2f}; "
            "pass a start inside it"
        )
    print(f"trace: {label}; policy {args.policy}; uncertainty {args.uncertainty}; target load {args.target_load}")
    warm = map_trace(table, max_jobs=50, target_load=args.target_load)
    env_kwargs = {"uncertainty": args.uncertainty, "start_rule": args.start_rule}
    geo_gym.simulate(warm.scenario, baselines.make(args.policy), env_kwargs=env_kwargs)  # compile / load caches
    rows = []
    todo = list(cases(table, args.sizes, args.week_start_days))
    for name, options in cli.progress(todo, desc="cases", unit="cases"):
        mapped, res, map_s, sim_s = run_case(
            table, {**options, "target_load": args.target_load}, args.policy, env_kwargs, args.seed,
            args.repeat,
        )
        jobs = len(mapped.scenario.jobs)
        rows.append({
            "case": name, "jobs": jobs, "gpus": mapped.scenario.cluster.total_gpus,
            "map_s": round(map_s, 2), "sim_s": round(sim_s, 2), "jobs_per_s": round(jobs / sim_s),
            "us_per_job": round(1e6 * sim_s / jobs, 1),
            "avg_jct_h": round(res.summary["avg_jct_h"], 3), "avg_wait_h": round(res.summary["avg_wait_h"], 3),
        })
        print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1), flush=True)
    df = pd.DataFrame(rows)
    print()
    print(df.to_markdown(index=False))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out / "bench.csv", index=False)
        import matplotlib  # only to plot: not in the tiled case's memory

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        curve = df[df.case.str.startswith("sample") | (df.case == "full")].sort_values("jobs")
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        ax.loglog(curve.jobs, curve.sim_s, "o-", label=f"{args.policy}, samples + full table")
        ref = curve.iloc[0]
        ax.loglog(curve.jobs, ref.sim_s * curve.jobs / ref.jobs, "k:", label="linear in jobs")
        ax.set_xlabel("jobs")
        ax.set_ylabel("simulate (s)")
        ax.set_title(label, fontsize=6)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.out / "bench.png", dpi=90)
        plt.close(fig)
        print(f"wrote 2 files to {args.out}/: bench.csv, bench.png")


if __name__ == "__main__":
    main(parser.parse_args())
