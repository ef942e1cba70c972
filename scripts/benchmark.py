"""The paper's experiments (BACE-Pipe section IV) on the geo_gym cost model.

    python scripts/benchmark.py --out docs/results            # full run (default --out: out/benchmark)
    python scripts/benchmark.py --out /tmp/bench --quick      # smoke run (tests)

Experiments (each over --seeds workload draws of --scenario, default `paper-default`, datasets
drawn per seed; `--scenario geo-wan` runs them with measured WAN links, docs/geo_wan.md):
  main       Fig. 4: BACE-Pipe vs LDF, LCF, CR-LCF, CR-LDF
  bandwidth  Fig. 5: inter-region bandwidth x0.3 / x0.9 / x1.5 (other scales: --bandwidth-scales)
  capacity   Fig. 6: GPU capacity x0.5 / x0.75 / x1.25
  jobs       Fig. 7: 8 / 12 / 16 / 20 / 24 jobs
  ablation   Fig. 8: BACE-Pipe vs w/o Priority, w/o Pathfinder, w/o Cost-Min
Average JCT and total cost are normalised to BACE-Pipe on the same seed; the tables give the
mean and standard deviation over seeds. Writes <out>/<experiment>.csv (one row per run),
<out>/summary.csv, <out>/summary.md and <out>/<experiment>.png. Every experiment runs under
--start-rule (default memory: no job starts on fewer GPUs than its model's memory needs).

    python scripts/benchmark.py --start-rules --out docs/results

runs instead Fig. 4's policies and the ablations on the default setting under each start rule
(memory, any, fraction:0.5, kstar) side by side: start_rules.csv, start_rules_summary.md.

    python scripts/benchmark.py --uncertainty --out docs/results

runs instead the SchedMate experiment on the `recurring` workload (users resubmitting
variants, Poisson arrivals, templates' early ends, 45% on average, 2 warm-up workloads of history): BACE-Pipe and
SJF under oracle / noisy (sigma 1) / user-estimate / schedmate (retrieval) / metadata-only
predictions, with infrastructure failures at the Llama 3 rate and at 10x, the failure handler
off and on, plus schedmate_sjf (retrieval + handler). Writes uncertainty.csv,
uncertainty_summary.csv/.md and uncertainty.png; avg JCT is normalised to the same policy
with oracle predictions and the handler on, same seed and failure rate.

    python scripts/benchmark.py --ray              # each run a Ray task on a local Ray instance
    python scripts/benchmark.py --ray auto         # ... on the cluster `ray start` runs here

--ray [ADDRESS] runs every (policy, seed, setting) as a Ray task (agents/scale.py,
docs/scale.md): the same tables, bit for bit, plus a column ray_node in the per-run CSVs
naming the node that ran each row.
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import baselines  # noqa: E402
from agents import scale  # noqa: E402
from baselines import paper  # noqa: E402
from geo_gym import cli  # noqa: E402
from geo_gym.runner import simulate  # noqa: E402
from geo_gym.scenarios import scenario_knobs, scenario_names  # noqa: E402

SWEPT = {"bandwidth_scale", "capacity_scale", "num_jobs"}  # the knobs of Figs. 5-7

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--out", type=Path, default=Path("out/benchmark"),
                    help="where the CSVs, tables and plots go (the published ones: --out docs/results)")
parser.add_argument("--seeds", type=cli.positive_int, default=20, help="workload draws per setting")
parser.add_argument("--quick", action="store_true", help="2 seeds, fewer settings: a smoke run")
parser.add_argument("--uncertainty", action="store_true", help="run the SchedMate experiment")
parser.add_argument("--scenario", default="paper-default",
                    choices=[n for n in scenario_names() if SWEPT <= set(scenario_knobs(n))],
                    help="the workload and cluster of the paper's experiments "
                         "(the SchedMate experiment always runs on recurring)")
parser.add_argument("--start-rule", type=cli.start_rule, default="memory",
                    help="how few GPUs a job may start on: memory | any | fraction:X | kstar")
parser.add_argument("--bandwidth-scales", type=cli.finite_positive, nargs="+", default=[0.3, 0.9, 1.5],
                    help="the bandwidth experiment's scales of every link (Fig. 5: 0.3 0.9 1.5)")
parser.add_argument("--start-rules", action="store_true",
                    help="run the main comparison and the ablations under each start rule")
scale.add_argument(parser)
args = parser.parse_args()
scale.check_argument(parser, args)
if args.uncertainty and args.start_rules:
    parser.error("--uncertainty and --start-rules are two different experiments: give one")
if args.uncertainty and args.scenario != "paper-default":
    parser.error("--scenario: the SchedMate experiment (--uncertainty) runs on recurring only")

EXPERIMENTS = paper.experiments(args.bandwidth_scales)  # name: (knob, values, policies)
if args.quick:
    args.seeds = 2
    EXPERIMENTS = {name: (k, v[:2], p) for name, (k, v, p) in EXPERIMENTS.items()}


def wrote(*names: str) -> None:
    print(f"wrote {len(names)} files to {args.out}/: {', '.join(names)}")


TASKS = scale.Tasks(args.ray)


def run_experiment(name: str, knob, values, policies, start_rule: str = args.start_rule) -> pd.DataFrame:
    df = paper.run_experiment(args.scenario, name, knob, values, policies, args.seeds, start_rule,
                              run=partial(TASKS.map, leave=False))
    return with_nodes(df)


def with_nodes(df: pd.DataFrame) -> pd.DataFrame:
    """With --ray, the node that ran each row, in a last column ray_node."""
    if TASKS.nodes:
        df["ray_node"] = TASKS.nodes
    return df


def plot(name: str, summary: pd.DataFrame, knob, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, metric, label in zip(axes, ["jct_vs_bace_pipe", "cost_vs_bace_pipe"], ["Avg. JCT", "Total Cost"], strict=True):
        s = summary[summary.experiment == name]
        if knob is None:
            ax.bar(s.policy, s[metric], yerr=s[f"{metric}_std"], capsize=3, color="#4c72b0")
            ax.tick_params(axis="x", rotation=30)
        else:
            for pol, grp in s.groupby("policy", sort=False):
                x = [str(v).split("=")[1] for v in grp.setting]
                ax.errorbar(x, grp[metric], yerr=grp[f"{metric}_std"], marker="o", capsize=3, label=pol)
            ax.set_xlabel(knob)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_ylabel(f"Normalized {label}")
    if knob is not None:
        axes[0].legend(fontsize=7)
    fig.suptitle(f"{args.scenario}: {name} (normalised to BACE-Pipe, mean +- std over seeds)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


PREDICTIONS = {
    "oracle": {"predictor": "oracle"},
    "noisy": {"predictor": "noisy", "predictor_kwargs": {"sigma": 1.0}},
    "user-estimate": {"predictor": "user-estimate"},
    "schedmate": {"predictor": "schedmate"},
    "metadata-only": {"predictor": "metadata-only"},
}
FAILURE_SCALES = [1.0, 10.0]


def uncertainty_run(pol: str, pname: str, failure_scale: float, handler: bool, pkw: dict, seed: int,
                    start_rule: str) -> dict:
    """One run of the SchedMate experiment: its row (before the ratios)."""
    from geo_gym.uncertainty import UncertaintyConfig
    from geo_gym.uncertainty.failures import LLAMA3_RATE_PER_GPU_HOUR

    unc = UncertaintyConfig(
        **pkw,
        failure_rate_per_gpu_hour=LLAMA3_RATE_PER_GPU_HOUR * failure_scale,
        handler=handler,
    )
    res = simulate(
        "recurring", baselines.make(pol), seed=seed,
        env_kwargs={"uncertainty": unc, "warmup_workloads": 2, "start_rule": start_rule},
    )
    j = res.jobs
    return {
        "policy": pol, "prediction": pname, "failure_scale": failure_scale, "handler": handler,
        "seed": seed,
        **{k: res.summary[k] for k in ("avg_jct_h", "total_cost", "avg_wait_h", "failures")},
        "within_100pct": float(((j.predicted_iters - j.iters).abs() / j.iters <= 1.0).mean()),
    }


def run_uncertainty() -> None:
    seeds = 2 if args.quick else args.seeds
    preds = dict(list(PREDICTIONS.items())[:2]) if args.quick else PREDICTIONS
    configs = []
    for failure_scale in FAILURE_SCALES:
        for handler in (False, True):
            for pol in ("bace_pipe", "sjf"):
                for pname, pkw in preds.items():
                    configs.append((pol, pname, failure_scale, handler, pkw))
        configs.append(("schedmate_sjf", "schedmate", failure_scale, True, {}))
    calls = [(*c, s, args.start_rule) for c in configs for s in range(seeds)]
    df = pd.DataFrame(TASKS.map(uncertainty_run, calls, desc="uncertainty"))
    ref = df[(df.prediction == "oracle") & df.handler].set_index(["policy", "failure_scale", "seed"])
    base = df.policy.replace({"schedmate_sjf": "sjf"})
    key = pd.MultiIndex.from_arrays([base, df.failure_scale, df.seed])
    df["jct_vs_oracle"] = df.avg_jct_h.to_numpy() / ref.loc[key, "avg_jct_h"].to_numpy()
    with_nodes(df).to_csv(args.out / "uncertainty.csv", index=False)
    summary = (
        df.groupby(["failure_scale", "handler", "policy", "prediction"], sort=False)
        .agg(avg_jct_h=("avg_jct_h", "mean"), jct_vs_oracle=("jct_vs_oracle", "mean"),
             jct_vs_oracle_std=("jct_vs_oracle", "std"), total_cost=("total_cost", "mean"),
             failures=("failures", "mean"), within_100pct=("within_100pct", "mean"),
             seeds=("seed", "count"))
        .reset_index()
    )
    summary.to_csv(args.out / "uncertainty_summary.csv", index=False)
    (args.out / "uncertainty_summary.md").write_text(summary.round(3).to_markdown(index=False) + "\n")
    fig, axes = plt.subplots(1, len(FAILURE_SCALES), figsize=(10, 3.4), sharey=True)
    for ax, failure_scale in zip(axes, FAILURE_SCALES, strict=True):
        s = summary[summary.failure_scale == failure_scale]
        labels = [f"{p}\n{q}\n{'FH' if h else 'no FH'}" for p, q, h in zip(s.policy, s.prediction, s.handler, strict=True)]
        ax.bar(range(len(s)), s.avg_jct_h, color=["#4c72b0" if h else "#dd8452" for h in s.handler])
        ax.set_xticks(range(len(s)), labels, fontsize=4.5, rotation=90)
        ax.set_title(f"failures x{failure_scale:g} Llama 3 rate", fontsize=8)
    axes[0].set_ylabel("avg JCT (h)")
    fig.tight_layout()
    fig.savefig(args.out / "uncertainty.png", dpi=90)
    plt.close(fig)
    print(summary.round(3).to_string(index=False))
    wrote("uncertainty.csv", "uncertainty_summary.csv", "uncertainty_summary.md", "uncertainty.png")


def run_start_rules() -> None:
    """Fig. 4's policies and the ablations on --scenario under each start rule: the rule
    decides who wins (docs/results.md, "Start rules")."""
    policies = list(paper.MAIN + paper.ABLATION[1:])
    df = pd.concat([run_experiment("start_rules", None, [None], policies, rule) for rule in paper.START_RULES])
    df["setting"] = df["start_rule"]
    df.to_csv(args.out / "start_rules.csv", index=False)
    summary = paper.summarise(df).rename(columns={"setting": "start_rule"}).drop(columns="experiment")
    summary.to_csv(args.out / "start_rules_summary.csv", index=False)
    (args.out / "start_rules_summary.md").write_text(summary.round(3).to_markdown(index=False) + "\n")
    print(summary.round(3).to_string(index=False))
    wrote("start_rules.csv", "start_rules_summary.csv", "start_rules_summary.md")


def main() -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    if args.uncertainty:
        run_uncertainty()
        return
    if args.start_rules:
        run_start_rules()
        return
    summaries = []
    for name, (knob, values, policies) in cli.progress(EXPERIMENTS.items(), desc="experiments", unit="experiments"):
        df = run_experiment(name, knob, values, policies)
        df.to_csv(args.out / f"{name}.csv", index=False)
        summ = paper.summarise(df)
        summaries.append(summ)
        plot(name, summ, knob, args.out / f"{name}.png")
    summary = pd.concat(summaries, ignore_index=True)
    summary.to_csv(args.out / "summary.csv", index=False)
    (args.out / "summary.md").write_text(summary.round(3).to_markdown(index=False) + "\n")
    print(summary.round(3).to_string(index=False))
    wrote(*[f"{name}.csv" for name in EXPERIMENTS], *[f"{name}.png" for name in EXPERIMENTS], "summary.csv", "summary.md")


if __name__ == "__main__":
    main()
