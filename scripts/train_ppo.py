"""Train a PPO scheduler on GeoPipe and compare it with BACE-Pipe and the other baselines.

    python scripts/train_ppo.py                      # defaults: a few minutes on 2 CPU cores
    python scripts/train_ppo.py --scenario paper-default --uncertainty perfect --warmup-workloads 0 --name paper
    python scripts/train_ppo.py --timesteps 500000 --name long
    python scripts/train_ppo.py --name long --resume  # continue from runs/long/last.zip
    python scripts/train_ppo.py --uncertainty realistic --uncertainty.failure_rate_per_gpu_hour 0.001

The default workload is `recurring` (users resubmitting variants of their jobs, Poisson
arrivals, templates' early ends, 45% on average) under the `realistic` uncertainty preset
(user-estimate predictions, infrastructure failures at the Llama 3 rate, no failure
handler): where fixed heuristics are weakest; --uncertainty.<field> overrides one field of the
preset (one flag per UncertaintyConfig field, listed by --help). Writes runs/<name>/:
TensorBoard logs (tb/: SB3's scalars; rollout/ep_avg_jct_h_mean, rollout/ep_total_cost_mean,
rollout/ep_failures_mean, ... over the training episodes of rollout/ep_rew_mean; eval/ every
--eval-every steps and at the end; the options as the text "settings" and as HParams),
monitor.csv (SB3's VecMonitor: a row per training episode, its return, length, time and
summary), the latest checkpoint (last.zip, every --checkpoint-every steps, each reloaded to
verify it before it replaces the one before, which is kept as previous.zip), eval.csv (agent
vs BACE-Pipe during training) and comparison.csv
(the final table on held-out seeds, which training never sees: seeds >= 1_000_000, with a
"best fixed" row: the best queue order x placement rule chosen on separate validation seeds,
agents/protocol.py), protocol.json (agent / best fixed in the trained objective with a
bootstrap 95% CI over the paired test seeds),
curve.png (the eval.csv curves) and settings.json (the options that define the run).

The same --seed and --torch-threads give the same run; another thread count sums in another
order and gives a different one.

--resume continues runs/<name>/last.zip to --timesteps in all, with the run's own settings
(a differing --scenario, --uncertainty, ... is an error), its TensorBoard logs in the same
tb/ and its evaluations on the same schedule. Its envs restart from seeds derived from --seed
and the steps already done (below the held-out ones), so a resumed run is reproducible but not
identical to an uninterrupted one (the envs' mid-episode state is not in the checkpoint).
A truncated or corrupt last.zip is skipped for previous.zip, with a line naming it.

Without a progress bar (--no-progress, or stdout not a terminal) a line reports the progress
every --checkpoint-every or --eval-every steps, whichever is less, with the agent's held-out
JCT and cost relative to BACE-Pipe after each evaluation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from geo_gym import cli

# One thread: the policy is small (two 128-wide layers over a shared slot encoder). On the
# 2-core machine, measured back to back at 73b681c (learn() steps/s, medians of 3 repeats of
#     python scripts/bench_training.py --threads 1 2 --repeat 3
# and the default run end to end), two threads run learn() 1.1-1.3x faster than one while the
# machine is otherwise idle, but 5-30x slower while other processes use its cores (torch's
# OpenMP threads then wait for each other), which is the shared machine's usual state.
TORCH_THREADS = 1
# torch, SB3 and pandas are imported once the flags are read (main): a bad flag or --help
# answers at once instead of after seconds of imports.
parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--name", default="default", help="run folder under runs/")
parser.add_argument("--scenario", default="recurring")
parser.add_argument("--scenario-kwargs", type=cli.json_object, default={}, help='JSON, e.g. \'{"num_jobs": 16}\'')
parser.add_argument("--algo", choices=["ppo", "maskable-ppo"], default="maskable-ppo")
parser.add_argument("--timesteps", type=cli.positive_int, default=100_000)
parser.add_argument("--num-envs", type=cli.positive_int, default=16)
parser.add_argument("--seed", type=cli.non_negative_int, default=0)
parser.add_argument("--cost-weight", type=cli.cost_weight, default=0.1, help="hours of JCT per dollar in the reward")
parser.add_argument("--window", type=cli.positive_int, default=8)
parser.add_argument("--warmup-workloads", type=cli.non_negative_int, default=2, help="workloads pre-filling the retrieval history")
parser.add_argument("--start-rule", type=cli.start_rule, default="memory",
                    help="how few GPUs a job may start on: memory | any | fraction:X | kstar | request")
parser.add_argument("--n-steps", type=cli.positive_int, default=128, help="rollout length per env")
parser.add_argument("--eval-every", type=cli.positive_int, default=20_000)
parser.add_argument("--eval-seeds", type=cli.positive_int, default=10, help="held-out workloads during training")
parser.add_argument("--final-seeds", type=cli.positive_int, default=30, help="held-out workloads for the final table")
parser.add_argument("--checkpoint-every", type=cli.positive_int, default=10_000)
parser.add_argument("--resume", action="store_true",
                    help="continue from runs/<name>/last.zip (previous.zip if last.zip is broken)")
parser.add_argument("--no-progress", action="store_true", help="no progress bar: a progress line every few steps instead")
parser.add_argument("--torch-threads", type=cli.positive_int, default=TORCH_THREADS,
                    help="torch's intra-op threads (torch.set_num_threads); results are the same for the same "
                         "seed and thread count, not across thread counts")
cli.add_uncertainty_flags(parser, default="realistic")
args = parser.parse_args()
args.uncertainty = cli.parse_uncertainty(parser, args)

HELD_OUT = 1_000_000  # training draws workload seeds from the env rngs seeded with args.seed + i
# The options that define a run: --resume must not change them.
SETTINGS = ("scenario", "scenario_kwargs", "algo", "num_envs", "seed", "cost_weight", "window",
            "uncertainty", "warmup_workloads", "n_steps", "start_rule")


def check_settings(run: Path) -> None:
    """Write the run's settings (fresh run) or check that --resume keeps them."""
    path = run / "settings.json"
    mine = {key: getattr(args, key) for key in SETTINGS}
    if not args.resume:
        path.write_text(json.dumps(mine, indent=1) + "\n")
        return
    if not path.exists():
        return  # a run from before settings were recorded: nothing to compare
    saved = json.loads(path.read_text())
    changed = [f"--{k.replace('_', '-')} {mine[k]!r} (the run has {saved[k]!r})"
               for k in SETTINGS if k in saved and saved[k] != mine[k]]
    if changed:
        raise SystemExit(f"--resume keeps the run's settings; these differ: {'; '.join(changed)}")


def plot_curve(history, path: Path) -> None:
    """Agent vs BACE-Pipe on the held-out evaluation seeds over training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax, key, label in zip(axes, ["avg_jct_h", "total_cost"], ["avg JCT (h)", "total cost ($)"], strict=True):
        ax.plot(history.timesteps, history[f"agent_{key}"], marker="o", label="agent")
        ax.plot(history.timesteps, history[f"bace_{key}"], ls="--", label="BACE-Pipe")
        ax.set_xlabel("timesteps")
        ax.set_ylabel(label)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> None:
    import torch

    torch.set_num_threads(args.torch_threads)  # before any torch work
    import numpy as np
    import pandas as pd

    import baselines
    from agents.evaluation import comparison_table, evaluate
    from agents.policy import AgentPolicy
    from agents.protocol import order_rule_policies, paired_ratio, select_best_fixed, with_objective
    from agents.training import (
        PPO_KWARGS,
        CheckpointError,
        CheckpointLast,
        CompareToBaceCallback,
        EpisodeMetrics,
        ProgressLines,
        RunSettings,
        load_model,
        make_model,
        make_vec_env,
        pick_checkpoint,
        previous_path,
    )

    run = Path("runs") / args.name
    run.mkdir(parents=True, exist_ok=True)
    last = run / "last.zip"
    if args.resume and not last.exists() and not previous_path(last).exists():
        raise SystemExit(f"--resume: no checkpoint at {last}")
    check_settings(run)
    if not args.resume:  # a fresh run under a used name: no stale curves next to the new ones
        for stale in ("eval.csv", "curve.png", "monitor.csv"):
            (run / stale).unlink(missing_ok=True)
    env_kwargs = {
        "window": args.window,
        "cost_weight": args.cost_weight,
        "uncertainty": args.uncertainty,
        "warmup_workloads": args.warmup_workloads,
        "start_rule": args.start_rule,
    }
    env = make_vec_env(args.num_envs, args.scenario, args.scenario_kwargs, seed=args.seed, monitor_dir=run,
                       append=args.resume, **env_kwargs)
    if args.resume:
        try:
            ckpt, note = pick_checkpoint(last)
        except CheckpointError as err:
            raise SystemExit(f"--resume: {err}") from None
        if note:
            print(f"--resume: {note}", flush=True)
        try:
            model = load_model(args.algo, ckpt, env=env)
        except (TypeError, ValueError) as err:  # another algorithm's checkpoint, another layout
            raise SystemExit(f"--resume: {ckpt} does not fit --algo {args.algo} and these envs: {err}") from None
        model.tensorboard_log = str(run / "tb")  # the zip remembers where it was first trained
        # fresh workloads for the resumed part, not a replay of the first ones, from env seeds
        # that stay below the held-out ones whatever the step count
        mixed = np.random.SeedSequence([args.seed, model.num_timesteps]).generate_state(1)[0]
        env.seed(int(mixed) % (HELD_OUT - args.num_envs))
    else:
        model = make_model(args.algo, env, args.seed, str(run / "tb"), n_steps=args.n_steps, **PPO_KWARGS)
    eval_seeds = range(HELD_OUT, HELD_OUT + args.eval_seeds)
    compare = CompareToBaceCallback(args.eval_every, args.scenario, eval_seeds, args.scenario_kwargs, env_kwargs)
    remaining = max(0, args.timesteps - model.num_timesteps)
    callbacks = [RunSettings(vars(args)), EpisodeMetrics(), CheckpointLast(last, args.checkpoint_every), compare]
    progress_bar = not args.no_progress and sys.stdout.isatty()
    if not progress_bar:  # a redirected log still shows where training is
        callbacks.append(ProgressLines(min(args.eval_every, args.checkpoint_every), args.timesteps, compare))
    start = time.time()
    model.learn(
        remaining,
        callback=callbacks,
        reset_num_timesteps=not args.resume,
        progress_bar=progress_bar,
        tb_log_name="ppo",
    )
    train_s = time.time() - start
    if compare.history:
        history = pd.DataFrame(compare.history)
        path = run / "eval.csv"
        if args.resume and path.exists():
            history = pd.concat([pd.read_csv(path), history], ignore_index=True)
        history.to_csv(path, index=False)
        plot_curve(history, run / "curve.png")
    policies = {"agent": AgentPolicy(model)}
    policies.update({n: baselines.make(n) for n in baselines.names()})
    final_seeds = range(HELD_OUT + 10_000, HELD_OUT + 10_000 + args.final_seeds)
    # the strongest fixed policy of the agent's action space, chosen on seeds of its own
    validation_seeds = range(HELD_OUT + 20_000, HELD_OUT + 20_000 + args.final_seeds)
    best, _ = select_best_fixed(args.scenario, validation_seeds, args.cost_weight, args.scenario_kwargs, env_kwargs)
    best_row = f"best fixed ({best})"
    policies[best_row] = order_rule_policies()[best]
    runs = evaluate(policies, args.scenario, final_seeds, args.scenario_kwargs, env_kwargs)
    table = comparison_table(runs)
    table.to_csv(run / "comparison.csv")
    per_seed = with_objective(runs, args.cost_weight).pivot(index="seed", columns="policy")
    paired = paired_ratio(per_seed["objective"]["agent"].to_numpy(), per_seed["objective"][best_row].to_numpy(),
                          seed=args.seed)
    protocol = {
        "best_fixed": best, "validation_seeds": [validation_seeds.start, validation_seeds.stop - 1],
        "test_seeds": [final_seeds.start, final_seeds.stop - 1], "cost_weight": args.cost_weight,
        "objective_ratio": paired,
        "jct_ratio": float(table.loc["agent", "avg_jct_h"] / table.loc[best_row, "avg_jct_h"]),
        "cost_ratio": float(table.loc["agent", "total_cost"] / table.loc[best_row, "total_cost"]),
    }
    (run / "protocol.json").write_text(json.dumps(protocol, indent=1) + "\n")
    print(f"\ntrained {model.num_timesteps} steps in {train_s:.0f} s; held-out seeds {final_seeds.start}..{final_seeds.stop - 1}")
    print(table.round(3).to_markdown())
    print(
        f"\nagent / {best_row}, the best queue order x placement rule on validation seeds "
        f"{validation_seeds.start}..{validation_seeds.stop - 1}, in the trained objective "
        f"(N x avg JCT + {args.cost_weight:g} x cost) on the test seeds: {paired['ratio']:.3f} "
        f"(95% CI {paired['ci_low']:.3f}-{paired['ci_high']:.3f}); avg JCT {protocol['jct_ratio']:.3f}x, "
        f"cost {protocol['cost_ratio']:.3f}x"
    )
    print(f"\nwrote {run}/: " + ", ".join(written(run)))


def written(run: Path) -> list[str]:
    """The run folder's outputs that exist, with their sizes."""
    names = ("last.zip", "previous.zip", "comparison.csv", "protocol.json", "eval.csv", "curve.png", "settings.json",
             "monitor.csv")
    out = [f"{name} ({size_text((run / name).stat().st_size)})" for name in names if (run / name).exists()]
    if (run / "tb").is_dir():
        out.append(f"tb/ ({sum(1 for _ in (run / 'tb').rglob('events.out.tfevents.*'))} TensorBoard event files)")
    return out


def size_text(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB" if size >= 1e3 else f"{size} B"


if __name__ == "__main__":
    main()
