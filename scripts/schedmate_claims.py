"""The SchedMate paper's quantitative claims, measured on geo_gym.

    python scripts/schedmate_claims.py --out docs/results          # 20 seeds (a few minutes)
    python scripts/schedmate_claims.py --out /tmp/claims --quick    # smoke run (tests)

Workload: `recurring` (users resubmitting variants of a few templates, each with its own
early-end share, 45% on average, and end point; Poisson arrivals; 2 warm-up workloads of
history for the retrieval store; start rule `memory`), in the `realistic` world: user estimates
for every scheduler that brings no predictor of its own, infrastructure failures at the Llama 3
rate (or --failure-scales times it), a 2 h manual delay without a failure handler, no progress
tracking. Every policy places with Pathfinder + Cost-Min, so only the queue order and what the
scheduler knows differ. Seeds 0..N-1 (--first-seed), the same workloads for every policy.

Schedulers (SchedMate section 5.3, Case Study 3):
  schedmate         SJF on the Scheduling Advisor's retrieval predictions (`schedmate`, k = 3),
                    failure handler off: what the paper credits to duration estimation
  schedmate+FH      the same with the Failure Handler on (`schedmate_sjf`: Table 4's operating
                    point; misjudged application failures are restarted and fail again)
  schedmate+FH p=1  the handler with precision 1 (no false positive), recall as Table 4
  schedmate+FH p=0.3  a poor parser: precision 0.3 (FPR 0.48 instead of 0.066), recall as Table 4
  qssf              Helios' quasi-shortest-service-first (GPUs x predicted duration) on user
                    estimates: Helios' own history-based estimator is not built here
  qssf (retrieval)  QSSF on SchedMate's predictions: the order alone against SJF
  fcfs              Tiresias-like: Tiresias' 2D-LAS orders by attained service and preempts;
                    the core is non-preemptive (paper III-B2), where every queued job that has
                    not run has attained nothing, so LAS is first-come-first-served
  metadata-only     SJF on the metadata-only retrieval preset (k = 400: the mean of the jobs of
                    the same metadata, blind to fates), the stand-in for Lucid's GA2M estimator

Ratios are of mean average JCT (or cost) over the paired seeds, with a seeded bootstrap 95%
interval (agents.protocol.paired_ratio); "x% lower" is 1 - ratio. "within 100%" is the share
of jobs whose predicted iterations are within 100% of what they ran (SchedMate Fig. 12's
metric), pooled over seeds, with a bootstrap interval over seeds. Writes
<out>/schedmate_claims.csv and .md (columns claim, paper, ours, command) and
<out>/schedmate_claims_runs.csv (one row per run).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import baselines
from agents.protocol import paired_ratio
from geo_gym import cli
from geo_gym.runner import simulate
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.uncertainty.handler import TABLE4_F1, TABLE4_PRECISION

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--out", type=Path, default=Path("out/schedmate_claims"), help="where the tables go")
parser.add_argument("--seeds", type=cli.positive_int, default=20, help="workloads per setting")
parser.add_argument("--first-seed", type=cli.non_negative_int, default=0, help="the first workload seed")
parser.add_argument("--failure-scales", type=cli.finite_positive, nargs="+", default=[1.0, 10.0],
                    help="infrastructure failure rates, as multiples of the Llama 3 rate")
parser.add_argument("--quick", action="store_true", help="2 seeds of 20-job workloads, one failure rate")
args = parser.parse_args()
if args.quick:
    args.seeds, args.failure_scales = 2, args.failure_scales[:1]
COMMAND = "python scripts/schedmate_claims.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
SCENARIO_KWARGS = {"num_jobs": 20} if args.quick else {}
REALISTIC = UncertaintyConfig.preset("realistic")
RETRIEVAL = {"predictor": "schedmate"}
# name: (policy, UncertaintyConfig changes to the realistic world)
SCHEDULERS = {
    "schedmate": ("sjf", RETRIEVAL),
    "schedmate+FH": ("sjf", {**RETRIEVAL, "handler": True}),
    "schedmate+FH p=1": ("sjf", {**RETRIEVAL, "handler": True, "handler_precision": 1.0}),
    "schedmate+FH p=0.3": ("sjf", {**RETRIEVAL, "handler": True, "handler_precision": 0.3}),
    "qssf": ("qssf", {}),
    "qssf (retrieval)": ("qssf", RETRIEVAL),
    "fcfs": ("fcfs", {}),
    "metadata-only": ("sjf", {"predictor": "metadata-only"}),
}
AT_FIRST_SCALE_ONLY = ("qssf", "qssf (retrieval)", "fcfs", "metadata-only", "schedmate+FH p=0.3")


def run(name: str, scale: float, seed: int) -> dict:
    policy, changes = SCHEDULERS[name]
    unc = REALISTIC.replace(**changes, failure_rate_per_gpu_hour=REALISTIC.failure_rate_per_gpu_hour * scale)
    res = simulate("recurring", baselines.make(policy), seed=seed, scenario_kwargs=SCENARIO_KWARGS,
                   env_kwargs={"uncertainty": unc, "warmup_workloads": 2})
    j = res.jobs
    return {
        "scheduler": name, "failure_scale": scale, "seed": seed,
        **{k: res.summary[k] for k in ("avg_jct_h", "total_cost", "failures", "false_restarts", "rerun_gpu_h",
                                       "rerun_cost", "num_jobs")},
        "within_100pct": int(((j.predicted_iters - j.iters).abs() / j.iters <= 1.0).sum()),
    }


def seed_bootstrap(hits: np.ndarray, counts: np.ndarray, n_boot: int = 2000) -> tuple[float, float, float]:
    """Pooled share sum(hits) / sum(counts) and its 95% bootstrap interval over seeds (seeded)."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, hits.size, size=(n_boot, hits.size))
    low, high = np.percentile(hits[idx].sum(1) / counts[idx].sum(1), [2.5, 97.5])
    return hits.sum() / counts.sum(), low, high


def ratio_text(r: dict, what: str = "lower avg JCT") -> str:
    pct = 100 * (1 - r["ratio"])
    word = what if pct >= 0 else what.replace("lower", "higher")
    ci = f"95% CI {r['ci_low']:.3f}-{r['ci_high']:.3f}" if r["seeds"] > 1 else "one seed"
    return f"{abs(pct):.1f}% {word} (ratio {r['ratio']:.3f}, {ci}; {r['seeds']} seeds)"


def compare(runs: pd.DataFrame, a: str, b: str, scale: float, metric: str = "avg_jct_h") -> dict:
    """a / b in ``metric`` over the paired seeds at one failure scale."""
    pick = lambda name: runs[(runs.scheduler == name) & (runs.failure_scale == scale)].sort_values("seed")  # noqa: E731
    return paired_ratio(pick(a)[metric].to_numpy(), pick(b)[metric].to_numpy())


def gain_verdict(r: dict, paper_gain: float) -> str:
    """A claimed reduction ``paper_gain`` (0.257 = 25.7% lower): reproduced when ours is lower
    too, its CI excluding no change, within a factor of 2; partly when only lower; not else."""
    gain = 1 - r["ratio"]
    sure = r["seeds"] > 1 and r["ci_high"] < 1
    if sure and 0.5 <= gain / paper_gain <= 2:
        return "reproduced"
    return "partly" if sure else "not"


def claims(runs: pd.DataFrame) -> list[dict]:
    first = args.failure_scales[0]
    at = f"at {first:g}x the Llama 3 failure rate"
    rows = []
    for name, paper, label in (
        ("schedmate", "85.7% (Mars trace, Fig. 12)", "SchedMate retrieval"),
        ("metadata-only", "27.7% (Lucid's GA2M estimator)", "metadata baseline (metadata-only retrieval, k = 400)"),
    ):
        r = runs[(runs.scheduler == name) & (runs.failure_scale == first)]
        share, low, high = seed_bootstrap(r.within_100pct.to_numpy(), r.num_jobs.to_numpy())
        claimed = float(paper.split("%")[0]) / 100
        rows.append({"claim": f"duration estimates within 100% relative error: {label}", "paper": paper,
                     "ours": f"{100 * share:.1f}% (95% CI {100 * low:.1f}-{100 * high:.1f}%; {r.num_jobs.sum()} jobs, {len(r)} seeds)",
                     "verdict": "reproduced" if abs(share - claimed) <= 0.1 else "partly" if abs(share - claimed) <= 0.25 else "not",
                     "why": "jobs recur as variants of their users' templates, so similar finished jobs predict a job's run; "
                            "a metadata-only average over 400 jobs assumes every job runs to completion"})
    vs_qssf, vs_fcfs = compare(runs, "schedmate", "qssf", first), compare(runs, "schedmate", "fcfs", first)
    order = compare(runs, "schedmate", "qssf (retrieval)", first)
    rows += [
        {"claim": f"standalone SchedMate (no failure handler) vs QSSF on user estimates, {at}",
         "paper": "25.7% lower avg JCT", "ours": ratio_text(vs_qssf), "verdict": gain_verdict(vs_qssf, 0.257),
         "why": f"the gain is the predictions' (SJF / QSSF on the same retrieval predictions: {order['ratio']:.3f}); "
                "user estimates here err only through early ends, which 45% of jobs have"},
        {"claim": f"standalone SchedMate (no failure handler) vs Tiresias-like (non-preemptive LAS = FCFS), {at}",
         "paper": "16% lower avg JCT", "ours": ratio_text(vs_fcfs), "verdict": gain_verdict(vs_fcfs, 0.16),
         "why": "the core never preempts, so least-attained-service is FCFS, which any duration-aware order beats "
                "by more on a workload of long and short variants"},
        {"claim": f"SJF vs QSSF, both on SchedMate's retrieval predictions (the order alone), {at}",
         "paper": "-", "ours": ratio_text(order), "verdict": "context", "why": "not a claim of the paper: what the order alone is worth"},
    ]
    for scale in args.failure_scales:
        fh = compare(runs, "schedmate+FH", "schedmate", scale)
        rows.append({"claim": f"the Failure Handler's further gain (SchedMate with / without it) at {scale:g}x the Llama 3 failure rate",
                     "paper": "~12.5% lower avg JCT (Acme failures)", "ours": ratio_text(fh), "verdict": gain_verdict(fh, 0.125),
                     "why": "a recognised failure saves the manual delay (2 h) less the diagnosis (10 min), against job runs "
                            "of about a hundred hours, and a restarted job waits for its memory minimum of GPUs either way"})
    settings = [("schedmate+FH", "Table 4's precision", scale) for scale in args.failure_scales]
    settings.append(("schedmate+FH p=0.3", "precision 0.3", first))
    for name, precision, scale in settings:
        r = runs[(runs.scheduler == name) & (runs.failure_scale == scale)]
        jct = compare(runs, name, "schedmate+FH p=1", scale)
        cost = compare(runs, name, "schedmate+FH p=1", scale, "total_cost")
        rows.append({"claim": f"the handler's false positives: {precision} against precision 1 (same recall) at {scale:g}x the Llama 3 failure rate",
                     "paper": "-",
                     "ours": f"{r.false_restarts.mean():.2f} misjudged application failures restarted per {r.num_jobs.iloc[0]}-job episode, "
                             f"their reruns {r.rerun_gpu_h.mean():.1f} GPU-h and {100 * r.rerun_cost.sum() / r.total_cost.sum():.2f}% of the electricity; "
                             f"against precision 1: {ratio_text(jct)}, {ratio_text(cost, 'lower cost')}",
                     "verdict": "context", "why": "not a claim of the paper: what the handler's false positives cost here"})
    rows.append({"claim": "Failure Parser (Qwen-2.5-7B) precision and F1 on infrastructure failures",
                 "paper": "precision 75.7-78.4%, F1 65-68% (Table 4)",
                 "ours": f"an input, not measured: precision {TABLE4_PRECISION}, F1 {TABLE4_F1} (Table 4's 7B row) fix the handler's operating point",
                 "verdict": "not measured", "why": "the simulator has no failure logs to parse: the parser's operating point is an input"})
    for row in rows:
        row["command"] = COMMAND
    return rows


def main() -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(name, scale, seed) for scale in args.failure_scales for name in SCHEDULERS
            if scale == args.failure_scales[0] or name not in AT_FIRST_SCALE_ONLY
            for seed in range(args.first_seed, args.first_seed + args.seeds)]
    runs = pd.DataFrame([run(*job) for job in cli.progress(jobs, desc="schedmate claims")])
    runs.to_csv(args.out / "schedmate_claims_runs.csv", index=False)
    table = pd.DataFrame(claims(runs), columns=["claim", "paper", "ours", "verdict", "why", "command"])
    table.to_csv(args.out / "schedmate_claims.csv", index=False)
    (args.out / "schedmate_claims.md").write_text(table.to_markdown(index=False) + "\n")
    means = runs.groupby(["failure_scale", "scheduler"], sort=False)[
        ["avg_jct_h", "total_cost", "failures", "false_restarts", "rerun_gpu_h", "rerun_cost"]].mean()
    print(means.round(2).to_string())
    print(table.drop(columns="command").to_string(index=False))
    print(f"wrote schedmate_claims.csv, schedmate_claims.md, schedmate_claims_runs.csv to {args.out}/")


if __name__ == "__main__":
    main()
