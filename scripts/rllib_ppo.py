"""RLlib PPO on GeoPipe with RLlib's action-masking RLModule (needs the `rllib` extra).

    unshare -rn sh -c 'ip link set lo up && python scripts/rllib_ppo.py --iterations 2'

Each env runner builds its envs from the id ``"geo_gym:geo_gym/GeoPipe-v0"`` (gymnasium
imports ``geo_gym`` in the runner's process, so nothing is registered beforehand) wrapped in
``geo_gym.wrappers.ActionMaskObservation``, the Dict observation RLlib's
``ActionMaskingTorchRLModule`` reads. Ray opens network ports for its processes: the command
above keeps the whole Ray instance in a loopback-only network namespace that ends with it.
Prints one line per iteration (env steps, episodes, mean return, the episodes' average JCT
and how many masked actions were taken, which must be 0) and stops Ray. It always starts its
own Ray instance (never joins one it finds), with its files in a temporary folder.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

import gymnasium as gym
import ray
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
from ray.tune.registry import register_env

from geo_gym import cli
from geo_gym.placement import RULE_SETS
from geo_gym.wrappers import ActionMaskObservation

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--scenario", default="paper-fig1")
parser.add_argument("--window", type=cli.positive_int, default=2, help="queue slots shown to the agent")
parser.add_argument("--rules", choices=sorted(RULE_SETS), default="default",
                    help="the placement options of each queue slot (geo_gym.placement.RULE_SETS)")
parser.add_argument("--iterations", type=cli.positive_int, default=2)
parser.add_argument("--env-runners", type=cli.positive_int, default=1, help="remote env runners")
parser.add_argument("--batch", type=cli.positive_int, default=256, help="env steps per iteration")
parser.add_argument("--seed", type=cli.non_negative_int, default=0)
args = parser.parse_args()


def make_env(env_config) -> gym.Env:
    """One masked env; runs in the env runner's process."""
    return ActionMaskObservation(gym.make("geo_gym:geo_gym/GeoPipe-v0", **env_config))


def on_episode_step(*, episode, metrics_logger, **kwargs):
    metrics_logger.log_value("masked_actions", int(episode.get_infos(-1)["invalid_action"]), reduce="sum")


def on_episode_end(*, episode, metrics_logger, **kwargs):
    info = episode.get_infos(-1)
    if "avg_jct_h" in info and not info.get("truncated_idle", False):
        metrics_logger.log_value("avg_jct_h", info["avg_jct_h"])


config = (
    PPOConfig()
    .environment("geo_gym_masked", env_config={"scenario": args.scenario, "window": args.window, "rules": args.rules})
    .env_runners(num_env_runners=args.env_runners, num_envs_per_env_runner=1, num_cpus_per_env_runner=1)
    .learners(num_learners=0)
    .training(train_batch_size_per_learner=args.batch, minibatch_size=min(64, args.batch), num_epochs=2)
    .rl_module(rl_module_spec=RLModuleSpec(
        module_class=ActionMaskingTorchRLModule,
        model_config={"head_fcnet_hiddens": [64, 64], "head_fcnet_activation": "relu"},
    ))
    .callbacks(on_episode_step=on_episode_step, on_episode_end=on_episode_end)
    .debugging(seed=args.seed)
)

# a new Ray instance of its own (address="local": never one that another process started), with
# its session files in a folder of its own, removed at the end
temp_dir = tempfile.mkdtemp(prefix="geo_gym_ray_")
ray.init(address="local", num_cpus=args.env_runners + 1, include_dashboard=False, log_to_driver=False,
         _temp_dir=temp_dir)
try:
    register_env("geo_gym_masked", make_env)
    algo = config.build_algo()
    for i in range(1, args.iterations + 1):
        runners = algo.train()["env_runners"]
        print(f"iteration {i}: {runners['num_env_steps_sampled_lifetime']} env steps, "
              f"{runners['num_episodes_lifetime']} episodes, mean return {runners['episode_return_mean']:.3f}, "
              f"avg JCT {runners.get('avg_jct_h', float('nan')):.2f} h, "
              f"masked actions {runners.get('masked_actions', 0)}", flush=True)
    algo.stop()
finally:
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)
