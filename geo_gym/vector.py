"""GeoPipeVectorEnv: N independent GeoPipe simulations stepped in one compiled call.
(``geo_gym.sb3.SB3VecEnv`` adapts it to stable-baselines3.)

Sub-env i behaves exactly like ``GeoPipeEnv`` reset with seed ``seed + i``: same workload
draws, same decisions, same rewards (tested). The batch shares one ``sim.Core`` whose arrays
have a leading env axis, and ``decision.step_batch`` loops over the envs in numba, so a step
costs no Python per env; only episode ends (new workload) go back to Python. With
``parallel=True`` the loop runs on numba's threads (``decision.step_batch_parallel``).

Autoreset is ``SAME_STEP``: a finished sub-env (terminated, or truncated after
``max_idle_steps`` steps that changed nothing, as ``GeoPipeEnv``) is reset inside the step that
ended it; that step returns the new episode's first observation, with ``info["final_obs"]`` /
``info["final_info"]`` (and ``_final_obs`` / ``_final_info`` masks) for the finished one
(``final_info["truncated_idle"]`` marks truncations, whose unfinished jobs make the JCT NaN).

Infos are batched arrays: every step carries ``action_mask`` (N, n_actions), and
``invalid_action``, ``reward_jct``, ``reward_cost`` (the reward's two parts, as
``GeoPipeEnv``'s, the finishing step's included) and ``time_h`` (each env's clock, the new
episode's for an env that just reset), each (N,); ``final_info`` carries the episode summary
(``SUMMARY_KEYS``) and ``reward_scale``. The single env's per-job records are not built here
(Python per job); run ``GeoPipeEnv`` or ``geo_gym.simulate`` with the same seed for them.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector.utils import batch_space

from geo_gym import decision, sim
from geo_gym.env import GeoPipeEnv
from geo_gym.loading import required_sizes, start_episode
from geo_gym.state import SECONDS_PER_HOUR

SUMMARY_KEYS = decision.SUMMARY_KEYS


def _actions(actions, num_envs: int, n: int) -> np.ndarray:
    """One integer action per env, each in Discrete(n): floats, wrong shapes and out-of-range
    values are errors naming them (a truncated float or a wrapped index would act silently)."""
    a = np.asarray(actions)
    if a.shape not in ((num_envs,), (num_envs, 1)):
        raise ValueError(f"expected {num_envs} actions, got an array of shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
        raise ValueError(f"actions must be integers, got dtype {a.dtype}: {a.reshape(-1).tolist()}")
    a = a.reshape(num_envs)
    bad = (a < 0) | (a >= n)
    if bad.any():
        raise ValueError(f"actions {a[bad].tolist()} (envs {np.flatnonzero(bad).tolist()}) are outside Discrete({n})")
    return a.astype(np.int64)


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
        start_rule=None,
        max_idle_steps: int = 100,
        **kwargs,
    ):
        if int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if kwargs:
            raise TypeError(f"unexpected arguments {sorted(kwargs)}")
        if not isinstance(parallel, bool | np.bool_):
            raise ValueError(f"parallel must be True or False, got {parallel!r}")
        # The single env validates the arguments and fixes the spaces.
        self._template = GeoPipeEnv(
            scenario, scenario_kwargs, window, cost_weight, max_jobs, uncertainty, warmup_workloads,
            warmup_scenario, start_rule, max_idle_steps,
        )
        self.num_envs = int(num_envs)
        self.parallel = bool(parallel)
        self._step_batch = decision.step_batch_parallel if self.parallel else decision.step_batch
        self.single_observation_space = self._template.observation_space
        self.single_action_space = self._template.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.cost_weight = self._template.cost_weight
        self.start_rule = self._template.start_rule
        self.max_idle_steps = self._template.max_idle_steps
        k, w = self._template.num_regions, self._template.window
        self.num_regions, self.window = k, w
        self.core = sim.ensure(
            sim.allocate(self.num_envs, k, self._template.max_jobs),
            **required_sizes(self._template._make_scenario(0), self._template.uncertainty),
        )
        self.opts = decision.allocate_options(self.num_envs, k, w)
        self._obs = np.zeros((self.num_envs,) + self.single_observation_space.shape, np.float32)
        self._masks = np.zeros((self.num_envs, self.single_action_space.n), np.bool_)
        self._rewards = np.zeros(self.num_envs)
        self._reward_jct = np.zeros(self.num_envs)
        self._reward_cost = np.zeros(self.num_envs)
        self._invalid = np.zeros(self.num_envs, np.bool_)
        self._terminated = np.zeros(self.num_envs, np.bool_)
        self._idle_steps = np.zeros(self.num_envs, np.int64)
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
        self._idle_steps[e] = 0

    def _check_deadlock(self, e: int) -> None:
        if self.opts.deadlock[e]:
            stuck = [self.jobs[e][j].name for j in self.core.pending[e, : self.core.n_pending[e]]]
            raise RuntimeError(f"env {e}: no rule can ever place pending jobs {stuck}")

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} envs")
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        for e in range(self.num_envs):
            self._load(e)
        return self._obs.copy(), {"action_mask": self._masks.copy(), "time_h": self.core.now_s / SECONDS_PER_HOUR}

    def step(self, actions):
        if self.scenarios[0] is None:
            raise RuntimeError("call reset() before step()")
        actions = _actions(actions, self.num_envs, self.single_action_space.n)
        could_wait = self.opts.wait_ok.copy()
        self._step_batch(
            self.core,
            self.opts,
            actions,
            self.cost_weight,
            self._scale,
            self._rewards,
            self._reward_jct,
            self._reward_cost,
            self._invalid,
            self._terminated,
            self._obs,
            self._masks,
        )
        for e in np.flatnonzero(self.opts.deadlock):
            self._check_deadlock(int(e))
        infos: dict[str, Any] = {
            "invalid_action": self._invalid.copy(),
            "reward_jct": self._reward_jct.copy(),
            "reward_cost": self._reward_cost.copy(),
        }
        # GeoPipeEnv's truncation: max_idle_steps steps in a row that changed nothing
        idle = self._invalid & ~could_wait
        self._idle_steps = np.where(idle, self._idle_steps + 1, 0)
        truncated = ~self._terminated & (self._idle_steps >= self.max_idle_steps)
        done_envs = np.flatnonzero(self._terminated | truncated)
        if done_envs.size:
            final_obs = np.empty(self.num_envs, dtype=object)
            values = np.zeros((len(SUMMARY_KEYS), self.num_envs))
            scale = np.zeros(self.num_envs)
            for e in done_envs:
                final_obs[e] = self._obs[e].copy()
                decision.summary_values(self.core, e, values[:, e])
                scale[e] = self._scale[e]
                self._load(int(e))
            summary = dict(zip(SUMMARY_KEYS, values, strict=True))
            summary["reward_scale"] = scale
            summary["truncated_idle"] = truncated.copy()
            mask = self._terminated | truncated
            summary.update({f"_{key}": mask for key in summary})
            infos.update(final_obs=final_obs, _final_obs=mask, final_info=summary, _final_info=mask)
        infos["action_mask"] = self._masks.copy()
        infos["time_h"] = self.core.now_s / SECONDS_PER_HOUR
        return self._obs.copy(), self._rewards.copy(), self._terminated.copy(), truncated, infos

    def action_masks(self) -> np.ndarray:
        return self._masks.copy()
