"""Evaluate schedulers side by side on the same workloads.

    python scripts/evaluate.py --policies bace_pipe sjf lcf runs/default/last.zip \
        --scenario recurring --scenario-kwargs '{"population_seed": 5}' --uncertainty realistic \
        --seeds 20 --out out/eval

Policies are baseline names (`baselines.names()`) or paths to trained checkpoints (`.zip`,
loaded with --algo). Prints a table (avg / p50 / p99 JCT, avg queueing, makespan, total cost,
failures; JCT and cost also normalised to BACE-Pipe seed by seed) and writes <out>/runs.csv,
<out>/table.csv, <out>/jct_cdf.png and <out>/cost.png.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from tqdm import tqdm  # noqa: E402

import baselines  # noqa: E402
from agents.evaluation import METRICS  # noqa: E402
from agents.policy import AgentPolicy  # noqa: E402
from agents.training import load_model  # noqa: E402
from geo_gym.runner import simulate  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--policies", nargs="+", default=["bace_pipe", "sjf", "lcf", "ldf", "cr_lcf", "cr_ldf", "fcfs", "random"])
parser.add_argument("--algo", choices=["ppo", "maskable-ppo"], default="maskable-ppo", help="for checkpoints")
parser.add_argument("--scenario", default="paper-default")
parser.add_argument("--scenario-kwargs", type=json.loads, default={})
parser.add_argument("--uncertainty", type=lambda v: json.loads(v) if v.startswith("{") else v, default="perfect",
                    help='a preset (perfect | realistic | schedmate) or JSON, e.g. \'{"preset": "realistic", "predictor": "noisy"}\'')
parser.add_argument("--warmup-workloads", type=int, default=0)
parser.add_argument("--window", type=int, default=8)
parser.add_argument("--cost-weight", type=float, default=0.1)
parser.add_argument("--seeds", type=int, default=10)
parser.add_argument("--first-seed", type=int, default=2_000_000, help="training never uses seeds >= 1e6")
parser.add_argument("--out", type=Path, default=Path("out/eval"))
args = parser.parse_args()


def load_policy(name: str):
    if name.endswith(".zip"):
        if not Path(name).exists():
            raise SystemExit(f"checkpoint {name} does not exist")
        return Path(name).parent.name or name, AgentPolicy(load_model(args.algo, name))
    return name, baselines.make(name)


def main() -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    policies = dict(load_policy(p) for p in args.policies)
    if "bace_pipe" not in policies:
        policies["bace_pipe"] = baselines.make("bace_pipe")  # the reference
    env_kwargs = {
        "uncertainty": args.uncertainty, "warmup_workloads": args.warmup_workloads,
        "window": args.window, "cost_weight": args.cost_weight,
    }
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    rows, jcts = [], {}
    for (name, pol), seed in tqdm([(p, s) for p in policies.items() for s in seeds], desc="evaluate"):
        res = simulate(args.scenario, pol, seed=seed, scenario_kwargs=args.scenario_kwargs, env_kwargs=env_kwargs)
        rows.append({"policy": name, "seed": seed, **{m: res.summary[m] for m in METRICS}, "failures": res.summary["failures"]})
        jcts.setdefault(name, []).extend(res.jobs["jct_h"].tolist())
    runs = pd.DataFrame(rows)
    runs.to_csv(args.out / "runs.csv", index=False)
    ref = runs[runs.policy == "bace_pipe"].set_index("seed")
    runs["jct_vs_bace"] = runs.avg_jct_h.to_numpy() / ref.loc[runs.seed, "avg_jct_h"].to_numpy()
    runs["cost_vs_bace"] = runs.total_cost.to_numpy() / ref.loc[runs.seed, "total_cost"].to_numpy()
    table = runs.groupby("policy", sort=False)[[*METRICS, "failures", "jct_vs_bace", "cost_vs_bace"]].mean()
    table = table.sort_values("jct_vs_bace")
    table.to_csv(args.out / "table.csv")
    print(table.round(3).to_markdown())
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for name, values in jcts.items():
        v = np.sort(values)
        ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (h)")
    ax.set_ylabel("CDF")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(args.out / "jct_cdf.png", dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(table.index, table.total_cost)
    ax.set_ylabel("total cost ($), mean over seeds")
    ax.tick_params(axis="x", rotation=45, labelsize=6)
    fig.tight_layout()
    fig.savefig(args.out / "cost.png", dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()
