"""SB3VecEnv: the adapter that stable-baselines3 (PPO, sb3-contrib MaskablePPO) accepts as its
``VecEnv``, over a ``geo_gym.vector.GeoPipeVectorEnv``. Its own module so that the vector env
does not import stable-baselines3 and torch (most of its import time) for users who train
with something else or only evaluate.

Episode returns and lengths are SB3's ``VecMonitor``'s job: wrap the adapter in it
(``VecMonitor(SB3VecEnv(venv), info_keywords=SUMMARY_KEYS)``, as ``agents.training.make_vec_env``
does) for rollout/ep_rew_mean and a monitor.csv with each episode's summary.
"""

from __future__ import annotations

import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import VecEnv

from geo_gym.vector import SUMMARY_KEYS, GeoPipeVectorEnv


class SB3VecEnv(VecEnv):
    """stable-baselines3's ``VecEnv`` over a ``GeoPipeVectorEnv`` in any autoreset mode: dones
    auto-reset in the step that ends them (SB3's contract; under ``NEXT_STEP`` or ``DISABLED``
    the adapter resets the finished envs with a ``reset_mask``, the same episodes), each
    finished env's info carries ``terminal_observation`` and the episode summary
    (``SUMMARY_KEYS``, ``reward_scale``); ``env_method("action_masks")`` serves MaskablePPO."""

    def __init__(self, venv: GeoPipeVectorEnv):
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions = np.zeros(venv.num_envs, dtype=np.int64)
        self._seed: int | None = None

    def reset(self):
        obs, _ = self.venv.reset(seed=self._seed)
        self._seed = None
        return obs

    def step_async(self, actions):
        self._actions = np.asarray(actions, dtype=np.int64)

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        if self.venv.autoreset_mode == AutoresetMode.SAME_STEP:
            final_obs, final_info = info.get("final_obs"), info.get("final_info", {})
        else:  # the step returned the finished episodes' last observations and infos
            final_obs, final_info = obs, info
            if dones.any():
                obs, _ = self.venv.reset(options={"reset_mask": dones})
        masks = self.venv.action_masks()
        infos = [{"action_mask": masks[e]} for e in range(self.num_envs)]
        for e in np.flatnonzero(dones):
            infos[e]["terminal_observation"] = final_obs[e]
            infos[e]["TimeLimit.truncated"] = bool(truncated[e])
            if "reward_scale" in final_info and final_info["_reward_scale"][e]:  # not after a step limit
                for key in (*SUMMARY_KEYS, "reward_scale"):
                    infos[e][key] = float(final_info[key][e])
        return obs, rewards.astype(np.float32), dones, infos

    def action_masks(self) -> np.ndarray:
        return self.venv.action_masks()

    def close(self):
        self.venv.close()

    def seed(self, seed: int | None = None):
        self._seed = seed
        return [None if seed is None else seed + i for i in range(self.num_envs)]

    def _indices(self, indices):
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, int):
            return [indices]
        return indices

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.venv, attr_name) for _ in self._indices(indices)]

    def set_attr(self, attr_name, value, indices=None):
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        if method_name == "action_masks":
            masks = self.venv.action_masks()
            return [masks[i] for i in self._indices(indices)]
        raise AttributeError(f"SB3VecEnv supports env_method('action_masks') only, not {method_name!r}")

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._indices(indices)]
