"""SB3 set-up on the native vector env, checkpoints, and the evaluation callback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

import baselines
from agents.evaluation import evaluate
from agents.features import SlotEncoder
from agents.policy import AgentPolicy
from geo_gym.sb3 import SB3VecEnv
from geo_gym.vector import GeoPipeVectorEnv

ALGOS = {"ppo": PPO, "maskable-ppo": MaskablePPO}


def make_vec_env(num_envs: int, scenario, scenario_kwargs=None, seed: int = 0, **env_kwargs) -> SB3VecEnv:
    venv = SB3VecEnv(GeoPipeVectorEnv(num_envs, scenario, scenario_kwargs, **env_kwargs))
    venv.seed(seed)
    return venv


def make_model(algo: str, env, seed: int, tensorboard_log: str | None, **ppo_kwargs):
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {sorted(ALGOS)}, got {algo!r}")
    policy_kwargs = {
        "features_extractor_class": SlotEncoder,
        # the observation size alone is ambiguous beyond 45 regions; the env knows its count
        "features_extractor_kwargs": {"num_regions": int(env.get_attr("num_regions")[0])},
        "net_arch": [128, 128],
    }
    return ALGOS[algo](
        "MlpPolicy", env, seed=seed, tensorboard_log=tensorboard_log, policy_kwargs=policy_kwargs,
        verbose=0, **ppo_kwargs,
    )


def load_model(algo: str, path: str | Path, env=None):
    return ALGOS[algo].load(str(path), env=env, device="cpu")


class CheckpointLast(BaseCallback):
    """Every ``every`` steps save the model to ``path`` (atomically: write, then rename), so a
    killed run loses at most one interval."""

    def __init__(self, path: Path, every: int):
        super().__init__()
        self.path = Path(path)
        self.every = int(every)
        self._last = 0

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.stem + "-partial.zip")
        self.model.save(str(tmp))
        tmp.replace(self.path)

    def _on_training_start(self) -> None:
        # a resumed model keeps its step count: continue the schedule, do not restart it
        self._last = self.num_timesteps - self.num_timesteps % self.every

    def _on_step(self) -> bool:
        if self.num_timesteps - self._last >= self.every:
            self._last = self.num_timesteps
            self._save()
        return True

    def _on_training_end(self) -> None:
        self._save()


class CompareToBaceCallback(BaseCallback):
    """Every ``every`` steps run the agent and BACE-Pipe on the same held-out seeds and log
    both to TensorBoard: eval/agent_avg_jct_h, eval/bace_avg_jct_h, eval/jct_ratio, the total
    costs and their ratio, and the infrastructure failures per episode of each."""

    def __init__(self, every: int, scenario, seeds, scenario_kwargs=None, env_kwargs=None):
        super().__init__()
        self.every = int(every)
        self.scenario = scenario
        self.seeds = list(seeds)
        self.scenario_kwargs = scenario_kwargs
        self.env_kwargs = env_kwargs
        self._last = 0
        self.history: list[dict] = []
        # BACE-Pipe is deterministic: evaluate it once.
        self._bace = evaluate({"bace_pipe": baselines.make("bace_pipe")}, scenario, self.seeds, scenario_kwargs, env_kwargs)

    def _on_training_start(self) -> None:
        self._last = self.num_timesteps - self.num_timesteps % self.every  # as CheckpointLast

    def _on_step(self) -> bool:
        if self.num_timesteps - self._last < self.every:
            return True
        self._last = self.num_timesteps
        agent = evaluate({"agent": AgentPolicy(self.model)}, self.scenario, self.seeds, self.scenario_kwargs, self.env_kwargs)
        row = {
            "timesteps": self.num_timesteps,
            "agent_avg_jct_h": float(agent.avg_jct_h.mean()),
            "bace_avg_jct_h": float(self._bace.avg_jct_h.mean()),
            "agent_total_cost": float(agent.total_cost.mean()),
            "bace_total_cost": float(self._bace.total_cost.mean()),
            "jct_ratio": float(np.mean(agent.avg_jct_h.to_numpy() / self._bace.avg_jct_h.to_numpy())),
            "cost_ratio": float(np.mean(agent.total_cost.to_numpy() / self._bace.total_cost.to_numpy())),
            "agent_failures": float(agent.failures.mean()),
            "bace_failures": float(self._bace.failures.mean()),
        }
        self.history.append(row)
        for key, value in row.items():
            if key != "timesteps":
                self.logger.record(f"eval/{key}", value)
        return True
