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
loaded with --algo), labelled "agent (PATH)". The terminal gets the key columns, one row per
policy ranked by mean avg_jct_h: policy, avg_jct_h, total_cost (means over replicates) and
jct_vs_bace_pipe, cost_vs_bace_pipe (the policy's value divided by BACE-Pipe's on the same
replicate, then averaged over replicates). <out>/table.csv holds the wide table, in the same
order: avg / p50 / p99 JCT, avg queueing, makespan, total cost, failures, each also as a
*_vs_bace_pipe ratio; gpus_per_job, the mean GPUs a job was given; and pred_log_err, the mean
|ln(predicted / executed iterations)| of what the scheduler was told about each job.
<out>/runs.csv has a row per policy and replicate, and, for traces, <out>/workloads.csv the jobs,
load and capacity of every replicate. --plot adds <out>/jct_cdf.png (the JCT CDF of each policy,
every replicate's jobs pooled: one plot for the workload set evaluated), <out>/cost.png and, per
policy, <out>/schedule_<policy>.png: its schedule on the first replicate (seed or window), drawn
by geo_gym.plot_schedule (one lane per region with every job's attempts over the GPUs they held,
colour by model, failures marked; the queue and link use over time). The script ends by listing
every file it wrote.

With a checkpoint among the policies, the evaluation follows the protocol of agents/protocol.py:
every queue order (--protocol-orders) x placement rule of the agent's action space runs on --validation-seeds other
replicates (scenario seeds from --first-seed + 1e6; for a trace, the windows just before the
evaluated ones), the best of them in the objective the agents are trained on (N x avg JCT +
--cost-weight x cost) joins the table as "best fixed (<order>+<rule>)", and <out>/protocol.csv
gives each agent / best fixed in that objective, replicate by replicate, with a bootstrap 95%
interval, and its JCT and cost ratios.

A checkpoint whose run folder has a settings.json (scripts/train_ppo.py) is checked against
this evaluation: a one-line warning (stderr) names each of --scenario, --scenario-kwargs,
--uncertainty, --window, --cost-weight, --start-rule that differs from its training (or a trace
evaluated instead of its training scenario). Bad options are one-line errors naming them (exit 2).

Traces (`--trace philly|acme`) are mapped to PP LLM jobs by `traces.mapping` (docs/traces.md).
Without --trace-file the committed synthetic samples in traces/data/ are used, and the output
says SYNTHETIC. Replicate i (of --seeds) is the window starting at --window-start-days +
i x --window-stride-days (default: consecutive windows), sampled with seed --first-seed + i
when --sample < 1, and simulated with that seed. Days are on the trace clock (its first job at
day 0). The windows start where --window-start-days says, never moved: a window with no job to
map is an error that names the first day after it with one (real tables have gaps: the RFold
Philly table has one job on day 0, then none until day 3.08, so the default windows' second,
[0.25, 0.5) days, is empty; the error names day 3.08 and the first start day from which each
of the --seeds windows has a job). Trained agents act through GeoPipeEnv
(about 0.1-0.3 ms a step), so with a checkpoint among the policies a trace window is cut to its
first --max-jobs jobs, 300 unless given (--max-jobs 0: the whole window).
--warmup-previous-window pre-fills SchedMate's retrieval history with the jobs of the window
just before each replicate's (same length, mapped the same way; traces/warmup.py); without it
every window starts with an empty history. The wall time of each policy is printed at the end
(not written: the CSVs depend only on the inputs and seeds).

    # the trained agent on five real RFold 1-day windows (docs/results.md, "Traces")
    python scripts/evaluate.py --policies runs/default/last.zip bace_pipe sjf lcf \\
        --trace philly --trace-file ../shared/traces/philly/rfold_philly_trace.csv.gz \\
        --window-start-days 56 --window-days 1 --seeds 5 --max-jobs 0 --window 8 --cost-weight 0.1

--ray [ADDRESS] runs each (policy, replicate) as a Ray task, on a local Ray instance (no
ADDRESS) or a running cluster ('auto', HOST:PORT; docs/scale.md): the same tables, bit for
bit, and runs.csv gains a last column ray_node naming the node of each row. Checkpoints are
read by the workers at their absolute path, so on several machines they must lie on a shared
file system.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

import baselines
from agents import scale
from agents.evaluation import KEY_COLUMNS, METRICS, REFERENCE, add_ratios, rank, ratio_name
from agents.protocol import check_orders, order_rule_policies, paired_ratio, with_objective
from agents.run import RULE_SETS, add_protocol_orders
from geo_gym import cli
from geo_gym.runner import simulate
from geo_gym.scenarios import scenario_factory
from traces.mapping import MappingOptions, map_trace, select_jobs
from traces.readers import READERS, guess_kind, read_trace
from traces.warmup import simulate_warm

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC_SAMPLES = {
    "philly": ROOT / "traces" / "data" / "synthetic_philly_job_log.json",
    "acme": ROOT / "traces" / "data" / "synthetic_acme_seren.csv",
}
RATIO_NAMES = {metric: ratio_name(metric) for metric in METRICS}  # jct_vs_bace_pipe, ...
AGENT_MAX_JOBS = 300
DAY = 86_400.0
# The flag that sets each MappingOptions field (errors from the mapping are reported in them).
MAPPING_FLAGS = {
    "start": "--window-start-days", "length": "--window-days", "sample": "--sample",
    "sample_seed": "--first-seed", "max_jobs": "--max-jobs", "gpu_only": "--keep-cpu-jobs",
    "compression": "--compression", "target_load": "--target-load",
    "trace_failures": "--no-trace-failures", "start_rule": "--start-rule",
}
# What a checkpoint's settings.json (scripts/train_ppo.py) is checked against: key -> flag.
TRAINING_FLAGS = {
    "scenario": "--scenario", "scenario_kwargs": "--scenario-kwargs", "uncertainty": "--uncertainty",
    "window": "--window", "cost_weight": "--cost-weight", "start_rule": "--start-rule", "rules": "--rules",
}


parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--policies", nargs="+", default=["bace_pipe", "sjf", "lcf", "ldf", "cr_lcf", "cr_ldf", "fcfs", "random"])
parser.add_argument("--algo", choices=["ppo", "maskable-ppo"], default="maskable-ppo", help="for checkpoints")
parser.add_argument("--scenario", default="paper-default")
parser.add_argument("--scenario-kwargs", type=cli.json_object, default={})
parser.add_argument("--warmup-workloads", type=cli.non_negative_int, default=0)
parser.add_argument("--window", type=cli.positive_int, default=8, help="the env's queue window (agents)")
parser.add_argument("--rules", choices=RULE_SETS, default="default",
                    help="the env's placement options per slot (agents; and the protocol's fixed policies): "
                         "default or levels, as the checkpoint was trained with")
parser.add_argument("--cost-weight", type=cli.cost_weight, default=0.1)
parser.add_argument("--start-rule", type=cli.start_rule, default=None,
                    help="how few GPUs a job may start on: memory | any | fraction:X | kstar | request; "
                         "default: the workload's own (memory for scenarios, request for traces)")
parser.add_argument("--seeds", type=cli.positive_int, default=None, help="replicates: 10 for a scenario, 4 for a trace")
parser.add_argument("--first-seed", type=cli.non_negative_int, default=2_000_000, help="training never uses seeds >= 1e6")
parser.add_argument("--out", type=Path, default=Path("out/eval"))
parser.add_argument("--validation-seeds", type=cli.non_negative_int, default=10,
                    help="with a checkpoint among --policies: replicates on which the best queue order x "
                         "placement rule is chosen (scenario seeds from --first-seed + 1e6; for a trace, "
                         "the windows just before the evaluated ones); 0: no best-fixed row")
add_protocol_orders(parser)
parser.add_argument("--plot", action="store_true",
                    help="also write jct_cdf.png, cost.png and schedule_<policy>.png (each policy's "
                         "schedule on the first replicate)")
cli.add_uncertainty_flags(parser, default="perfect")
trace = parser.add_argument_group("traces (docs/traces.md)")
trace.add_argument("--trace", choices=["philly", "acme"], help="evaluate on a trace instead of --scenario")
trace.add_argument("--trace-file", type=Path, help="default: the committed synthetic sample of --trace")
trace.add_argument("--trace-kind", choices=sorted(READERS), default=None,
                   help="the file's format (traces.READERS); default: guessed from the file name")
trace.add_argument("--window-start-days", type=cli.finite_non_negative, default=0.0,
                   help="on the trace clock (first job = day 0); never moved to the first job")
trace.add_argument("--window-days", type=cli.finite_non_negative, default=0.25, help="0: the whole trace")
trace.add_argument("--window-stride-days", type=cli.finite_non_negative, default=None,
                   help="between replicates; default --window-days")
trace.add_argument("--sample", type=cli.fraction, default=1.0, help="fraction of each window's jobs kept, in (0, 1]")
trace.add_argument("--max-jobs", type=cli.non_negative_int, default=None,
                   help=f"first jobs of each window ({AGENT_MAX_JOBS} with agents); 0: all")
trace.add_argument("--compression", type=cli.finite_positive, default=1.0, help="arrival times divided by this")
trace.add_argument("--target-load", type=cli.finite_positive, default=MappingOptions.target_load)
trace.add_argument("--keep-cpu-jobs", action="store_true", help="map CPU-only jobs as 1-GPU jobs")
trace.add_argument("--no-trace-failures", action="store_true", help="ignore the trace's failures")
trace.add_argument("--warmup-previous-window", action="store_true",
                   help="pre-fill the retrieval history with the preceding window's jobs (needs --window-days > 0)")
scale.add_argument(parser)


class BadInput(SystemExit):
    """Exit status 2 (argparse's) for bad input; ``str()`` is the message (already printed)."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def fail(message: str) -> None:
    """Bad input: one line on stderr, exit status 2, no traceback."""
    print(f"evaluate.py: error: {message}", file=sys.stderr)
    raise BadInput(message)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def in_flags(err: Exception) -> str:
    """An error of the Python API in the script's flag names: ``MappingOptions.sample: ...`` ->
    ``--sample: ...`` (the mapping's times are seconds, the flags' days: those are checked by
    the flags' types, so that the API never sees a bad one)."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    return re.sub(r"MappingOptions\.(\w+)", lambda m: MAPPING_FLAGS.get(m.group(1), m.group(0)), text)


def days(value: float) -> str:
    return f"{value:g}"


def policy_spec(name: str) -> str:
    """What a task needs to make the policy: a baseline's name, a checkpoint's absolute path."""
    return str(Path(name).resolve()) if name.endswith(".zip") else name


def make_policy(spec, algo: str):
    """The policy of ``policy_spec(name)``; a checkpoint is loaded once per process. A spec
    that is already a policy (the protocol's order x rule policies) is returned as it is."""
    if not isinstance(spec, str):
        return spec
    if spec.endswith(".zip"):
        from agents.policy import load_agent  # torch only when an agent is evaluated

        return load_agent(spec, algo)
    return baselines.make(spec)


def load_policy(name: str, algo: str):
    if name.endswith(".zip"):
        if not Path(name).is_file():
            fail(f"--policies: checkpoint {name} does not exist")
        try:
            policy = make_policy(policy_spec(name), algo)
        except (TypeError, ValueError, KeyError, EOFError, OSError, zipfile.BadZipFile) as err:
            why = in_flags(err)
            if "zip" in why or not isinstance(err, (TypeError, ValueError)):  # a damaged file
                fail(f"--policies: {name} is not a readable checkpoint ({why})")
            # SB3's words for "another algorithm's checkpoint"
            fail(f"--policies: {name} is not a {algo} checkpoint ({why}); pass --algo ppo or maskable-ppo")
        return f"agent ({name})", policy
    try:
        return name, baselines.make(name)
    except (KeyError, ValueError) as err:
        fail(f"--policies: {in_flags(err)}")


def load_policies(names: list[str], algo: str) -> tuple[dict, dict]:
    """Policies by label: a baseline by its name, a checkpoint as "agent (PATH)"; and each
    label's ``policy_spec``."""
    policies, specs = {}, {}
    for name in names:
        label, policy = load_policy(name, algo)
        if label in policies:
            fail(f"--policies: {name} is given twice")
        policies[label], specs[label] = policy, policy_spec(name)
    return policies, specs


def training_mismatches(checkpoint: str, args) -> tuple[Path, list[str]]:
    """The settings of this evaluation that differ from the checkpoint's training, as read from
    its run folder's settings.json (none when the file, or a key, is missing)."""
    path = Path(checkpoint).parent / "settings.json"
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return path, []
    if not isinstance(saved, dict):
        return path, []
    here = {key: getattr(args, key) for key in TRAINING_FLAGS}
    differ = []
    for key, flag in TRAINING_FLAGS.items():
        if key not in saved:
            continue
        if args.trace and key in ("scenario", "scenario_kwargs"):
            if key == "scenario":
                differ.append(f"trained on --scenario {saved[key]}, evaluated on the {args.trace} trace")
            continue
        if saved[key] != here[key]:
            shown = {k: ("the workload's own" if v is None else json.dumps(v) if isinstance(v, dict) else v)
                     for k, v in (("t", saved[key]), ("e", here[key]))}
            differ.append(f"{flag} {shown['e']} here, {shown['t']} in training")
    return path, differ


def warn_training_mismatches(names: list[str], args) -> None:
    for name in names:
        if name.endswith(".zip"):
            path, differ = training_mismatches(name, args)
            if differ:
                warn(f"agent ({name}) is evaluated on other settings than its training's ({path}): {'; '.join(differ)}")


def check_agents_fit(policies: dict, num_regions: int, window: int, rules: str = "default") -> None:
    """A checkpoint reads observations of the layout it was trained on."""
    from geo_gym.decision import obs_size
    from geo_gym.placement import rule_set

    size = obs_size(num_regions, window, len(rule_set(rules)))
    for label, policy in policies.items():
        model = getattr(policy, "model", None)
        if model is not None and model.observation_space.shape != (size,):
            fail(
                f"--window {window} --rules {rules}: checkpoint {label!r} takes observations of size "
                f"{model.observation_space.shape[0]}, these envs give {size} ({num_regions} regions, "
                f"--window {window}, --rules {rules}): match the --window, --rules (and the region count) "
                "it was trained with"
            )


def empty_window(table: pd.DataFrame, args, i: int, start: float, length: float | None, dropped: dict) -> str:
    """Why replicate i has no job, in the flags' days, and the first day after it that has one."""
    flags = f"--window-start-days {days(args.window_start_days)} --window-days {days(args.window_days)}"
    if args.window_stride_days is not None:
        flags += f" --window-stride-days {days(args.window_stride_days)}"
    if i:
        flags += f" (replicate {i + 1} of --seeds {args.seeds})"
    lo = start / DAY
    span = f"[{days(lo)}, {days((start + length) / DAY)}) days" if length else f"days >= {days(lo)}"
    submitted = int(((table["submit"] >= start) & (table["submit"] < start + (length or math.inf))).sum())
    if submitted == 0:
        what = f"no job submitted in {span}"
    else:
        why = ", ".join(f"{k} {v}" for k, v in dropped.items() if v)
        what = f"no job to map in {span} ({submitted} submitted, dropped: {why})"
        if "not_sampled" in dropped and len(dropped) and all(
                v == 0 for k, v in dropped.items() if k != "not_sampled"):
            return f"{flags} --sample {args.sample:g}: {what}; raise --sample or widen --window-days"
    after, _ = select_jobs(table, MappingOptions(start=start, gpu_only=not args.keep_cpu_jobs))
    after = after[after["submit"] >= start + (length or 0.0)] if length else after
    if after.empty:
        end = float(table["submit"].max()) / DAY if len(table) else 0.0
        return f"{flags}: {what}; the trace has no job to map after day {days(lo)} (its last submit is on day {end:.2f})"
    first = math.floor(float(after["submit"].min()) / DAY * 100) / 100  # the window from there holds it
    stride = args.window_stride_days if args.window_stride_days is not None else args.window_days
    mappable, _ = select_jobs(table, MappingOptions(start=args.window_start_days * DAY, gpu_only=not args.keep_cpu_jobs))
    full = first_full_start(np.sort(mappable["submit"].to_numpy(dtype=float)) / DAY, first, args.seeds, stride,
                            args.window_days)
    hint = (f"try --window-start-days {days(full)} (from there each of the --seeds {args.seeds} windows has a job)"
            if full is not None else f"try --window-start-days {days(first)} with fewer --seeds")
    return f"{flags}: {what}; the first job after day {days(lo)} is on day {days(first)}; {hint}"


def first_full_start(submits: np.ndarray, since: float, n: int, stride: float, length: float) -> float | None:
    """The first start day (a submit day rounded down to 0.01, from ``since``) from which each of
    ``n`` windows of ``length`` days, ``stride`` apart, holds one of the sorted ``submits`` (days)."""
    if not len(submits) or length <= 0:
        return None
    cand = np.unique(np.floor(submits[submits >= since] * 100) / 100)
    ok = np.ones(len(cand), dtype=bool)
    for i in range(n):
        lo = cand + i * stride
        idx = np.searchsorted(submits, lo, side="left")
        ok &= (idx < len(submits)) & (submits[np.minimum(idx, len(submits) - 1)] < lo + length)
    return float(cand[ok][0]) if ok.any() else None


def trace_workloads(args, has_agent: bool) -> tuple[list[tuple[int, object, object]], pd.DataFrame, str]:
    """(seed, Scenario, preceding window's Scenario or None) per replicate, a table describing
    them, and a label for the output."""
    path = args.trace_file or SYNTHETIC_SAMPLES[args.trace]
    synthetic = args.trace_file is None
    if not Path(path).is_file():
        fail(f"--trace-file {path}: {'is not a file' if Path(path).exists() else 'does not exist'}")
    kind = args.trace_kind or guess_kind(path)
    if kind is None:  # the name gives no hint: the trace family's own raw format
        kind = "acme" if args.trace == "acme" else "philly_job_log"
    elif kind.startswith("acme") != (args.trace == "acme"):
        fail(f"--trace {args.trace} with a {kind} file ({path}): fix --trace or give --trace-kind")
    try:
        table = read_trace(path, kind)
    except (OSError, ValueError, KeyError) as err:
        fail(f"--trace-file {path} (--trace-kind {kind}): {in_flags(err)}")
    if args.max_jobs is not None and args.max_jobs < 0:
        fail(f"--max-jobs must be >= 0 (0: the whole window), got {args.max_jobs}")
    max_jobs = args.max_jobs if args.max_jobs is not None else (AGENT_MAX_JOBS if has_agent else None)
    max_jobs = max_jobs or None
    length = args.window_days * DAY if args.window_days > 0 else None
    if args.warmup_previous_window and length is None:
        fail("--warmup-previous-window needs windows (--window-days > 0): the whole trace has no preceding window")
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
        try:
            mapped = map_trace(table, start=start, length=length, **options)
        except ValueError as err:
            if "no job left to map" in str(err):
                _, dropped = select_jobs(table, MappingOptions(start=start, length=length, **options))
                fail(empty_window(table, args, i, start, length, dropped))
            fail(f"--trace-file {path}: {in_flags(err)}")
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
                    fail(f"--warmup-previous-window: {in_flags(err)}")
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


def run_replicate(name: str, spec, algo: str, seed: int, scenario, past, env_kwargs: dict,
                  kwargs: dict, record: bool = False) -> tuple[dict, list, float, object]:
    """One policy on one replicate (a Ray task under --ray): its runs.csv row, its jobs' JCTs,
    the seconds it took and, with ``record``, the recorded result (for its schedule plot)."""
    policy = make_policy(spec, algo)
    t = time.perf_counter()
    if past is not None:
        res = simulate_warm(scenario, past, policy, seed=seed, env_kwargs=env_kwargs, record=record)
    else:
        res = simulate(scenario, policy, seed=seed, env_kwargs=env_kwargs, record=record, **kwargs)
    wall_s = time.perf_counter() - t
    ran = res.jobs["iters"].to_numpy()
    row = {"policy": name, "seed": seed, "jobs": res.summary["num_jobs"],
           **{m: res.summary[m] for m in METRICS}, "gpus_per_job": res.jobs["gpus"].mean(),
           # how far what the scheduler was told is from what the job ran (log ratio)
           "pred_log_err": float(np.abs(np.log(res.jobs["predicted_iters"].to_numpy() / ran)).mean())}
    return row, res.jobs["jct_h"].tolist(), wall_s, res if record else None


def normalise(runs: pd.DataFrame) -> pd.DataFrame:
    """Each metric divided by BACE-Pipe's on the same replicate (NaN where BACE-Pipe's is 0)."""
    return add_ratios(runs, METRICS, REFERENCE)


def plot(table: pd.DataFrame, jcts: dict, out: Path, title: str) -> list[Path]:
    """The JCT CDF of every policy (each its own colour and line style, so that curves that
    coincide stay distinguishable) and the mean total cost; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = plt.get_cmap("tab10").colors
    styles = ["-", "--", "-.", ":"]
    markers = ["o", "s", "^", "v", "D", "x", "+", "*"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    n = len(table)
    for k, name in enumerate(table.index):  # the table's order: best mean JCT first
        v = np.sort(np.asarray(jcts[name], dtype=float))
        if not len(v):
            continue
        # earlier curves wider, with larger hollow markers: a curve drawn over another one
        # (policies that schedule alike) leaves it visible around it
        ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=name, color=colors[k % len(colors)],
                ls=styles[k % len(styles)], lw=1.0 + 2.5 * (n - 1 - k) / max(n - 1, 1),
                marker=markers[k % len(markers)], mfc="none", markevery=max(len(v) // 8, 1),
                ms=4 + 6 * (n - 1 - k) / max(n - 1, 1))
    ax.set_xscale("log")
    ax.set_xlabel("JCT (h)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF: {title}", fontsize=9, wrap=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    cdf = out / "jct_cdf.png"
    fig.savefig(cdf, dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.bar(range(len(table)), table.total_cost, color=[colors[k % len(colors)] for k in range(len(table))])
    ax.set_xticks(range(len(table)), table.index, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("total cost ($), mean over replicates")
    ax.set_title(f"Total cost: {title}", fontsize=9, wrap=True)
    fig.tight_layout()
    cost = out / "cost.png"
    fig.savefig(cost, dpi=110)
    plt.close(fig)
    return [cdf, cost]


def plot_schedules(results: dict, out: Path, title: str) -> list[Path]:
    """<out>/schedule_<policy>.png per policy (``geo_gym.plot_schedule``); returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geo_gym import plot_schedule

    written = []
    for name, res in results.items():
        path = out / f"schedule_{re.sub(r'[^A-Za-z0-9_.-]+', '_', name).strip('_')}.png"
        plt.close(plot_schedule(res, path, title=f"{name}, {title}"))
        written.append(path)
    return written


def short_label(args, replicates: int, first: bool = False) -> str:
    """A plot title that fits: the workload and the replicate count (``first``: the first
    replicate alone)."""
    if args.trace:
        name = Path(args.trace_file).name if args.trace_file else "SYNTHETIC sample"
        if first:
            return f"{args.trace} trace ({name}), window of {days(args.window_days)} d from day {days(args.window_start_days)}"
        return f"{args.trace} trace ({name}), {replicates} window(s) of {days(args.window_days)} d"
    kwargs = f" {json.dumps(args.scenario_kwargs)}" if args.scenario_kwargs else ""
    return f"{args.scenario}{kwargs}, " + (f"seed {args.first_seed}" if first else f"{replicates} seed(s)")


def run_policies(specs: dict, algo: str, workloads: list, env_kwargs: dict, kwargs: dict, tasks,
                 record_first: bool = False):
    """Every policy (by label, its ``policy_spec``) on every workload, as ``tasks.map`` runs them
    (serially, or as Ray tasks): (rows, pooled JCTs, wall time and, with ``record_first``, the
    recorded result of the first workload, each per policy)."""
    calls = [(name, spec, algo, seed, scenario, past, env_kwargs, kwargs, record_first and i == 0)
             for name, spec in specs.items() for i, (seed, scenario, past) in enumerate(workloads)]
    rows, jcts, wall, schedules = [], {}, {}, {}
    for call, (row, jct_h, wall_s, recorded) in zip(calls, tasks.map(run_replicate, calls, "evaluate"), strict=True):
        name = call[0]
        rows.append(row)
        jcts.setdefault(name, []).extend(jct_h)
        wall[name] = wall.get(name, 0.0) + wall_s
        if recorded is not None:
            schedules[name] = recorded
    return rows, jcts, wall, schedules


def best_fixed(args, env_kwargs: dict, kwargs: dict, tasks) -> str | None:
    """The queue order x placement rule (agents/protocol.py) with the lowest mean objective
    (N x avg JCT + cost weight x cost, what the agents are trained on) on the validation
    replicates, which never overlap the evaluated ones; None, with a note, where a trace has
    no room for them before the first evaluated window."""
    n = args.validation_seeds
    if args.trace:
        stride = args.window_stride_days if args.window_stride_days is not None else args.window_days
        start = args.window_start_days - n * stride
        if args.window_days <= 0 or start < 0:
            print(f"note: no best-fixed row: the {n} validation windows would start before the trace "
                  f"(day {start:g}); evaluate later windows or pass --validation-seeds 0")
            return None
        val = argparse.Namespace(**{**vars(args), "window_start_days": start, "seeds": n})
        workloads, _, _ = trace_workloads(val, has_agent=True)
    else:
        first = args.first_seed + 1_000_000
        workloads = [(s, args.scenario, None) for s in range(first, first + n)]
    rows, _, _, _ = run_policies(order_rule_policies(args.protocol_orders, args.rules), args.algo, workloads, env_kwargs,
                                 kwargs, tasks)
    runs = with_objective(pd.DataFrame(rows).rename(columns={"jobs": "num_jobs"}), args.cost_weight)
    means = runs.groupby("policy", sort=False)["objective"].mean()
    print(f"best fixed on {n} validation replicate(s): {means.idxmin()} (objective {means.min():.4g})")
    return str(means.idxmin())


def write_protocol(runs: pd.DataFrame, agents: list[str], best: str, args) -> Path:
    """Each agent against the best fixed policy on the evaluated replicates, seed by seed, in
    the objective it is trained on: the ratio of the means and its bootstrap 95% interval,
    JCT and cost beside it (<out>/protocol.csv)."""
    runs = with_objective(runs.rename(columns={"jobs": "num_jobs"}), args.cost_weight)
    per = runs.pivot(index="seed", columns="policy", values=["objective", "avg_jct_h", "total_cost"])
    out = []
    for agent in agents:
        r = paired_ratio(per["objective"][agent].to_numpy(), per["objective"][best].to_numpy())
        out.append({"agent": agent, "best_fixed": best, "objective_ratio": r["ratio"], "ci_low": r["ci_low"],
                    "ci_high": r["ci_high"], "jct_ratio": per["avg_jct_h"][agent].mean() / per["avg_jct_h"][best].mean(),
                    "cost_ratio": per["total_cost"][agent].mean() / per["total_cost"][best].mean(), "replicates": r["seeds"]})
        print(f"{agent} / {best}: objective {r['ratio']:.3f} (95% CI {r['ci_low']:.3f}-{r['ci_high']:.3f}), "
              f"avg JCT {out[-1]['jct_ratio']:.3f}x, cost {out[-1]['cost_ratio']:.3f}x")
    path = args.out / "protocol.csv"
    pd.DataFrame(out).to_csv(path, index=False)
    return path


def main(args) -> None:
    scale.check_argument(parser, args)
    if not args.trace:
        given = [f"--{k.replace('_', '-')}" for k in ("trace_file", "trace_kind") if getattr(args, k) is not None]
        given += ["--warmup-previous-window"] * args.warmup_previous_window
        if given:
            fail(f"{', '.join(given)}: only with --trace philly|acme")
    elif args.warmup_workloads:
        fail(
            "--warmup-workloads replays draws of the workload itself, which for a trace is the window "
            "being evaluated; use --warmup-previous-window"
        )
    try:
        args.uncertainty = cli.uncertainty_setting(args)
    except ValueError as err:
        fail(str(err))
    try:
        check_orders(args.protocol_orders)
    except ValueError as err:
        fail(f"--protocol-orders: {err}")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail(f"--out {args.out}: {err}")
    warn_training_mismatches(args.policies, args)
    policies, specs = load_policies(args.policies, args.algo)
    if REFERENCE not in policies:
        policies[REFERENCE], specs[REFERENCE] = baselines.make(REFERENCE), REFERENCE  # the reference
    env_kwargs = {
        "uncertainty": args.uncertainty, "warmup_workloads": args.warmup_workloads,
        "window": args.window, "cost_weight": args.cost_weight, "start_rule": args.start_rule,
        "rules": args.rules,
    }
    written = []
    if args.trace:
        args.seeds = 4 if args.seeds is None else args.seeds
        has_agent = any(p.endswith(".zip") for p in args.policies)
        workloads, described, label = trace_workloads(args, has_agent)
        described.to_csv(args.out / "workloads.csv", index=False)
        written.append(args.out / "workloads.csv")
        print(f"workload: {label}")
        print(described.round(3).to_string(index=False))
        if has_agent and args.max_jobs is None:
            print(f"note: a trained agent is evaluated, so each window keeps its first {AGENT_MAX_JOBS} jobs")
        kwargs = {}
        first = workloads[0][1]
    else:
        args.seeds = 10 if args.seeds is None else args.seeds
        workloads = [(s, args.scenario, None) for s in range(args.first_seed, args.first_seed + args.seeds)]
        label = f"scenario {args.scenario} {args.scenario_kwargs or ''}"
        kwargs = {"scenario_kwargs": args.scenario_kwargs}
        try:
            first = scenario_factory(args.scenario, **args.scenario_kwargs)(workloads[0][0])
        except (TypeError, ValueError, KeyError) as err:
            fail(f"--scenario {args.scenario} --scenario-kwargs {json.dumps(args.scenario_kwargs)}: {in_flags(err)}")
    check_agents_fit(policies, first.cluster.num_regions, args.window, args.rules)
    agents = [name for name in policies if name.startswith("agent (")]
    tasks = scale.Tasks(args.ray)
    best = None
    if agents and args.validation_seeds:
        best = best_fixed(args, env_kwargs, kwargs, tasks)
        if best is not None:
            policies[f"best fixed ({best})"] = specs[f"best fixed ({best})"] = order_rule_policies(args.protocol_orders, args.rules)[best]
    rows, jcts, wall, schedules = run_policies(specs, args.algo, workloads, env_kwargs, kwargs, tasks, args.plot)
    runs = normalise(pd.DataFrame(rows))
    runs.insert(0, "workload", label)
    if tasks.nodes:
        runs["ray_node"] = tasks.nodes
    runs.to_csv(args.out / "runs.csv", index=False)
    written.append(args.out / "runs.csv")
    columns = [*METRICS, *RATIO_NAMES.values(), "gpus_per_job", "pred_log_err"]
    table = rank(runs.groupby("policy", sort=False)[columns].mean())
    table.to_csv(args.out / "table.csv")
    written.append(args.out / "table.csv")
    print(f"{label}: {len(workloads)} replicate(s); means over replicates, ranked by avg_jct_h; "
          f"*_vs_{REFERENCE}: ratio to {REFERENCE} replicate by replicate, averaged; "
          f"every metric: {args.out / 'table.csv'}")
    print(table[list(KEY_COLUMNS)].round(3).to_markdown())
    print("wall time per policy (s, all replicates): " + ", ".join(f"{k} {v:.1f}" for k, v in wall.items()))
    if best is not None:
        written.append(write_protocol(runs, agents, f"best fixed ({best})", args))
    if args.plot:
        written += plot(table, jcts, args.out, short_label(args, len(workloads)))
        written += plot_schedules(schedules, args.out, short_label(args, 1, first=True))
    print(f"wrote {len(written)} files to {args.out}/: {', '.join(p.name for p in written)}")


if __name__ == "__main__":
    main(parser.parse_args())
