"""A training sweep: one train_ppo.py run per (seed, learning rate, budget), ranked.

    # 3 seeds x 2 learning rates as Ray Tune trials on a local Ray instance
    python scripts/sweep.py --name lr --seeds 0 1 2 --learning-rates 3e-4 1e-3 --ray
    # the same on a running cluster (`ray start --head` / `ray start --address=...`, docs/scale.md)
    python scripts/sweep.py --name lr --seeds 0 1 2 --learning-rates 3e-4 1e-3 --ray auto
    # without --ray: the trials one after the other in this process (Ray not needed)
    python scripts/sweep.py --name budgets --timesteps 50000 100000

Every trial is a training run of scripts/train_ppo.py (agents/run.py), with the same options
(--scenario, --uncertainty, --num-envs, ..., the same defaults) and the trial's seed, learning
rate and budget, and writes the usual run folder runs/<name>/<trial>/ (trial: e.g.
seed0-lr0.0003-steps100000): last.zip and previous.zip, TensorBoard logs (tb/), eval.csv,
comparison.csv, protocol.json, settings.json. Each trial ends with train_ppo.py's final
table; the sweep then writes runs/<name>/summary.csv and summary.md: a row per trial ranked by
agent / best fixed policy in the trained objective on the held-out test seeds (lower is
better; objective_vs_best_fixed with its bootstrap 95% CI), the agent's JCT and cost over
BACE-Pipe's, the Ray node it finished on, its restarts and the checkpoint it last resumed from.

Under --ray each trial is a Ray Tune trial using --cpus-per-trial CPUs; it reports every
checkpoint it saves to Tune, whose records go to runs/<name>/tune/ (--storage: a path or URI
that every node of a multi-machine cluster reaches, and runs/ must be on a shared file system
there too). A trial whose worker or node is lost is restarted, up to --max-failures times, from
its last checkpoint (as train_ppo.py --resume: reproducible, not identical to an uninterrupted
run). TensorBoard: `tensorboard --logdir runs/<name>` shows every trial.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agents import scale
from agents.run import TrainSettings, add_arguments, parse_args
from agents.sweep import base_settings, grid, run_serial, run_tune, summary
from geo_gym import cli

DEFAULT = TrainSettings()
parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--name", default="sweep", help="the sweep's folder under runs/")
parser.add_argument("--seeds", type=cli.non_negative_int, nargs="+", default=[0, 1])
parser.add_argument("--learning-rates", type=cli.finite_positive, nargs="+", default=[DEFAULT.learning_rate])
parser.add_argument("--timesteps", type=cli.positive_int, nargs="+", default=[DEFAULT.timesteps],
                    help="budgets: total steps of each trial")
add_arguments(parser)
tune_flags = parser.add_argument_group("Ray Tune (with --ray)")
scale.add_argument(tune_flags)
tune_flags.add_argument("--cpus-per-trial", type=cli.positive_float, default=1.0)
tune_flags.add_argument("--max-failures", type=cli.non_negative_int, default=3,
                        help="restarts of a trial whose worker or node is lost")
tune_flags.add_argument("--storage", default=None, help="Tune's records (default runs/<name>/tune)")


def main() -> None:
    args = parse_args(parser)
    scale.check_argument(parser, args)
    trials = grid(args.seeds, args.learning_rates, args.timesteps)
    names = [t["trial"] for t in trials]
    if len(set(names)) != len(names):
        parser.error(f"--seeds/--learning-rates/--timesteps: trials given twice: {sorted(n for n in set(names) if names.count(n) > 1)}")
    root = (Path("runs") / args.name).resolve()
    root.mkdir(parents=True, exist_ok=True)
    base = base_settings(args)
    if args.ray is None:
        rows = run_serial(trials, base, root, log=lambda line: print(line, flush=True))
    else:
        scale.connect(args.ray)
        rows = run_tune(trials, base, root, cpus_per_trial=args.cpus_per_trial, max_failures=args.max_failures,
                        storage=args.storage)
    table = summary(rows)
    table.to_csv(root / "summary.csv", index=False)
    shown = ["rank", "trial", "objective_vs_best_fixed", "ci_low", "ci_high", "jct_vs_bace_pipe", "cost_vs_bace_pipe",
             "timesteps", "restarts"]
    text = table[shown].round(3).to_markdown(index=False)
    (root / "summary.md").write_text(text + "\n")
    print(f"\n{len(table)} trials, ranked by agent / best fixed in the trained objective (lower is better):")
    print(text)
    failed = table[table["error"].notna()]
    for _, row in failed.iterrows():
        print(f"trial {row.trial} failed: {row.error}")
    print(f"wrote {root}/: summary.csv, summary.md, and a run folder per trial")
    if len(failed):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
