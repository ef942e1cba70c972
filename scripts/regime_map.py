"""Regime map: where BACE-Pipe beats the best of the paper's baselines, and where it loses.

    python scripts/regime_map.py                              # default sweep on paper-default (minutes)
    python scripts/regime_map.py --scenario geo-wan --out out/regime_map_geo_wan
    python scripts/regime_map.py --quick --out /tmp/regime    # smoke run (tests)

The sweep is the full product start rule x bandwidth scale x job count x stage overhead x MFU
(per-stage compute: t_comp(L) = work / (L x peak FLOP/s x MFU) + overhead, Table I; the
scenarios' `stage_overhead` and `mfu` knobs). In each cell BACE-Pipe and the paper's four
baselines (LCF, LDF, CR-LCF, CR-LDF) run on the same --seeds workloads (seeds --seed ..
--seed + seeds - 1, the same in every cell), through `agents.evaluation.evaluate`, i.e.
`geo_gym.simulate`. The best baseline is chosen per cell and per metric: the one with the
lowest mean avg JCT over the cell's seeds for the JCT ratio, the lowest mean total cost for the
cost ratio (named in the CSV). Each ratio is BACE-Pipe / best baseline (ratio of the means over
the paired seeds; < 1: BACE-Pipe wins) with a paired bootstrap 95% CI over the seeds
(`agents.protocol.paired_ratio`, seeded with --seed). The best baseline is picked on the same
seeds the ratio is measured on, which favours the baselines: a win is a conservative one. A
policy whose placement rule cannot place some job at all on some seed (it would wait forever:
e.g. CR-LCF under `kstar` on geo-wan, whose path from the cheapest region cannot reach K* over
the WAN links) is named in the row's `stuck` column and is no candidate for best baseline.

Each row also holds the model's quantities that explain it, for the cell's jobs (every seed of
paper-default and geo-wan has the same models): the sum of their GPU targets (K*, Eq. 13) and
of their start minimums over the cluster's GPUs (contention when all are queued at t = 0), the
largest b_j at the target (Eq. 6) and the slowest inter-region link.

Writes <out>/regime_map.csv (a row per cell), <out>/runs.csv (a row per cell, policy and seed),
<out>/summary.md (per start rule: cells won / tied / lost, the ratios' range, the best baselines),
<out>/regime_bandwidth_jobs.png (one panel per start rule: job count x bandwidth scale, at the
stage overhead and MFU nearest the defaults) and <out>/regime_compute.png (one panel per start
rule: stage overhead and MFU x job count, at the bandwidth scale nearest 1); colour: the ratio
on a log scale centred at 1 (blue: BACE-Pipe wins), "*": its 95% CI excludes 1. The default
sweep (432 cells, 21,600 simulations) takes 1.4-1.9 min of CPU; its reading, with the measured
times: docs/results.md, "Regime map".
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402

import baselines  # noqa: E402
from agents.evaluation import evaluate  # noqa: E402
from agents.protocol import paired_ratio  # noqa: E402
from geo_gym import catalog, cli  # noqa: E402
from geo_gym.runner import Unschedulable  # noqa: E402
from geo_gym.scenarios import make_scenario, scenario_knobs, scenario_names  # noqa: E402
from geo_gym.workload import profile_columns  # noqa: E402

SWEPT = {"bandwidth_scale", "num_jobs", "stage_overhead", "mfu"}

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--scenario", default="paper-default",
                    choices=[n for n in scenario_names() if SWEPT <= set(scenario_knobs(n))],
                    help="the workload and cluster (geo-wan: measured WAN links, docs/geo_wan.md)")
parser.add_argument("--out", type=Path, default=Path("out/regime_map"), help="where the CSVs and heatmaps go")
parser.add_argument("--seeds", type=cli.positive_int, default=10, help="workload draws per cell")
parser.add_argument("--seed", type=cli.non_negative_int, default=0,
                    help="the first workload seed, and the bootstrap's seed")
parser.add_argument("--start-rules", type=cli.start_rule, nargs="+",
                    default=["memory", "any", "fraction:0.5", "kstar"],
                    help="how few GPUs a job may start on (geo_gym/start_rule.py); 'request' needs "
                         "jobs with a GPU request, which the sweep's scenarios do not have")
parser.add_argument("--bandwidth-scales", type=cli.finite_positive, nargs="+", default=[0.1, 0.3, 1.0, 3.0],
                    help="scale of every inter-region link")
parser.add_argument("--job-counts", type=cli.positive_int, nargs="+", default=[8, 16, 24],
                    help="jobs queued at t = 0 (Table III's eight models, cycled)")
parser.add_argument("--stage-overheads", type=cli.finite_positive, nargs="+", default=[0.05, 0.15, 0.45],
                    help=f"per-stage, per-micro-batch overhead of t_comp, seconds (default physics: "
                         f"{catalog.DEFAULT_STAGE_OVERHEAD_S:g})")
parser.add_argument("--mfus", type=cli.fraction, nargs="+", default=[0.2, 0.4, 0.6],
                    help=f"model-FLOP utilisation of the A6000's peak (default physics: {catalog.ASSUMED_MFU:g})")
parser.add_argument("--quick", action="store_true",
                    help="2 seeds, the first two start rules, bandwidth scales and job counts, the "
                         "first stage overhead and MFU: a smoke run")
args = parser.parse_args()
if "request" in args.start_rules:
    parser.error("--start-rules: 'request' starts a job on exactly its GPU request, and the jobs of "
                 f"{args.scenario} have none")
AXES = {  # CSV column: swept values (duplicates dropped, order kept)
    "start_rule": list(dict.fromkeys(args.start_rules)),
    "bandwidth_scale": list(dict.fromkeys(args.bandwidth_scales)),
    "num_jobs": list(dict.fromkeys(args.job_counts)),
    "stage_overhead": list(dict.fromkeys(args.stage_overheads)),
    "mfu": list(dict.fromkeys(args.mfus)),
}
if args.quick:
    args.seeds = 2
    AXES = {k: v[:1] if k in ("stage_overhead", "mfu") else v[:2] for k, v in AXES.items()}

REFERENCE = "bace_pipe"
BASELINES = ["lcf", "ldf", "cr_lcf", "cr_ldf"]  # the paper's (Fig. 4); ties go to the earlier
METRICS = {"jct": "avg_jct_h", "cost": "total_cost"}


def model_quantities(rule: str, knobs: dict) -> dict:
    """The cell's contention and bandwidth need, from the profiles of its jobs (seed 0's draw)."""
    scen = make_scenario(args.scenario, 0, start_rule=rule, **knobs)
    cl = scen.cluster
    prof = profile_columns(scen.jobs, cl.gpu, scen.stage_overhead, cl.intra_region_gbps,
                           scen.memory_model, scen.start_rule)
    links = cl.bandwidth[~np.eye(cl.num_regions, dtype=bool)]
    return {
        "target_gpus_over_capacity": float(prof["k_target"].sum() / cl.total_gpus),
        "min_gpus_over_capacity": float(prof["min_gpus"].sum() / cl.total_gpus),
        "max_b_j_gbps": float(prof["b_ref"].max()),  # b_j grows with the stage count: its largest
        "min_link_gbps": float(links.min()),
    }


def run_cell(policies: dict, seeds: range, knobs: dict, rule: str) -> tuple[pd.DataFrame, list[str]]:
    """Every policy on the cell's seeds; a policy that cannot place some job on some seed (its
    rule never finds the GPUs, even on an empty cluster: it would wait forever) is left out and
    named in the second value."""
    frames, stuck = [], []
    for name, policy in policies.items():
        try:
            frames.append(evaluate({name: policy}, args.scenario, seeds, knobs, {"start_rule": rule}))
        except Unschedulable:
            stuck.append(name)
    return pd.concat(frames, ignore_index=True), stuck


def compare(runs: pd.DataFrame, stuck: list[str]) -> dict:
    """BACE-Pipe / best baseline in each metric, over the cell's paired seeds (NaN where
    BACE-Pipe or every baseline is stuck)."""
    means = runs.groupby("policy", sort=False)[list(METRICS.values())].mean()
    by_seed = runs.pivot(index="seed", columns="policy")
    candidates = [b for b in BASELINES if b not in stuck]
    out = {"stuck": ";".join(stuck)}
    for short, metric in METRICS.items():
        if REFERENCE in stuck or not candidates:
            out.update({f"bace_pipe_{metric}": means[metric].get(REFERENCE, np.nan), f"best_{short}_baseline": "",
                        f"best_{short}_baseline_{metric}": np.nan, f"{short}_ratio": np.nan,
                        f"{short}_ci_low": np.nan, f"{short}_ci_high": np.nan, f"{short}_verdict": "unknown"})
            continue
        best = str(means.loc[candidates, metric].idxmin())
        r = paired_ratio(by_seed[metric][REFERENCE].to_numpy(), by_seed[metric][best].to_numpy(), seed=args.seed)
        out.update({
            f"bace_pipe_{metric}": means.loc[REFERENCE, metric],
            f"best_{short}_baseline": best,
            f"best_{short}_baseline_{metric}": means.loc[best, metric],
            f"{short}_ratio": r["ratio"], f"{short}_ci_low": r["ci_low"], f"{short}_ci_high": r["ci_high"],
            f"{short}_verdict": verdict(r["ci_low"], r["ci_high"]),
        })
    return out


def verdict(low: float, high: float) -> str:
    """win / loss when the 95% CI excludes 1 (BACE-Pipe lower / higher), tie when it holds 1,
    unknown with one seed (no interval)."""
    return "unknown" if np.isnan(low) else "win" if high < 1 else "loss" if low > 1 else "tie"


def sweep() -> tuple[pd.DataFrame, pd.DataFrame]:
    policies = {name: baselines.make(name) for name in [REFERENCE, *BASELINES]}
    seeds = range(args.seed, args.seed + args.seeds)
    cells = list(itertools.product(*AXES.values()))
    rows, all_runs = [], []
    for values in cli.progress(cells, desc="regime map", unit="cells"):
        cell = dict(zip(AXES, values, strict=True))
        knobs = {k: v for k, v in cell.items() if k != "start_rule"}
        runs, stuck = run_cell(policies, seeds, knobs, cell["start_rule"])
        all_runs.append(runs.assign(scenario=args.scenario, **cell))
        rows.append({"scenario": args.scenario, **cell, "seeds": args.seeds, **compare(runs, stuck),
                     **model_quantities(cell["start_rule"], knobs)})
    runs = pd.concat(all_runs, ignore_index=True)
    runs = runs[["scenario", *AXES, "policy", "seed", *[c for c in runs.columns if c not in AXES
                                                          and c not in ("scenario", "policy", "seed")]]]
    return pd.DataFrame(rows), runs


def nearest(values: list, target: float):
    return min(values, key=lambda v: (abs(np.log(v / target)), v))


def panel(ax, table: pd.DataFrame, low: pd.DataFrame, high: pd.DataFrame, norm) -> object:
    """One heatmap: the ratio in each cell, "*" where its CI excludes 1."""
    values = table.to_numpy(float)
    im = ax.imshow(values, cmap="RdBu_r", norm=norm, aspect="auto")
    for (i, j), r in np.ndenumerate(values):
        if np.isnan(r):
            ax.text(j, i, "n/a", ha="center", va="center", fontsize=7)
            continue
        mark = "*" if high.iat[i, j] < 1 or low.iat[i, j] > 1 else ""
        shade = abs(np.log(r)) / np.log(norm.vmax)
        ax.text(j, i, f"{r:.2f}{mark}", ha="center", va="center", fontsize=7,
                color="white" if shade > 0.6 else "black")
    ax.set_xticks(range(table.shape[1]), [f"{c:g}" for c in table.columns], fontsize=7)
    labels = [" / ".join(f"{v:g}" for v in i) if isinstance(i, tuple) else f"{i:g}" for i in table.index]
    ax.set_yticks(range(table.shape[0]), labels, fontsize=7)
    return im


def figure(cells: pd.DataFrame, rows: str | list, cols: str, fixed: dict, ylabel: str, xlabel: str,
           path: Path) -> None:
    """2 x (start rules) heatmaps of ``cells`` at ``fixed``: JCT ratios on top, cost below."""
    sel = cells.loc[(cells[list(fixed)] == pd.Series(fixed)).all(axis=1)]
    rules = AXES["start_rule"]
    ratios = sel[["jct_ratio", "cost_ratio"]].to_numpy()
    lim = max(1.1, float(np.exp(np.nanmax(np.abs(np.log(ratios)), initial=0.0))))
    norm = LogNorm(vmin=1 / lim, vmax=lim)
    fig, axes = plt.subplots(2, len(rules), figsize=(2.6 * len(rules) + 1.2, 6.0), squeeze=False,
                             layout="constrained")
    for col, rule in enumerate(rules):
        s = sel[sel.start_rule == rule]
        for row, short in enumerate(METRICS):
            def grid(column, s=s):
                return s.pivot(index=rows, columns=cols, values=column)  # sorted axes
            im = panel(axes[row, col], grid(f"{short}_ratio"), grid(f"{short}_ci_low"), grid(f"{short}_ci_high"),
                       norm)
            axes[row, col].set_title(f"{rule}: {'avg JCT' if short == 'jct' else 'cost'}", fontsize=8)
            axes[row, col].set_xlabel(xlabel, fontsize=7)
            if col == 0:
                axes[row, col].set_ylabel(ylabel, fontsize=7)
    bar = fig.colorbar(im, ax=axes, shrink=0.8)
    ticks = [t for t in (0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0) if 1 / lim <= t <= lim]
    bar.ax.minorticks_off()
    bar.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])
    bar.set_label("BACE-Pipe / best baseline (< 1: BACE-Pipe wins)", fontsize=7)
    fixed_text = ", ".join(f"{k} {v:g}" for k, v in fixed.items())
    fig.suptitle(f"{args.scenario}, {args.seeds} seeds, {fixed_text}; * 95% CI excludes 1", fontsize=8)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def summarise(cells: pd.DataFrame) -> pd.DataFrame:
    """Per start rule: cells won / tied / lost (95% CI), the ratios' range, how often each
    baseline was the best, and the cells where some policy could not place a job."""
    rows = []
    for rule, g in cells.groupby("start_rule", sort=False):
        row = {"start_rule": rule, "cells": len(g)}
        for short in METRICS:
            v = g[f"{short}_verdict"].value_counts()
            row[f"{short} win/tie/loss"] = "/".join(str(v.get(k, 0)) for k in ("win", "tie", "loss"))
            row[f"{short} ratio min-max"] = f"{g[f'{short}_ratio'].min():.3f}-{g[f'{short}_ratio'].max():.3f}"
            best = g[f"best_{short}_baseline"].value_counts()
            row[f"best {short} baseline (cells)"] = ", ".join(f"{k} {n}" for k, n in best.items() if k)
        row["cells with a stuck policy"] = int((g.stuck != "").sum())
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    cells, runs = sweep()
    cells.to_csv(args.out / "regime_map.csv", index=False, float_format="%.6g")  # runs.csv: full precision
    runs.to_csv(args.out / "runs.csv", index=False)
    compute = {"stage_overhead": nearest(AXES["stage_overhead"], catalog.DEFAULT_STAGE_OVERHEAD_S),
               "mfu": nearest(AXES["mfu"], catalog.ASSUMED_MFU)}
    figure(cells, "num_jobs", "bandwidth_scale", compute, "jobs", "bandwidth scale",
           args.out / "regime_bandwidth_jobs.png")
    figure(cells, ["stage_overhead", "mfu"], "num_jobs", {"bandwidth_scale": nearest(AXES["bandwidth_scale"], 1.0)},
           "stage overhead (s) / MFU", "jobs", args.out / "regime_compute.png")
    summary = summarise(cells).to_markdown(index=False)
    (args.out / "summary.md").write_text(summary + "\n")
    print(summary)
    for m in METRICS:
        c = cells[f"{m}_verdict"].value_counts()
        print(f"{m}: BACE-Pipe wins {c.get('win', 0)}, ties {c.get('tie', 0)}, loses {c.get('loss', 0)} "
              f"of {len(cells)} cells (95% CI of BACE-Pipe / best baseline)")
    names = ["regime_map.csv", "runs.csv", "summary.md", "regime_bandwidth_jobs.png", "regime_compute.png"]
    print(f"wrote {len(names)} files to {args.out}/: {', '.join(names)}")


if __name__ == "__main__":
    main()
