"""The claims ledger: every quantitative claim of the BACE-Pipe and SchedMate papers against the
geo_gym model.

    python scripts/paper_claims.py --out docs/paper_claims.md      # the published ledger
    python scripts/paper_claims.py --quick --out /tmp/claims.md     # smoke run (tests)

Runs the paper's experiments (Figs. 4-8, baselines/paper.py) on `paper-default` under each
start rule (memory, the default; any, the paper's literal reading; fraction:0.5; kstar) and
under memory on `geo-wan` (measured WAN links, docs/geo_wan.md), evaluates Fig. 1's placements,
adds SchedMate's claims (scripts/schedmate_claims.py, run with the same seeds), and writes one
row per claim: the paper's number, ours in each world, a verdict for the default
physics (reproduced: the same direction and magnitude; partly: the direction only, or for some
of the policies; not), the reason in one sentence, and the benchmark command that produces the
same table. The verdicts and reasons are computed from the measured numbers, so the ledger
stays true when the model changes: rerun this command. Writes the markdown to --out and the
same table as CSV beside it. --ray [ADDRESS] runs every simulation as a Ray task on a local
Ray instance or a cluster (docs/scale.md), with the same ledger.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from agents import scale
from baselines import paper
from geo_gym import cli, costmodel
from geo_gym.scenarios import make_scenario
from geo_gym.workload import profile_columns

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--out", type=Path, default=Path("out/paper_claims.md"),
                    help="the ledger (markdown); the CSV goes beside it (the published one: docs/paper_claims.md)")
parser.add_argument("--seeds", type=cli.positive_int, default=20, help="workload draws per setting")
parser.add_argument("--quick", action="store_true",
                    help="2 seeds, start rules memory and any, no geo-wan: a smoke run")
scale.add_argument(parser)
args = parser.parse_args()
scale.check_argument(parser, args)
TASKS = scale.Tasks(args.ray)
if args.quick:
    args.seeds = 2

WORLDS = {  # column: (scenario, start rule)
    "memory": ("paper-default", "memory"),
    "any": ("paper-default", "any"),
    "fraction:0.5": ("paper-default", "fraction:0.5"),
    "kstar": ("paper-default", "kstar"),
    "geo-wan": ("geo-wan", "memory"),
}
if args.quick:
    WORLDS = {k: WORLDS[k] for k in ("memory", "any")}
DEFAULT = "memory"  # the verdicts are for the default physics
BASE = list(paper.BASELINES)
NAMES = {"ldf": "LDF", "lcf": "LCF", "cr_lcf": "CR-LCF", "cr_ldf": "CR-LDF",
         "bace_pipe_no_priority": "w/o Priority", "bace_pipe_no_pathfinder": "w/o Pathfinder",
         "bace_pipe_no_costmin": "w/o Cost-Min"}


# ------------------------------------------------------------------------------ measurements
def run_world(scenario: str, rule: str) -> pd.DataFrame:
    exps = paper.experiments()
    return pd.concat(
        [paper.run_experiment(scenario, name, k, v, p, args.seeds, rule, run=partial(TASKS.map, leave=False))
         for name, (k, v, p) in exps.items()]
    )


def pct(df: pd.DataFrame, exp: str, setting: str, policy: str, metric: str = "jct") -> float:
    """Mean over seeds of ``policy``'s JCT (or cost) over BACE-Pipe's on the same seed, in % above."""
    rows = df[(df.experiment == exp) & (df.setting == setting) & (df.policy == policy)]
    return 100.0 * (rows[f"{metric}_vs_bace_pipe"].mean() - 1.0)


def pair_pct(df: pd.DataFrame, exp: str, setting: str, a: str, b: str) -> float:
    """Mean over seeds of a's average JCT over b's, in % above."""
    rows = df[(df.experiment == exp) & (df.setting == setting)].pivot(index="seed", columns="policy", values="avg_jct_h")
    return 100.0 * ((rows[a] / rows[b]).mean() - 1.0)


def fmt(values) -> str:
    values = np.atleast_1d(values)
    if len(values) == 1:
        return f"{values[0]:+.1f}%"
    return f"{min(values):+.1f}% to {max(values):+.1f}%"


# ------------------------------------------------------------------------------ verdicts
def range_verdict(lo: float, hi: float) -> Callable:
    """Every baseline worse by lo-hi %: reproduced when ours are all worse and the ranges
    overlap, partly when all are worse by other amounts or only some are worse."""
    def verdict(values) -> str:
        values = np.atleast_1d(values)
        worse = values > 0.5
        if worse.all():
            return "reproduced" if values.min() <= hi and values.max() >= lo else "partly"
        return "partly" if worse.any() else "not"
    return verdict


def signed_verdict(*paper_values: float) -> Callable:
    """Each value as the paper's: reproduced within a factor of 2, partly the same sign (and
    at least 0.5 %), not otherwise."""
    def verdict(values) -> str:
        values = np.atleast_1d(values)
        same = [(np.sign(o) == np.sign(p)) and abs(o) >= 0.5 for o, p in zip(values, paper_values, strict=True)]
        close = [s and 0.5 <= o / p <= 2.0 for s, o, p in zip(same, values, paper_values, strict=True)]
        if all(close):
            return "reproduced"
        return "partly" if any(same) else "not"
    return verdict


def holds_verdict(values) -> str:
    """A statement checked case by case: values are booleans."""
    values = np.atleast_1d(values)
    return "reproduced" if values.all() else "partly" if values.any() else "not"


class Claim(NamedTuple):
    where: str
    claim: str
    paper: str
    measure: Callable  # df -> values (a number, an array, or booleans)
    show: Callable  # values -> text
    verdict: Callable  # values -> reproduced | partly | not
    why: Callable  # (values, facts) -> why the default physics differs from the paper
    experiment: str  # the benchmark experiment that produces the numbers
    agree: str = "the model's mechanism is the paper's: see docs/results.md"  # when reproduced


def baselines_pct(exp: str, setting: str, metric: str) -> Callable:
    return lambda df: np.array([pct(df, exp, setting, p, metric) for p in BASE])


def claims() -> list[Claim]:
    """The quantitative claims of section IV (Figs. 4-8), each with how to measure it here.
    ``why`` explains a disagreement under the default physics, ``agree`` an agreement."""
    d = "default"
    no_bind = "bandwidth never binds on Table II: b_j at K* is at most {b_max:.1f} Gbps, links carry at least {link_min:.0f} Gbps"
    return [
        Claim("Abstract, Fig. 4", "baselines' average JCT above BACE-Pipe's", "+27.9% to +64.7%",
              baselines_pct("main", d, "jct"), fmt, range_verdict(27.9, 64.7),
              lambda v, f: "memory makes a big job wait for GPUs instead of starting on leftovers, and " + no_bind.format(**f) + ", so placement cannot make jobs faster; what is left is the order",
              "main", "BACE-Pipe's order starts short jobs first with their K*"),
        Claim("Abstract, Fig. 4", "baselines' total electricity cost above BACE-Pipe's", "+12.6% to +30.6%",
              baselines_pct("main", d, "cost"), fmt, range_verdict(12.6, 30.6),
              lambda v, f: "a job's GPU-hours grow with its stage count (the per-stage overhead of t_comp), and LCF/LDF give jobs min(free, K*) GPUs of one region, often fewer than BACE-Pipe's K*, LCF in the cheapest region",
              "main", "Cost-Min fills the cheapest regions of BACE-Pipe's paths first"),
        Claim("Fig. 4", "BACE-Pipe has the shortest average JCT", "all 4 baselines slower",
              lambda df: np.array([pct(df, "main", d, p) > 0 for p in BASE]),
              lambda v: f"{int(np.sum(v))} of {len(v)} baselines slower", holds_verdict,
              lambda v, f: "some baseline's order or placement finishes jobs sooner: " + no_bind.format(**f),
              "main", "its Eq. (12) order starts short jobs first with their K* while the big ones wait for enough GPUs"),
        Claim("Fig. 4", "Cross-Region Paradox: CR-LDF and CR-LCF above LDF in average JCT", "+28.8%, +13.1%",
              lambda df: np.array([pair_pct(df, "main", d, "cr_ldf", "ldf"), pair_pct(df, "main", d, "cr_lcf", "ldf")]),
              lambda v: f"{v[0]:+.1f}%, {v[1]:+.1f}%", signed_verdict(28.8, 13.1),
              lambda v, f: no_bind.format(**f) + ", so a cross-region path is as fast as one region and spanning regions cannot hurt through bandwidth",
              "main", "the cross-region baselines' first big jobs take many GPUs and hold them"),
        Claim("Fig. 4", "cross-region baselines slower than their single-region versions (CR-LCF > LCF, CR-LDF > LDF)", "both",
              lambda df: np.array([pair_pct(df, "main", d, "cr_lcf", "lcf") > 0.5, pair_pct(df, "main", d, "cr_ldf", "ldf") > 0.5]),
              lambda v: f"CR-LCF > LCF: {'yes' if v[0] else 'no'}; CR-LDF > LDF: {'yes' if v[1] else 'no'}", holds_verdict,
              lambda v, f: "a cross-region baseline gives a job up to K* GPUs at no bandwidth penalty (" + no_bind.format(**f) + ")",
              "main", "the cross-region baselines' first big jobs take many GPUs and hold them"),
        Claim("Fig. 5, 0.3x bandwidth", "LDF and CR-LDF above BACE-Pipe in average JCT", "+10.7%, +26.2%",
              lambda df: np.array([pct(df, "bandwidth", "bandwidth_scale=0.3", p) for p in ("ldf", "cr_ldf")]),
              lambda v: f"{v[0]:+.1f}%, {v[1]:+.1f}%", signed_verdict(10.7, 26.2),
              lambda v, f: f"at 0.3x the slowest link still carries {0.3 * f['link_min']:.0f} Gbps against b_j of at most {f['b_max']:.1f} Gbps, so the gaps are those of Fig. 4",
              "bandwidth"),
        Claim("Fig. 5, 0.3x bandwidth", "baselines' cost above BACE-Pipe's", "+29.2% to +34.9%",
              baselines_pct("bandwidth", "bandwidth_scale=0.3", "cost"), fmt, range_verdict(29.2, 34.9),
              lambda v, f: f"bandwidth does not bind even at 0.3x ({0.3 * f['link_min']:.0f} Gbps against b_j of at most {f['b_max']:.1f} Gbps), so the cost gaps are those of Fig. 4",
              "bandwidth"),
        Claim("Fig. 5, 1.5x bandwidth", "CR-LDF's average JCT and cost over BACE-Pipe's", "3.4x (+240%), +19.0%",
              lambda df: np.array([pct(df, "bandwidth", "bandwidth_scale=1.5", "cr_ldf"), pct(df, "bandwidth", "bandwidth_scale=1.5", "cr_ldf", "cost")]),
              lambda v: f"{v[0]:+.1f}%, {v[1]:+.1f}%", signed_verdict(240.0, 19.0),
              lambda v, f: "more bandwidth changes nothing where none binds (" + no_bind.format(**f) + "): no performance collapse",
              "bandwidth"),
        Claim("Fig. 5, 1.5x bandwidth", "baselines' average JCT above BACE-Pipe's", "+42.9% to +240.3%",
              baselines_pct("bandwidth", "bandwidth_scale=1.5", "jct"), fmt, range_verdict(42.9, 240.3),
              lambda v, f: "more bandwidth changes nothing where none binds, so the gaps are those of Fig. 4",
              "bandwidth"),
        Claim("Fig. 5, 1.5x bandwidth", "baselines' cost above BACE-Pipe's", "+14.3% to +28.5%",
              baselines_pct("bandwidth", "bandwidth_scale=1.5", "cost"), fmt, range_verdict(14.3, 28.5),
              lambda v, f: "more bandwidth changes nothing where none binds, so the cost gaps are those of Fig. 4",
              "bandwidth"),
        Claim("Fig. 5", "BACE-Pipe's JCT lead larger at 1.5x than at 0.3x and 0.9x", "yes",
              lambda df: np.array([np.mean([pct(df, "bandwidth", f"bandwidth_scale={s}", p) for p in BASE]) for s in (0.3, 0.9, 1.5)]),
              lambda v: f"mean baseline gap {v[0]:+.1f}% / {v[1]:+.1f}% / {v[2]:+.1f}% at 0.3x / 0.9x / 1.5x",
              lambda v: "reproduced" if v[2] > max(v[0], v[1]) + 0.5 else "not",
              lambda v, f: "the bandwidth sweep is flat: " + no_bind.format(**f),
              "bandwidth", "more bandwidth lets the cross-region baselines grab more GPUs for the first jobs"),
        Claim("Fig. 6, 0.5x capacity", "baselines' average JCT above BACE-Pipe's", "+32.2% to +69.9%",
              baselines_pct("capacity", "capacity_scale=0.5", "jct"), fmt, range_verdict(32.2, 69.9),
              lambda v, f: "the gaps grow with scarcity as in the paper, from a smaller base: " + no_bind.format(**f),
              "capacity", "with half the GPUs more jobs wait, and the order decides more of the average JCT"),
        Claim("Fig. 6, 0.5x capacity", "the cross-region baselines suffer most", "CR-LCF, CR-LDF the slowest",
              lambda df: np.array([min(pct(df, "capacity", "capacity_scale=0.5", p) for p in ("cr_lcf", "cr_ldf")) >= max(pct(df, "capacity", "capacity_scale=0.5", p) for p in ("lcf", "ldf")) - 1e-9]),
              lambda v: "yes" if v[0] else "no", holds_verdict,
              lambda v, f: "the single-region baselines' jobs wait as long as the cross-region ones' when GPUs are scarce",
              "capacity", "under FCFS a cross-region rule gives the first big jobs up to K* GPUs across regions, and the jobs behind them wait longest"),
        Claim("Fig. 6, 0.5x capacity", "baselines' cost above BACE-Pipe's", "+24.1% to +42.5%",
              baselines_pct("capacity", "capacity_scale=0.5", "cost"), fmt, range_verdict(24.1, 42.5),
              lambda v, f: "single-region baselines run jobs on fewer GPUs than K*, which costs fewer GPU-hours (the per-stage overhead of t_comp)",
              "capacity"),
        Claim("Fig. 6, 0.5x capacity", "LCF costs more than LDF", "yes",
              lambda df: np.array([pct(df, "capacity", "capacity_scale=0.5", "lcf", "cost") > pct(df, "capacity", "capacity_scale=0.5", "ldf", "cost")]),
              lambda v: "yes" if v[0] else "no", holds_verdict,
              lambda v, f: "LCF puts each job in the cheapest region with a free GPU, which here costs less than LDF's largest region",
              "capacity", "LCF's cheapest regions are small, so its jobs run longer"),
        Claim("Fig. 6, 1.25x capacity", "baselines' average JCT above BACE-Pipe's", "+5.5% to +20.7%",
              baselines_pct("capacity", "capacity_scale=1.25", "jct"), fmt, range_verdict(5.5, 20.7),
              lambda v, f: "with GPUs to spare most jobs start at once with their K*, and the policies converge",
              "capacity", "with GPUs to spare the gaps shrink, as in the paper"),
        Claim("Fig. 6, 1.25x capacity", "baselines' cost above BACE-Pipe's", "+0.2% to +9.4%",
              baselines_pct("capacity", "capacity_scale=1.25", "cost"), fmt, range_verdict(0.2, 9.4),
              lambda v, f: "single-region baselines run jobs on fewer GPUs than K*, which costs fewer GPU-hours",
              "capacity"),
        Claim("Fig. 7", "BACE-Pipe has the shortest average JCT at every job count (8-24)", "all 5 counts",
              lambda df: np.array([all(pct(df, "jobs", f"num_jobs={n}", p) > 0 for p in BASE) for n in paper.JOB_COUNTS]),
              lambda v: f"{int(np.sum(v))} of {len(v)} counts", holds_verdict,
              lambda v, f: "at some job counts a baseline's order happens to finish the mix sooner",
              "jobs", "the more jobs queue, the more the Eq. (12) order matters"),
        Claim("Fig. 7", "CR-LDF's JCT gap narrows from 8 to 24 jobs", "+64.7% -> +21.7%",
              lambda df: np.array([pct(df, "jobs", "num_jobs=8", "cr_ldf"), pct(df, "jobs", "num_jobs=24", "cr_ldf")]),
              lambda v: f"{v[0]:+.1f}% -> {v[1]:+.1f}%",
              lambda v: "reproduced" if v[1] < v[0] - 0.5 else "not",
              lambda v, f: "here the gap grows with the job count: more jobs queue behind the big ones that FCFS starts first, and no saturation evens the policies out",
              "jobs", "as the cluster saturates every policy's jobs wait"),
        Claim("Fig. 7, 24 jobs", "baselines' average JCT above BACE-Pipe's", "+9.7% to +23.3%",
              baselines_pct("jobs", "num_jobs=24", "jct"), fmt, range_verdict(9.7, 23.3),
              lambda v, f: "at 24 jobs the order decides most of the JCT, but the gaps differ from the paper's",
              "jobs", "at 24 jobs the queue is long and the order decides most of the JCT"),
        Claim("Fig. 7, 20-24 jobs", "BACE-Pipe's cost advantage over CR-LCF shrinks to about 1%", "about +1%",
              lambda df: np.array([pct(df, "jobs", f"num_jobs={n}", "cr_lcf", "cost") for n in (20, 24)]),
              fmt, signed_verdict(1.0, 1.0),
              lambda v, f: f"CR-LCF gives its jobs their K* as BACE-Pipe does and fills the cheapest regions first: its cost is {fmt(v)} from BACE-Pipe's",
              "jobs", "with every GPU busy the average price converges to the cluster's"),
        Claim("Fig. 8", "w/o Pathfinder: average JCT and cost above BACE-Pipe's", "+52.5%, +20.5%",
              lambda df: np.array([pct(df, "ablation", d, "bace_pipe_no_pathfinder"), pct(df, "ablation", d, "bace_pipe_no_pathfinder", "cost")]),
              lambda v: f"{v[0]:+.1f}%, {v[1]:+.1f}%", signed_verdict(52.5, 20.5),
              lambda v, f: "the CR-LDF path reaches the same GPU counts as the Pathfinder when no link binds (" + no_bind.format(**f) + "), so JCT cannot change; only the regions (prices) differ",
              "ablation"),
        Claim("Fig. 8", "w/o Priority (FCFS): average JCT and cost above BACE-Pipe's", "+41.9%, +5.0%",
              lambda df: np.array([pct(df, "ablation", d, "bace_pipe_no_priority"), pct(df, "ablation", d, "bace_pipe_no_priority", "cost")]),
              lambda v: f"{v[0]:+.1f}%, {v[1]:+.1f}%", signed_verdict(41.9, 5.0),
              lambda v, f: "with 8 jobs queued at t = 0 and memory making the big ones wait either way, the order moves the average JCT by a few percent",
              "ablation"),
        Claim("Fig. 8", "w/o Cost-Min (uniform allocation): average JCT and cost above BACE-Pipe's", "+4.6%, +13.9%",
              lambda df: np.array([pct(df, "ablation", d, "bace_pipe_no_costmin"), pct(df, "ablation", d, "bace_pipe_no_costmin", "cost")]),
              lambda v: f"{v[0]:+.1f}%, {v[1]:+.1f}%", signed_verdict(4.6, 13.9),
              lambda v, f: "allocating along a path uniformly or by price gives the same GPU counts, so JCT cannot change, and the paths' regions differ little in price",
              "ablation"),
        Claim("Fig. 8", "Pathfinder is the most important component (largest JCT increase when removed)", "Pathfinder > Priority > Cost-Min",
              lambda df: np.array([pct(df, "ablation", d, p) for p in ("bace_pipe_no_pathfinder", "bace_pipe_no_priority", "bace_pipe_no_costmin")]),
              lambda v: " > ".join(f"{n} {-x:+.1f}%" for x, n in sorted(zip(-v, ("Pathfinder", "Priority", "Cost-Min"), strict=True))),
              lambda v: "reproduced" if v[0] > v[1] + 0.5 and v[1] > v[2] + 0.5 else "partly" if v[0] > max(v[1], v[2]) + 0.5 else "not",
              lambda v, f: "without a binding link the Pathfinder finds nothing CR-LDF misses (" + no_bind.format(**f) + ")",
              "ablation"),
    ]


# ------------------------------------------------------------------------------ Fig. 1
def fig1_rows(facts: dict) -> list[dict]:
    """Fig. 1's narrative under the cost model: its absolute numbers, its JCT ordering, and the
    two places where it contradicts the paper's own equations."""
    df = paper.fig1().set_index("strategy")
    # Section I's example: the same job, same GPU-hours, moved from the UK's $0.35/kWh to the
    # US's $0.12 or China's $0.08 (Eq. 4 is linear in the price)
    uk, us, cn = (costmodel.energy_cost(1.0, [1], [p]) for p in (0.35, 0.12, 0.08))
    cheaper = (100 * (1 - us / uk), 100 * (1 - cn / uk))
    rows = [{
        "where": "Section I", "claim": "moving a job's stages from the UK ($0.35/kWh) to the US ($0.12) or China ($0.08) without slowing it",
        "paper": "about 65% to 77% cheaper", "ours": f"{cheaper[0]:.1f}% to {cheaper[1]:.1f}% cheaper (Eq. 4 at equal GPU-hours)",
        "verdict": "reproduced" if abs(cheaper[0] - 65) <= 2 and abs(cheaper[1] - 77) <= 2 else "not",
        "why": "Eq. (4) is linear in the price, so at equal GPU-hours the saving is one minus the price ratio",
        "command": "`python scripts/paper_claims.py` (arithmetic on Eq. 4)",
    }]
    cmd = "`python scripts/fig1.py`"
    for name, (jct, cost) in paper.FIG1_PAPER.items():
        ours = df.loc[name]
        ok = abs(ours.avg_jct_h / jct - 1) <= 0.1 and abs(ours.total_cost_usd / cost - 1) <= 0.1
        rows.append({
            "where": "Fig. 1", "claim": f"{name}: average JCT and cost", "paper": f"{jct:.2f} h, ${cost:.2f}",
            "ours": f"{ours.avg_jct_h:.2f} h, ${ours.total_cost_usd:.2f}", "verdict": "reproduced" if ok else "not",
            "why": (f"{ours.avg_jct_h / jct:.0f}x the paper's time: the paper states no sequence length, epochs or FLOP rate, and one epoch of Alpaca-52k at 2,048 tokens per sample is {facts['fig1_pflop']:,.0f} PFLOP for Qwen2.5-14B"
                    + (f"; GPU memory forbids it ({ours.memory})" if ours.memory != "fits" else "")
                    + (f"; Eq. (6) refuses it ({ours.eq6_violations})" if ours.eq6_violations != "none" else "")),
            "command": cmd,
        })
    order = list(df.avg_jct_h.sort_values(ascending=False).index)
    want = ["LCF", "LDF", "Ours (FCFS)", "Ours (Reordered)"]
    rows.append({
        "where": "Fig. 1", "claim": "average JCT ordering", "paper": " > ".join(want), "ours": " > ".join(order),
        "verdict": "reproduced" if order == want else "not",
        "why": "the strategies that give jobs more GPUs finish sooner, in the same order as the paper's",
        "command": cmd,
    })
    red = 100.0 * (1 - df.loc["Ours (Reordered)"].avg_jct_h / df.loc["Ours (FCFS)"].avg_jct_h)
    cheaper = df.loc["Ours (Reordered)"].total_cost_usd < df.loc["Ours (FCFS)"].total_cost_usd
    rows.append({
        "where": "Fig. 1", "claim": "reordering: average JCT shorter than Ours (FCFS), and cheaper", "paper": "-40.9%, cheaper",
        "ours": f"-{red:.1f}%, {'cheaper' if cheaper else 'dearer'}",
        "verdict": "reproduced" if 20.45 <= red <= 81.8 and cheaper else "partly" if red > 0.5 else "not",
        "why": "the reordered plan runs both jobs on more GPUs, but its 10 GPUs run longer at the pace of P's 200 Mbps B-D link",
        "command": cmd,
    })
    rows.append({
        "where": "Fig. 1 vs Eq. (12)", "claim": "BACE-Pipe's order schedules Q before P (the reordered plan)", "paper": "Q first",
        "ours": f"priority at alpha = 0: P {facts['prio_P']:.2f}, Q {facts['prio_Q']:.2f}: {'P' if facts['prio_P'] > facts['prio_Q'] else 'Q'} first",
        "verdict": "reproduced" if facts["prio_Q"] > facts["prio_P"] else "not",
        "why": "with nothing running alpha = 0 and Eq. (12) ranks by 1 - I_j (Eq. 9): the job with the shorter single-GPU run, P, goes first, the FCFS order the paper says reordering improves on",
        "command": "`python -c \"from baselines.paper import fig1_profiles; print(fig1_profiles())\"`",
    })
    rows.append({
        "where": "Fig. 1 vs Eq. (6)", "claim": "Q (large activations) needs the fast link; P tolerates 200 Mbps", "paper": "b_Q > b_P",
        "ours": f"b_P = {facts['b_P']:.2f} Gbps on 4 GPUs, b_Q = {facts['b_Q']:.2f} Gbps on 6",
        "verdict": "reproduced" if facts["b_Q"] > facts["b_P"] and facts["b_P"] <= 0.2 else "not",
        "why": "b_j = A_j / t_comp(L) (Eq. 6): Llama-3.1-70B has larger activations but a longer t_comp per stage (more work per layer), so P needs more bandwidth than Q and breaks Eq. (6) on the 0.2 Gbps B-D link",
        "command": "`python scripts/fig1.py`",
    })
    return rows


def model_facts() -> dict:
    """Numbers the reasons quote, measured from the model."""
    scen = make_scenario("paper-default", seed=0)
    cl = scen.cluster
    prof = profile_columns(scen.jobs, cl.gpu, scen.stage_overhead, cl.intra_region_gbps, scen.memory_model, scen.start_rule)
    bw = cl.bandwidth[~np.eye(cl.num_regions, dtype=bool)]
    profs = paper.fig1_profiles()
    (_, p), (_, q) = profs["P"], profs["Q"]
    e1_max = max(p.e1, q.e1)
    p_job = profs["P"][0]
    # forward and backward (twice the forward, Eq. 1's compute model) over one epoch
    flop = 2.0 * costmodel.forward_flops(p_job.model.params, p_job.epochs * p_job.dataset.samples * p_job.seq_len)
    return {
        "b_max": float(prof["b_ref"].max()),
        "link_min": float(bw[bw > 0].min()),
        "prio_P": costmodel.priority(costmodel.intensity(p.e1, e1_max), 0.0, 0.0),
        "prio_Q": costmodel.priority(costmodel.intensity(q.e1, e1_max), 0.0, 0.0),
        "b_P": p.b_j(4),
        "b_Q": q.b_j(6),
        "fig1_pflop": flop / 1e15,
    }


# ------------------------------------------------------------------------------ the ledger
def world_command(world: str) -> str:
    scenario, rule = WORLDS[world]
    scen = "" if scenario == "paper-default" else f" --scenario {scenario}"
    return f"python scripts/benchmark.py{scen} --start-rule {rule} --seeds {args.seeds}"


def section_rows() -> pd.DataFrame:
    """Figs. 4-8: one row per claim, ours in every world, the verdict for the default."""
    runs = {world: run_world(*spec) for world, spec in cli.progress(WORLDS.items(), desc="worlds", unit="worlds")}
    facts = model_facts()
    rows = []
    for c in claims():
        values = {world: c.measure(df) for world, df in runs.items()}
        verdict = c.verdict(values[DEFAULT])
        rows.append({
            "where": c.where, "claim": c.claim, "paper": c.paper,
            **{f"ours ({w})": c.show(v) for w, v in values.items()},
            "verdict": verdict, "why": c.agree if verdict == "reproduced" else c.why(values[DEFAULT], facts),
            "experiment": c.experiment,
        })
    return pd.DataFrame(rows)


def schedmate_rows() -> tuple[pd.DataFrame, str]:
    """SchedMate's claims, from scripts/schedmate_claims.py (run here with the same seeds)."""
    cmd = [sys.executable, str(Path(__file__).with_name("schedmate_claims.py")), "--seeds", str(args.seeds)]
    cmd += ["--quick"] if args.quick else []
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([*cmd, "--out", tmp], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"scripts/schedmate_claims.py failed:\n{out.stderr[-3000:]}")
        table = pd.read_csv(Path(tmp) / "schedmate_claims.csv")
    shown = "python scripts/schedmate_claims.py" + ("" if args.seeds == 20 else f" --seeds {args.seeds}") + (" --quick" if args.quick else "")
    return table.drop(columns="command"), shown


def main() -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figs = section_rows()
    fig1 = pd.DataFrame(fig1_rows(model_facts()))
    sched, sched_cmd = schedmate_rows()
    both = pd.concat([figs.assign(section="Figs. 4-8"), fig1.assign(section="Fig. 1"), sched.assign(section="SchedMate")])
    both.to_csv(args.out.with_suffix(".csv"), index=False)
    counts = both.verdict.value_counts()
    claimed = int(both.verdict.isin(["reproduced", "partly", "not"]).sum())
    seeds = "" if args.seeds == 20 else f" --seeds {args.seeds}"
    text = [
        "# The papers' claims against the geo_gym model",
        "",
        f"Generated by `python scripts/paper_claims.py --out {args.out}{seeds}` ({args.seeds} seeds per",
        "setting; every number below comes from that command). Verdicts are for the default physics",
        "(start rule `memory` on `paper-default`: no job starts on fewer GPUs than its model's memory",
        "needs): reproduced (the same direction, within a factor of 2, or the ranges overlap), partly",
        "(the direction only, or for some of the policies), not. The reasons are computed from the",
        "same measurements. Nothing was tuned toward or away from the paper.",
        "",
        f"Verdicts: {', '.join(f'{counts.get(v, 0)} {v}' for v in ('reproduced', 'partly', 'not'))} "
        f"of {claimed} claims measured ({counts.get('not measured', 0)} not measurable here; "
        f"{counts.get('context', 0)} context rows that are not claims).",
        "",
        "## BACE-Pipe, section IV (Figs. 4-8)",
        "",
        "Ours: means over seeds of each policy's average JCT (or total cost) over BACE-Pipe's on the",
        "same workload, in % above BACE-Pipe, on `paper-default` under each start rule (`any` is the",
        "paper's literal reading: a job may start on one GPU) and under `memory` on `geo-wan`",
        "(inter-region links as measured between cloud regions, docs/geo_wan.md). The column",
        "`experiment` names the table of `scripts/benchmark.py` that holds the same numbers:",
        "",
        *[f"- ours ({w}): `{world_command(w)}`" for w in WORLDS],
        "",
        figs.to_markdown(index=False),
        "",
        "## BACE-Pipe, section I and Fig. 1 (section II-B)",
        "",
        "Section I's price example, the four placements of the paper's motivating example, under the cost model alone (both",
        "jobs start at t = 0; `baselines.paper.fig1`), and the two places where the narrative",
        "contradicts the paper's own equations. Commands per row.",
        "",
        fig1.rename(columns={"command": "measured by"}).to_markdown(index=False),
        "",
        "## SchedMate (sections 3 and 5)",
        "",
        f"From `{sched_cmd}` (the `recurring` workload under realistic uncertainty; how it is built,",
        "and what each row compares: docs/results.md, \"SchedMate's claims\"). Reproduced: within 10",
        "points for shares; for a reduction, ours lower with its 95% CI excluding no change and within",
        "a factor of 2 of the paper's; partly: lower only.",
        "",
        sched.to_markdown(index=False),
        "",
    ]
    args.out.write_text("\n".join(text))
    print(f"{claimed} claims: {dict(counts)}; wrote {args.out} and {args.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()
