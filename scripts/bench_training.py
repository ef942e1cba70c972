"""Training speed per torch thread count: learn() steps per second of the default run's model
and envs (scripts/train_ppo.py), one forward pass, and the start-up imports.

    python scripts/bench_training.py                            # threads 1 and 2, 3 repeats
    python scripts/bench_training.py --threads 1 2 --steps 8192 --repeat 5
    python scripts/bench_training.py --trees /tmp/before . --threads 1 2   # two checkouts

Every measurement runs in a fresh process (torch's thread pool and its imports are per
process): it imports what training needs ("import s": torch, SB3, pandas, the project), sets
``torch.set_num_threads``, builds the default run's 16 envs and model, runs one rollout to warm
up (numba's cache, first allocations), then times ``model.learn(--steps)`` ("steps/s") and the
agent's action for one batch of the 16 envs' observations ("predict ms", median of 200), and
says whether ``torch._dynamo`` got imported. Each repeat runs every (tree, thread count) once,
back to back, so on a shared machine compare the ratios within a repeat, and the medians; the
load average at each start is printed beside them. ``--trees`` runs the same children with
another checkout first on ``PYTHONPATH`` (e.g. the commit before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from geo_gym import cli

ROOT = Path(__file__).resolve().parents[1]


def child(threads: int, steps: int) -> dict:
    """One measurement, in this (fresh) process."""
    start = time.perf_counter()
    import numpy as np
    import torch

    torch.set_num_threads(threads)
    import pandas  # noqa: F401  (train_ppo.py imports it)

    import agents.training as training
    from agents.policy import AgentPolicy

    import_s = time.perf_counter() - start
    # trees from before agents.training.PPO_KWARGS passed these in train_ppo.py
    ppo_kwargs = getattr(training, "PPO_KWARGS", {"batch_size": 256, "learning_rate": 3e-4, "ent_coef": 0.01,
                                                  "gamma": 1.0, "gae_lambda": 0.95})
    env = training.make_vec_env(16, "recurring", None, seed=0, window=8, cost_weight=0.1, uncertainty="realistic",
                                warmup_workloads=2, start_rule="memory")
    model = training.make_model("maskable-ppo", env, 0, None, n_steps=128, **ppo_kwargs)
    model.learn(128 * 16)  # warm-up: one rollout and one update
    begin = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    learn_s = time.perf_counter() - begin
    obs = env.reset()
    policy = AgentPolicy(model)
    times = []
    for _ in range(200):
        begin = time.perf_counter()
        policy.predict(obs)
        times.append(time.perf_counter() - begin)
    return {"threads": threads, "import_s": import_s, "steps_per_s": steps / learn_s, "learn_s": learn_s,
            "predict_ms": 1e3 * float(np.median(times)), "dynamo": "torch._dynamo" in sys.modules}


def run_child(tree: Path, threads: int, steps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    load = os.getloadavg()[0]
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(threads), "--steps", str(steps)],
                         capture_output=True, text=True, env=env, cwd=tree)
    if out.returncode != 0:
        raise SystemExit(f"bench_training.py: the child for {tree} with {threads} thread(s) failed:\n{out.stderr[-3000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    return {"tree": str(tree), "load": load, **row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
    parser.add_argument("--threads", type=cli.positive_int, nargs="+", default=[1, 2], help="torch thread counts")
    parser.add_argument("--steps", type=cli.positive_int, default=8192, help="learn() steps timed per measurement")
    parser.add_argument("--repeat", type=cli.positive_int, default=3)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT], help="checkouts to measure (PYTHONPATH)")
    parser.add_argument("--child", type=cli.positive_int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.steps)))
        return
    for tree in args.trees:
        if not (tree / "agents" / "training.py").is_file():
            parser.error(f"--trees: {tree} has no agents/training.py")
    trees = [tree.resolve() for tree in args.trees]
    print(f"learn({args.steps}) of the default run's model on 16 envs; {os.cpu_count()} CPUs")
    rows = []
    for rep in range(args.repeat):
        for tree in trees:
            for threads in args.threads:
                row = {"repeat": rep, **run_child(tree, threads, args.steps)}
                rows.append(row)
                print(f"repeat {rep}  {row['tree']}  threads {threads}: {row['steps_per_s']:.0f} steps/s, "
                      f"predict {row['predict_ms']:.2f} ms, import {row['import_s']:.1f} s, "
                      f"torch._dynamo {'imported' if row['dynamo'] else 'not imported'} (load {row['load']:.1f})",
                      flush=True)
    print("\nmedians over repeats (ratios: within each repeat, then the median):")

    def steps(tree, threads) -> list[float]:
        return [r["steps_per_s"] for r in rows if r["tree"] == str(tree) and r["threads"] == threads]

    for tree in trees:
        for threads in args.threads:
            mine = [r for r in rows if r["tree"] == str(tree) and r["threads"] == threads]
            text = (f"{tree}  threads {threads}: {statistics.median(steps(tree, threads)):.0f} steps/s, predict "
                    f"{statistics.median(r['predict_ms'] for r in mine):.2f} ms, import "
                    f"{statistics.median(r['import_s'] for r in mine):.1f} s")
            if threads != args.threads[0]:
                ratios = [a / b for a, b in zip(steps(tree, threads), steps(tree, args.threads[0]), strict=True)]
                text += f"; {statistics.median(ratios):.2f}x its {args.threads[0]} thread(s)"
            if tree != trees[0]:
                ratios = [a / b for a, b in zip(steps(tree, threads), steps(trees[0], threads), strict=True)]
                text += f"; {statistics.median(ratios):.2f}x {trees[0]} at {threads} thread(s)"
            print(text)


if __name__ == "__main__":
    main()
