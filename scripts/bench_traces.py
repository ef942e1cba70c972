"""Speed of the fast path on traces: jobs simulated per second under a fixed policy.

    python scripts/bench_traces.py                      # the real RFold Philly table, BACE-Pipe
    python scripts/bench_traces.py --trace-file PATH --policy fcfs --out out/bench_traces
    python scripts/bench_traces.py --policy sjf --uncertainty '{"predictor": "metadata-only"}'

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
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import baselines  # noqa: E402
import geo_gym  # noqa: E402
from geo_gym import cli  # noqa: E402
from traces.mapping import map_trace  # noqa: E402
from traces.readers import read_trace  # noqa: E402
from traces.synthetic import generate_philly_job_log, write_philly_job_log  # noqa: E402

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


def main(args) -> None:
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
