"""GeoPipeVectorEnv: N independent GeoPipe simulations stepped in one compiled call, and an
adapter that stable-baselines3 (PPO, sb3-contrib MaskablePPO) accepts as its ``VecEnv``.

Sub-env i behaves exactly like ``GeoPipeEnv`` reset with seed ``seed + i``: same workload
draws, same decisions, same rewards (tested). The batch shares one ``sim.Core`` whose arrays
have a leading env axis, and ``decision.step_batch`` loops over the envs in numba, so a step
costs no Python per env; only episode ends (new workload) go back to Python. With
``parallel=True`` the loop runs on numba's threads (``decision.step_batch_parallel``).

Autoreset is ``SAME_STEP``: a finished sub-env is reset inside the step that ended it; that
step returns the new episode's first observation, with ``info["final_obs"]`` /
``info["final_info"]`` (and ``_final_obs`` / ``_final_info`` masks) for the finished one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector.utils import batch_space
from stable_baselines3.common.vec_env import VecEnv

from geo_gym import decision, sim
from geo_gym.env import GeoPipeEnv
from geo_gym.loading import required_sizes, start_episode

SUMMARY_KEYS = decision.SUMMARY_KEYS


class GeoPipeVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` GeoPipe simulations; arguments as ``GeoPipeEnv``, plus ``parallel``: step
    the envs on numba's threads (``NUMBA_NUM_THREADS`` / ``numba.set_num_threads``; same
    results, more throughput on a multi-core machine; episode resets stay in Python, serial)."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 1,
        scenario="paper-default",
        scenario_kwargs: dict[str, Any] | None = None,
        window: int = 8,
        cost_weight: float = 0.1,
        max_jobs: int | None = None,
        uncertainty=None,
        warmup_workloads: int = 0,
        warmup_scenario=None,
        parallel: bool = False,
        **kwargs,
    ):
        if int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if kwargs:
            raise TypeError(f"unexpected arguments {sorted(kwargs)}")
        # The single env validates the arguments and fixes the spaces.
        self._template = GeoPipeEnv(
            scenario, scenario_kwargs, window, cost_weight, max_jobs, uncertainty, warmup_workloads,
            warmup_scenario,
        )
        self.num_envs = int(num_envs)
        self.parallel = bool(parallel)
        self._step_batch = decision.step_batch_parallel if self.parallel else decision.step_batch
        self.single_observation_space = self._template.observation_space
        self.single_action_space = self._template.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.cost_weight = self._template.cost_weight
        k, w = self._template.num_regions, self._template.window
        self.core = sim.ensure(
            sim.allocate(self.num_envs, k, self._template.max_jobs),
            **required_sizes(self._template._make_scenario(0), self._template.uncertainty),
        )
        self.opts = decision.allocate_options(self.num_envs, k, w)
        self._obs = np.zeros((self.num_envs,) + self.single_observation_space.shape, np.float32)
        self._masks = np.zeros((self.num_envs, self.single_action_space.n), np.bool_)
        self._rewards = np.zeros(self.num_envs)
        self._invalid = np.zeros(self.num_envs, np.bool_)
        self._terminated = np.zeros(self.num_envs, np.bool_)
        self._scale = np.ones(self.num_envs)
        self._rngs: list[np.random.Generator] = [seeding.np_random(None)[0] for _ in range(num_envs)]
        self.jobs: list[list] = [[] for _ in range(num_envs)]
        self.scenarios: list = [None] * num_envs

    def _load(self, e: int) -> None:
        t = self._template
        self.core, self.jobs[e], self.scenarios[e], self._scale[e] = start_episode(
            self.core, e, t._checked_scenario, self._rngs[e], t.uncertainty, t.warmup_workloads,
            t.warmup_scenario,
        )
        decision.begin(self.core, self.opts, e, self._obs[e], self._masks[e])
        self._check_deadlock(e)

    def _check_deadlock(self, e: int) -> None:
        if self.opts.deadlock[e]:
            stuck = [self.jobs[e][j].name for j in self.core.pend[e, : self.core.n_pend[e]]]
            raise RuntimeError(f"env {e}: no rule can ever place pending jobs {stuck}")

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} envs")
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        for e in range(self.num_envs):
            self._load(e)
        return self._obs.copy(), {"action_mask": self._masks.copy()}

    def step(self, actions):
        actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        self._step_batch(
            self.core,
            self.opts,
            actions,
            self.cost_weight,
            self._scale,
            self._rewards,
            self._invalid,
            self._terminated,
            self._obs,
            self._masks,
        )
        for e in np.flatnonzero(self.opts.deadlock):
            self._check_deadlock(int(e))
        infos: dict[str, Any] = {"invalid_action": self._invalid.copy()}
        done_envs = np.flatnonzero(self._terminated)
        if done_envs.size:
            final_obs = np.empty(self.num_envs, dtype=object)
            values = np.zeros((len(SUMMARY_KEYS), self.num_envs))
            for e in done_envs:
                final_obs[e] = self._obs[e].copy()
                decision.summary_values(self.core, e, values[:, e])
                self._load(int(e))
            summary = dict(zip(SUMMARY_KEYS, values, strict=True))
            mask = self._terminated.copy()
            summary.update({f"_{key}": mask for key in SUMMARY_KEYS})
            infos.update(final_obs=final_obs, _final_obs=mask, final_info=summary, _final_info=mask)
        infos["action_mask"] = self._masks.copy()
        return (
            self._obs.copy(),
            self._rewards.copy(),
            self._terminated.copy(),
            np.zeros(self.num_envs, np.bool_),
            infos,
        )

    def action_masks(self) -> np.ndarray:
        return self._masks.copy()


class SB3VecEnv(VecEnv):
    """stable-baselines3's ``VecEnv`` over a ``GeoPipeVectorEnv``: dones auto-reset, each
    finished env's info carries ``terminal_observation``, the episode summary and SB3's
    ``episode`` record (r, l); ``env_method("action_masks")`` serves MaskablePPO."""

    def __init__(self, venv: GeoPipeVectorEnv):
        self.venv = venv
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self._actions = np.zeros(venv.num_envs, dtype=np.int64)
        self._seed: int | None = None
        self._ep_return = np.zeros(venv.num_envs)
        self._ep_len = np.zeros(venv.num_envs, dtype=np.int64)

    def reset(self):
        obs, _ = self.venv.reset(seed=self._seed)
        self._seed = None
        self._ep_return[:] = 0.0
        self._ep_len[:] = 0
        return obs

    def step_async(self, actions):
        self._actions = np.asarray(actions, dtype=np.int64)

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        self._ep_return += rewards
        self._ep_len += 1
        infos = [{"action_mask": info["action_mask"][e]} for e in range(self.num_envs)]
        dones = terminated | truncated
        for e in np.flatnonzero(dones):
            infos[e]["terminal_observation"] = info["final_obs"][e]
            infos[e]["TimeLimit.truncated"] = False
            for key in SUMMARY_KEYS:
                infos[e][key] = float(info["final_info"][key][e])
            infos[e]["episode"] = {"r": float(self._ep_return[e]), "l": int(self._ep_len[e])}
            self._ep_return[e] = 0.0
            self._ep_len[e] = 0
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
