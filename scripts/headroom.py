"""How far below the best fixed policy can a scheduler of the agent's action space get?

    python scripts/headroom.py                                   # the default training workload
    python scripts/headroom.py --scenario-kwargs '{"population_seed": 5}' --out out/headroom_pop5
    python scripts/headroom.py --uncertainty perfect --warmup-workloads 0 --out out/headroom_perfect
    python scripts/headroom.py --depth 2 --seeds 10 --processes 2 --out out/headroom_depth2
    python scripts/headroom.py --rules levels --bases best --out out/headroom_levels   # the GPU count in the action

The protocol of scripts/train_ppo.py (agents/protocol.py, the same seeds): every queue order x
placement rule runs on --seeds validation workloads (seeds 1,020,000 on) and the best in the
trained objective (N x avg JCT + --cost-weight x cost) is the best fixed policy; then, on
--seeds test workloads (seeds 1,010,000 on, those of a training run's protocol.json), the best
fixed policy runs beside two rollout policies (agents/rollout.py): at each decision of the env,
each valid action is tried on a copy of the simulator and finished by the best fixed policy
("rollout (best fixed)") or by the best of all order x rule policies ("rollout (all fixed)"; --bases best leaves it out),
and the action that ends best is taken. --rules levels gives the env (and the fixed policies) the
GPU-level placement options (geo_gym/env.py, Action Space). With --depth 2 (or more) only the rollout over the
best fixed policy runs, each candidate finished by the rollout policy of one depth less (a
deeper search: about 300x the time of depth 1 on `recurring`, a minute an episode). With
--blind the rollouts know only what a scheduler may (the jobs submitted so far, their predicted
lengths, no failures to come): a lookahead scheduler one could run, not a yardstick; with
--futures K each candidate is scored by its mean over K sampled futures (other workloads of the
scenario: their jobs submitted after now, as long as the scheduler would be told).

The rollouts run on the simulator's own state, so they know what the agent's observation hides
(arrivals to come, the iterations each job really runs, failures): their lead over the best
fixed policy is an optimistic estimate of what one step of lookahead can gain, a yardstick for
the target of beating the best fixed policy, not a scheduler to deploy.

Writes <out>/runs.csv (a row per policy and test seed), <out>/validation.csv (each order x rule
policy's mean objective on the validation seeds) and <out>/headroom.json: the queue orders the
fixed policies were drawn from (--protocol-orders, by default all four), and per policy the ratio
to the best fixed policy in the objective (ratio of the means over the paired test seeds, with
a seeded bootstrap 95% interval), in avg JCT and in cost. Bad options are one-line errors.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from agents.protocol import (
    check_orders,
    order_rule_policies,
    paired_ratio,
    run_objectives,
    select_best_fixed,
)
from agents.rollout import rollout_episode
from agents.run import HELD_OUT, RULE_SETS, add_protocol_orders
from geo_gym import cli

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--scenario", default="recurring")
parser.add_argument("--scenario-kwargs", type=cli.json_object, default={}, help='JSON, e.g. \'{"population_seed": 5}\'')
cli.add_uncertainty_flags(parser, default="realistic")
parser.add_argument("--warmup-workloads", type=cli.non_negative_int, default=2)
parser.add_argument("--start-rule", type=cli.start_rule, default=None,
                    help="memory | any | fraction:X | kstar | request; default: the scenario's own")
parser.add_argument("--window", type=cli.positive_int, default=8, help="queue slots the env shows (the agent's)")
parser.add_argument("--cost-weight", type=cli.finite_non_negative, default=0.1)
parser.add_argument("--bases", choices=["both", "best"], default="both",
                    help="best: only the rollout over the best fixed policy (not also the one over every order x rule)")
parser.add_argument("--rules", choices=RULE_SETS, default="default",
                    help="the env's placement options per slot (the rollouts' actions and the fixed policies' rules)")
parser.add_argument("--seeds", type=cli.positive_int, default=30, help="validation and test workloads, each")
parser.add_argument("--depth", type=cli.positive_int, default=1, help="rollouts of rollouts: 2 finishes each candidate "
                    "with the depth-1 rollout policy (only the rollout over the best fixed policy runs then)")
parser.add_argument("--blind", action="store_true",
                    help="the rollouts know only what a scheduler may: the jobs submitted so far, their predicted "
                         "lengths, no failures to come (agents/rollout.py's _blind); depth 1")
parser.add_argument("--futures", type=cli.non_negative_int, default=0,
                    help="with --blind: each candidate's objective is its mean over this many sampled futures (other "
                         "workloads of the scenario, their jobs submitted after now), the same for every candidate")
parser.add_argument("--processes", type=cli.positive_int, default=1, help="episodes run in this many processes at once")
add_protocol_orders(parser)
parser.add_argument("--out", type=Path, default=Path("out/headroom"))

TEST = HELD_OUT + 10_000  # agents/run.py's test and validation seeds
VALIDATION = HELD_OUT + 20_000


def main() -> None:
    args = parser.parse_args()
    args.uncertainty = cli.parse_uncertainty(parser, args)
    if args.futures and not args.blind:
        parser.error("--futures needs --blind (the clairvoyant rollouts know the real future)")
    if args.blind and args.depth > 1:
        parser.error("--blind rollouts have depth 1")
    try:
        orders = check_orders(args.protocol_orders)
    except ValueError as err:
        parser.error(f"--protocol-orders: {err}")
    env_kwargs = {"uncertainty": args.uncertainty, "warmup_workloads": args.warmup_workloads,
                  "start_rule": args.start_rule, "window": args.window, "rules": args.rules}
    fixed_kwargs = {k: v for k, v in env_kwargs.items() if k != "window"}  # fixed policies see the whole queue
    try:
        best, validation = select_best_fixed(args.scenario, range(VALIDATION, VALIDATION + args.seeds),
                                             args.cost_weight, args.scenario_kwargs, fixed_kwargs, orders)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    print(f"best fixed policy on {args.seeds} validation seeds: {best}")
    test = range(TEST, TEST + args.seeds)
    family = order_rule_policies(orders, args.rules)
    rows = run_objectives({best: family[best]}, args.scenario, test, args.cost_weight,
                          args.scenario_kwargs, fixed_kwargs).assign(policy=f"best fixed ({best})").to_dict("records")
    rollouts = [("rollout (best fixed)", [best]), ("rollout (all fixed)", list(family))]
    if args.bases == "best":
        rollouts = rollouts[:1]
    if args.depth > 1:
        rollouts = [(f"rollout (best fixed, depth {args.depth})", [best])]
    if args.blind:
        sampled = f", {args.futures} sampled futures" if args.futures else ""
        rollouts = [(f"{label[:-1]}, blind{sampled})", bases) for label, bases in rollouts]
    for label, bases in rollouts:
        t = time.perf_counter()
        episode = partial(rollout_episode, args.scenario, bases=bases, cost_weight=args.cost_weight,
                          scenario_kwargs=args.scenario_kwargs, env_kwargs=env_kwargs, depth=args.depth,
                          clairvoyant=not args.blind, futures=args.futures)
        with ProcessPoolExecutor(args.processes) as pool:
            for seed, run in zip(test, pool.map(episode, test), strict=True):
                rows.append({"policy": label, "seed": seed, **run})
        print(f"{label}: {args.seeds} episodes in {time.perf_counter() - t:.0f} s")
    runs = pd.DataFrame(rows)
    reference = runs[runs.policy == f"best fixed ({best})"].set_index("seed")
    summary = {"best_fixed": best, "orders": list(orders), "rules": args.rules, "test_seeds": [test.start, test.stop - 1],
               "validation_seeds": [VALIDATION, VALIDATION + args.seeds - 1], "cost_weight": args.cost_weight,
               "depth": args.depth, "clairvoyant": not args.blind, "futures": args.futures, "policies": {}}
    lines = []
    for policy, group in runs.groupby("policy", sort=False):
        group = group.set_index("seed").loc[reference.index]
        ratio = paired_ratio(group.objective.to_numpy(), reference.objective.to_numpy())
        jct = float(group.avg_jct_h.mean() / reference.avg_jct_h.mean())
        cost = float(group.total_cost.mean() / reference.total_cost.mean())
        summary["policies"][policy] = {**ratio, "jct_ratio": jct, "cost_ratio": cost}
        lines.append({"policy": policy, "objective / best fixed": f"{ratio['ratio']:.3f}",
                      "95% CI": "-" if np.isnan(ratio["ci_low"]) else f"{ratio['ci_low']:.3f}-{ratio['ci_high']:.3f}",
                      "avg JCT / best fixed": f"{jct:.3f}", "cost / best fixed": f"{cost:.3f}"})
    print(pd.DataFrame(lines).to_string(index=False))
    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / "runs.csv", index=False)
    validation.to_csv(args.out / "validation.csv")
    (args.out / "headroom.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {args.out}/runs.csv, validation.csv, headroom.json")


if __name__ == "__main__":
    main()
