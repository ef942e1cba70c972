"""Train a PPO scheduler on GeoPipe and compare it with BACE-Pipe and the other baselines.

    python scripts/train_ppo.py                      # defaults: a few minutes on 2 CPU cores
    python scripts/train_ppo.py --scenario paper-default --uncertainty perfect --warmup-workloads 0 --name paper
    python scripts/train_ppo.py --timesteps 500000 --name long
    python scripts/train_ppo.py --name long --resume  # continue from runs/long/last.zip
    python scripts/train_ppo.py --uncertainty realistic --uncertainty.failure_rate_per_gpu_hour 0.001
    python scripts/train_ppo.py --name bc --bc-steps 32768 --bc-epochs 10 --ent-coef 0   # clone the best fixed policy first
    python scripts/train_ppo.py --name philly --trace ../shared/traces/philly/rfold_philly_trace.csv.gz

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
agents/protocol.py; --protocol-orders names the orders, by default all four: fcfs sjf priority qssf),
protocol.json (the best fixed policy, the orders it was chosen among, agent / best fixed in the
trained objective with a bootstrap 95% CI over the paired test seeds),
curve.png (the eval.csv curves) and settings.json (the options that define the run).

The same --seed and --torch-threads give the same run on one machine; another thread count,
or a CPU whose vector instructions torch uses differ (AVX-512, AVX2, ...), sums in another
order and gives a different one (settings.json records the machine; docs/training.md).

--resume continues runs/<name>/last.zip to --timesteps in all, with the run's own settings
(a differing --scenario, --uncertainty, ... is an error), its TensorBoard logs in the same
tb/ and its evaluations on the same schedule. Its envs restart from seeds derived from --seed
and the steps already done (below the held-out ones), so a resumed run is reproducible but not
identical to an uninterrupted one (the envs' mid-episode state is not in the checkpoint).
A truncated or corrupt last.zip is skipped for previous.zip, with a line naming it.

Without a progress bar (--no-progress, or stdout not a terminal) a line reports the progress
every --checkpoint-every or --eval-every steps, whichever is less, with the agent's held-out
JCT and cost relative to BACE-Pipe after each evaluation.

--bc-steps N: behaviour cloning before PPO (agents/bc.py): N decisions of --bc-teacher (the
protocol's best fixed policy unless named) train the actor and the critic; bc.csv has a row per
pass. Cloning runs at --bc-learning-rate when given, else at --learning-rate; PPO always runs at
--learning-rate (and --clip-range), so cloning can use a normal step and PPO fine-tune at a small one. --trace PATH: training on the windows of the trace's first --train-fraction, the best
fixed policy chosen on later validation windows and the final table on later test windows
(traces/windows.py); protocol.json lists each group's window start days.

The run itself is agents/run.py's ``train_run``; scripts/sweep.py runs several of them (seeds,
learning rates, budgets) as Ray Tune trials.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agents.run import RunError, TrainSettings, add_arguments, parse_args, train_run
from geo_gym import cli

DEFAULT = TrainSettings()
parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--name", default="default", help="run folder under runs/")
parser.add_argument("--timesteps", type=cli.positive_int, default=DEFAULT.timesteps)
parser.add_argument("--seed", type=cli.non_negative_int, default=DEFAULT.seed)
parser.add_argument("--learning-rate", type=cli.finite_positive, default=DEFAULT.learning_rate, help="Adam's step size")
add_arguments(parser)
parser.add_argument("--resume", action="store_true",
                    help="continue from runs/<name>/last.zip (previous.zip if last.zip is broken)")
parser.add_argument("--no-progress", action="store_true", help="no progress bar: a progress line every few steps instead")


def main() -> None:
    args = parse_args(parser)
    progress_bar = not args.no_progress and sys.stdout.isatty()
    try:
        train_run(TrainSettings.of(args), Path("runs") / args.name, resume=args.resume, progress_bar=progress_bar,
                  log=lambda line: print(line, flush=True))
    except RunError as err:
        raise SystemExit(str(err)) from None


if __name__ == "__main__":
    main()
