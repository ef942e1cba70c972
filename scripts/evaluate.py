"""Evaluate schedulers side by side on the same workloads: a named scenario or a job trace.

    # a named scenario, 20 seeds
    python scripts/evaluate.py --policies bace_pipe sjf lcf runs/default/last.zip \\
        --scenario recurring --scenario-kwargs '{"population_seed": 5}' --uncertainty realistic \\
        --seeds 20 --out out/eval
    # a trace, no download needed: the committed SYNTHETIC Philly-format sample
    python scripts/evaluate.py --trace philly
    # a real Philly table: five consecutive 1-day windows from day 50
    python scripts/evaluate.py --trace philly \\
        --trace-file ../shared/traces/philly/rfold_philly_trace.csv.gz \\
        --window-start-days 50 --window-days 1 --seeds 5

Policies are baseline names (`baselines.names()`) or paths to trained checkpoints (`.zip`,
loaded with --algo). Prints a table (avg / p50 / p99 JCT, avg queueing, makespan, total cost,
failures; each also normalised to BACE-Pipe replicate by replicate, then averaged; and the
mean GPUs a job was given, gpus_per_job; and pred_log_err, the mean |ln(predicted / executed
iterations)| of what the scheduler was told about each job) and writes
<out>/runs.csv, <out>/table.csv, <out>/jct_cdf.png and <out>/cost.png (and, for traces,
<out>/workloads.csv: the jobs, load and capacity of every replicate).

Traces (`--trace philly|acme`) are mapped to PP LLM jobs by `traces.mapping` (docs/traces.md).
Without --trace-file the committed synthetic samples in traces/data/ are used, and the output
says SYNTHETIC. Replicate i (of --seeds) is the window starting at --window-start-days +
i x --window-stride-days (default: consecutive windows), sampled with seed --first-seed + i
when --sample < 1, and simulated with that seed. Trained agents act through GeoPipeEnv (about
0.1-0.3 ms a step), so with a checkpoint among the policies a trace window is cut to its first
--max-jobs jobs, 300 unless given (--max-jobs 0: the whole window). --warmup-previous-window
pre-fills SchedMate's retrieval history with the jobs of the window just before each replicate's
(same length, mapped the same way; traces/warmup.py); without it every window starts with an
empty history. The wall time of each policy is printed at the end (not written: the CSVs
depend only on the inputs and seeds).

    # the trained agent on five real RFold 1-day windows (docs/results.md, "Traces")
    python scripts/evaluate.py --policies runs/default/last.zip bace_pipe sjf lcf \\
        --trace philly --trace-file ../shared/traces/philly/rfold_philly_trace.csv.gz \\
        --window-start-days 56 --window-days 1 --seeds 5 --max-jobs 0 --window 8 --cost-weight 0.1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from tqdm import tqdm  # noqa: E402

import baselines  # noqa: E402
from geo_gym import cli  # noqa: E402
from geo_gym.runner import simulate  # noqa: E402
from geo_gym.scenarios import scenario_factory  # noqa: E402
from traces.mapping import MappingOptions, map_trace  # noqa: E402
from traces.readers import READERS, guess_kind, read_trace  # noqa: E402
from traces.warmup import simulate_warm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC_SAMPLES = {
    "philly": ROOT / "traces" / "data" / "synthetic_philly_job_log.json",
    "acme": ROOT / "traces" / "data" / "synthetic_acme_seren.csv",
}
METRICS = ("avg_jct_h", "p50_jct_h", "p99_jct_h", "avg_wait_h", "makespan_h", "total_cost", "failures")
# Normalised columns; jct_vs_bace and cost_vs_bace keep their historical names.
RATIO_NAMES = {
    "avg_jct_h": "jct_vs_bace", "p50_jct_h": "p50_vs_bace", "p99_jct_h": "p99_vs_bace",
    "avg_wait_h": "wait_vs_bace", "makespan_h": "makespan_vs_bace", "total_cost": "cost_vs_bace",
    "failures": "failures_vs_bace",
}
AGENT_MAX_JOBS = 300
DAY = 86_400.0

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--policies", nargs="+", default=["bace_pipe", "sjf", "lcf", "ldf", "cr_lcf", "cr_ldf", "fcfs", "random"])
parser.add_argument("--algo", choices=["ppo", "maskable-ppo"], default="maskable-ppo", help="for checkpoints")
parser.add_argument("--scenario", default="paper-default")
parser.add_argument("--scenario-kwargs", type=json.loads, default={})
parser.add_argument("--uncertainty", type=cli.uncertainty, default="perfect",
                    help='a preset (perfect | realistic | schedmate) or JSON, e.g. \'{"preset": "realistic", "predictor": "noisy"}\'')
parser.add_argument("--warmup-workloads", type=cli.non_negative_int, default=0)
parser.add_argument("--window", type=cli.positive_int, default=8, help="the env's queue window (agents)")
parser.add_argument("--cost-weight", type=cli.cost_weight, default=0.1)
parser.add_argument("--start-rule", type=cli.start_rule, default=None,
                    help="how few GPUs a job may start on: memory | any | fraction:X | kstar | request; "
                         "default: the workload's own (memory for scenarios, request for traces)")
parser.add_argument("--seeds", type=cli.positive_int, default=None, help="replicates: 10 for a scenario, 4 for a trace")
parser.add_argument("--first-seed", type=int, default=2_000_000, help="training never uses seeds >= 1e6")
parser.add_argument("--out", type=Path, default=Path("out/eval"))
trace = parser.add_argument_group("traces (docs/traces.md)")
trace.add_argument("--trace", choices=["philly", "acme"], help="evaluate on a trace instead of --scenario")
trace.add_argument("--trace-file", type=Path, help="default: the committed synthetic sample of --trace")
trace.add_argument("--trace-kind", choices=sorted(READERS), default=None,
                   help="the file's format (traces.READERS); default: guessed from the file name")
trace.add_argument("--window-start-days", type=float, default=0.0, help="on the trace clock (first job = 0)")
trace.add_argument("--window-days", type=cli.non_negative_float, default=0.25, help="0: the whole trace")
trace.add_argument("--window-stride-days", type=float, default=None, help="between replicates; default --window-days")
trace.add_argument("--sample", type=float, default=1.0, help="fraction of each window's jobs kept")
trace.add_argument("--max-jobs", type=int, default=None,
                   help=f"first jobs of each window ({AGENT_MAX_JOBS} with agents); 0: all")
trace.add_argument("--compression", type=float, default=1.0, help="arrival times divided by this")
trace.add_argument("--target-load", type=float, default=MappingOptions.target_load)
trace.add_argument("--keep-cpu-jobs", action="store_true", help="map CPU-only jobs as 1-GPU jobs")
trace.add_argument("--no-trace-failures", action="store_true", help="ignore the trace's failures")
trace.add_argument("--warmup-previous-window", action="store_true",
                   help="pre-fill the retrieval history with the preceding window's jobs (needs --window-days > 0)")


def load_policy(name: str, algo: str):
    if name.endswith(".zip"):
        if not Path(name).exists():
            raise SystemExit(f"checkpoint {name} does not exist")
        from agents.policy import AgentPolicy  # torch only when an agent is evaluated
        from agents.training import load_model

        try:
            model = load_model(algo, name)
        except (TypeError, ValueError) as err:  # SB3's words for "another algorithm's checkpoint"
            raise SystemExit(f"{name}: not a {algo} checkpoint ({err}); pass --algo ppo or maskable-ppo") from None
        return Path(name).parent.name or name, AgentPolicy(model)
    return name, baselines.make(name)


def load_policies(names: list[str], algo: str) -> dict:
    """Policies by label: a checkpoint is labelled by its folder (runs/NAME/last.zip -> NAME),
    or by its path without .zip when that label is taken (two checkpoints of one folder, or a
    folder named like a baseline)."""
    policies = {}
    for name in names:
        label, policy = load_policy(name, algo)
        if label in policies:
            label = name[: -len(".zip")] if name.endswith(".zip") else name
        if label in policies:
            raise SystemExit(f"--policies: {name} is given twice")
        policies[label] = policy
    return policies


def check_agents_fit(policies: dict, num_regions: int, window: int) -> None:
    """A checkpoint reads observations of the layout it was trained on."""
    from geo_gym.decision import obs_size

    size = obs_size(num_regions, window)
    for label, policy in policies.items():
        model = getattr(policy, "model", None)
        if model is not None and model.observation_space.shape != (size,):
            raise SystemExit(
                f"checkpoint {label!r} takes observations of size {model.observation_space.shape[0]}, "
                f"these envs give {size} ({num_regions} regions, --window {window}): match the "
                "--window (and the region count) it was trained with"
            )


def trace_workloads(args, has_agent: bool) -> tuple[list[tuple[int, object, object]], pd.DataFrame, str]:
    """(seed, Scenario, preceding window's Scenario or None) per replicate, a table describing
    them, and a label for the output."""
    path = args.trace_file or SYNTHETIC_SAMPLES[args.trace]
    synthetic = args.trace_file is None
    kind = args.trace_kind or guess_kind(path)
    if kind is None:  # the name gives no hint: the trace family's own raw format
        kind = "acme" if args.trace == "acme" else "philly_job_log"
    elif kind.startswith("acme") != (args.trace == "acme"):
        raise SystemExit(f"--trace {args.trace} with a {kind} file ({path}): fix --trace or give --trace-kind")
    table = read_trace(path, kind)
    if args.max_jobs is not None and args.max_jobs < 0:
        raise SystemExit(f"--max-jobs must be >= 0 (0: the whole window), got {args.max_jobs}")
    max_jobs = args.max_jobs if args.max_jobs is not None else (AGENT_MAX_JOBS if has_agent else None)
    max_jobs = max_jobs or None
    length = args.window_days * DAY if args.window_days > 0 else None
    if args.warmup_previous_window and length is None:
        raise SystemExit("--warmup-previous-window needs windows (--window-days > 0): the whole trace has no preceding window")
    stride = (args.window_stride_days if args.window_stride_days is not None else args.window_days) * DAY
    label = f"{'SYNTHETIC (not real data) ' if synthetic else ''}{args.trace} trace {path} [{kind}]"
    out, rows = [], []
    for i in range(args.seeds):
        seed = args.first_seed + i
        start = args.window_start_days * DAY + i * stride
        options = dict(
            sample=args.sample, sample_seed=seed, max_jobs=max_jobs, gpu_only=not args.keep_cpu_jobs,
            compression=args.compression, target_load=args.target_load,
            trace_failures=not args.no_trace_failures,
        )
        mapped = map_trace(table, start=start, length=length, **options)
        past, past_jobs = None, 0
        if args.warmup_previous_window and start > 0:
            # The preceding window (clipped at the trace's start), mapped the same way; only its
            # jobs and what they ran are used (the retrieval history), not its cluster.
            try:
                before = map_trace(table, start=max(start - length, 0.0), length=start - max(start - length, 0.0),
                                   **options)
                past, past_jobs = before.scenario, len(before.scenario.jobs)
            except ValueError as err:
                if "no job left to map" not in str(err):
                    raise
        out.append((seed, mapped.scenario, past))
        j = mapped.jobs
        rows.append({
            "seed": seed, "window_start_days": start / DAY, "jobs": len(mapped.scenario.jobs),
            "offered_load_gpus": mapped.offered_load_gpus, "capacity_scale": mapped.capacity_scale,
            "gpus": mapped.scenario.cluster.total_gpus,
            "requested_gpus_per_job": float(j["max_gpus"].mean()),
            "target_gpus_per_job": float(j["stages"].mean()),
            "shorter_than_one_iteration": float((j["duration_s"] < j["t_iter_s"]).mean()),
            "planted_failures": int(sum(len(h) for h in j["failure_gpu_hours"] if h)),
            **({"warmup_jobs": past_jobs} if args.warmup_previous_window else {}),
            **{f"dropped_{k}": v for k, v in mapped.dropped.items()},
        })
    return out, pd.DataFrame(rows), label


def normalise(runs: pd.DataFrame) -> pd.DataFrame:
    """Each metric divided by BACE-Pipe's on the same replicate (NaN where BACE-Pipe's is 0)."""
    ref = runs[runs.policy == "bace_pipe"].set_index("seed")
    runs = runs.copy()
    for metric, ratio in RATIO_NAMES.items():
        den = ref.loc[runs.seed, metric].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            runs[ratio] = np.where(den != 0, runs[metric].to_numpy(dtype=float) / den, np.nan)
    return runs


def plot(table: pd.DataFrame, jcts: dict, out: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for name, values in jcts.items():
        v = np.sort(values)
        ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (h)")
    ax.set_ylabel("CDF")
    ax.set_title(title, fontsize=6)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "jct_cdf.png", dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(table.index, table.total_cost)
    ax.set_ylabel("total cost ($), mean over replicates")
    ax.set_title(title, fontsize=6)
    ax.tick_params(axis="x", rotation=45, labelsize=6)
    fig.tight_layout()
    fig.savefig(out / "cost.png", dpi=90)
    plt.close(fig)


def main(args) -> None:
    if not args.trace:
        given = [f"--{k.replace('_', '-')}" for k in ("trace_file", "trace_kind") if getattr(args, k) is not None]
        given += ["--warmup-previous-window"] * args.warmup_previous_window
        if given:
            raise SystemExit(f"{', '.join(given)}: only with --trace philly|acme")
    elif args.warmup_workloads:
        raise SystemExit(
            "--warmup-workloads replays draws of the workload itself, which for a trace is the window "
            "being evaluated; use --warmup-previous-window"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    policies = load_policies(args.policies, args.algo)
    if "bace_pipe" not in policies:
        policies["bace_pipe"] = baselines.make("bace_pipe")  # the reference
    env_kwargs = {
        "uncertainty": args.uncertainty, "warmup_workloads": args.warmup_workloads,
        "window": args.window, "cost_weight": args.cost_weight, "start_rule": args.start_rule,
    }
    if args.trace:
        args.seeds = 4 if args.seeds is None else args.seeds
        has_agent = any(p.endswith(".zip") for p in args.policies)
        workloads, described, label = trace_workloads(args, has_agent)
        described.to_csv(args.out / "workloads.csv", index=False)
        print(f"workload: {label}")
        print(described.round(3).to_string(index=False))
        if has_agent and args.max_jobs is None:
            print(f"note: a trained agent is evaluated, so each window keeps its first {AGENT_MAX_JOBS} jobs")
        kwargs = {}
    else:
        args.seeds = 10 if args.seeds is None else args.seeds
        workloads = [(s, args.scenario, None) for s in range(args.first_seed, args.first_seed + args.seeds)]
        label = f"scenario {args.scenario} {args.scenario_kwargs or ''}"
        kwargs = {"scenario_kwargs": args.scenario_kwargs}
    first = workloads[0][1]
    if isinstance(first, str):
        first = scenario_factory(first, **args.scenario_kwargs)(workloads[0][0])
    check_agents_fit(policies, first.cluster.num_regions, args.window)
    rows, jcts, wall = [], {}, {}
    tasks = [(p, w) for p in policies.items() for w in workloads]
    for (name, pol), (seed, scenario, past) in tqdm(tasks, desc="evaluate"):
        t = time.perf_counter()
        if past is not None:
            res = simulate_warm(scenario, past, pol, seed=seed, env_kwargs=env_kwargs)
        else:
            res = simulate(scenario, pol, seed=seed, env_kwargs=env_kwargs, **kwargs)
        wall[name] = wall.get(name, 0.0) + time.perf_counter() - t
        ran = res.jobs["iters"].to_numpy()
        rows.append({"policy": name, "seed": seed, "jobs": res.summary["num_jobs"],
                     **{m: res.summary[m] for m in METRICS}, "gpus_per_job": res.jobs["gpus"].mean(),
                     # how far what the scheduler was told is from what the job ran (log ratio)
                     "pred_log_err": float(np.abs(np.log(res.jobs["predicted_iters"].to_numpy() / ran)).mean())})
        jcts.setdefault(name, []).extend(res.jobs["jct_h"].tolist())
    runs = normalise(pd.DataFrame(rows))
    runs.insert(0, "workload", label)
    runs.to_csv(args.out / "runs.csv", index=False)
    table = runs.groupby("policy", sort=False)[[*METRICS, *RATIO_NAMES.values(), "gpus_per_job", "pred_log_err"]].mean()
    table = table.sort_values("jct_vs_bace")
    table.to_csv(args.out / "table.csv")
    print(f"{label}: {len(workloads)} replicate(s), mean over replicates; *_vs_bace: ratio to bace_pipe")
    print(table.round(3).to_markdown())
    print("wall time per policy (s, all replicates): " + ", ".join(f"{k} {v:.1f}" for k, v in wall.items()))
    plot(table, jcts, args.out, label)


if __name__ == "__main__":
    main(parser.parse_args())
