"""GeoPipeVectorEnv: N independent GeoPipe simulations stepped in one compiled call.
(``geo_gym.sb3.SB3VecEnv`` adapts it to stable-baselines3.)

Sub-env i behaves exactly like ``GeoPipeEnv`` reset with seed ``seed + i``: same workload
draws, same decisions, same rewards, same infos: step for step the results of gymnasium's
``SyncVectorEnv`` over ``GeoPipeEnv`` in the same autoreset mode (tested). The batch shares one
``sim.Core`` whose arrays have a leading env axis, and ``decision.step_batch`` loops over the
envs in numba, so a step costs no Python per env. The envs whose episode ends reset together:
in one compiled call where ``geo_gym.compiled_reset`` applies (built-in scenarios without
per-episode uncertainty draws), through ``loading`` one by one otherwise. With
``parallel=True`` the step's loop runs on numba's threads (``decision.step_batch_parallel``).

Autoreset (``autoreset_mode``, https://farama.org/Vector-Autoreset-Mode; gymnasium's default,
``NEXT_STEP``, unless given): a sub-env's episode ends when it terminates, or is truncated after
``max_idle_steps`` steps that changed nothing (as ``GeoPipeEnv``) or after
``max_episode_steps`` steps (as gymnasium's ``TimeLimit``, which ``gym.make`` adds for it);

- ``NEXT_STEP``: the step that ends it returns its last observation and info; the next step
  resets it (its action is ignored, reward 0, info that of ``reset``).
- ``SAME_STEP``: the step that ends it resets it and returns the new episode's first
  observation; the finished episode's last observation and info are in ``info["final_obs"]``
  and ``info["final_info"]``.
- ``DISABLED``: stepping an env whose episode ended is an error until
  ``reset(options={"reset_mask": mask})`` resets it (or a full ``reset``).

Infos follow gymnasium's vector convention: each of the single env's info keys holds one
entry per env, and ``info["_key"]`` marks the envs whose single-env info has it (the others
hold zeros). Every step: ``action_mask`` (N, n_actions) and ``time_h``, each env's current
episode's; ``invalid_action``, ``reward_jct``, ``reward_cost`` (the reward's two parts) of the
envs that stepped in their episode. At an episode's end the single env's summary
(``SUMMARY_KEYS``), ``reward_scale``, ``jobs`` (per-job records, with ``job_records=True``:
they are off by default here, on in ``GeoPipeEnv``), and ``truncated_idle`` for an idle
truncation: at the top level (``NEXT_STEP``, ``DISABLED``) or in ``final_info``
(``SAME_STEP``, with everything else the single env's last step gave).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numba
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from geo_gym import compiled_reset, decision, sim
from geo_gym.env import GeoPipeEnv, episode_records
from geo_gym.loading import required_sizes, start_episode
from geo_gym.state import SECONDS_PER_HOUR

SUMMARY_KEYS = decision.SUMMARY_KEYS


def _actions(actions, num_envs: int, n: int) -> np.ndarray:
    """One integer action per env, each in Discrete(n): floats, wrong shapes and out-of-range
    values are errors naming them (a truncated float or a wrapped index would act silently)."""
    a = np.asarray(actions)
    if a.shape not in ((num_envs,), (num_envs, 1)):
        raise ValueError(f"expected {num_envs} actions, got an array of shape {a.shape}")
    if a.dtype.kind not in "iu":  # (bool is kind "b")
        raise ValueError(f"actions must be integers, got dtype {a.dtype}: {a.reshape(-1).tolist()}")
    a = a.reshape(num_envs)
    if a.min() < 0 or a.max() >= n:
        bad = (a < 0) | (a >= n)
        raise ValueError(f"actions {a[bad].tolist()} (envs {np.flatnonzero(bad).tolist()}) are outside Discrete({n})")
    return a.astype(np.int64)


def autoreset_mode_of(mode) -> AutoresetMode:
    """An ``AutoresetMode``, or its value ("NextStep", "SameStep", "Disabled")."""
    try:
        return AutoresetMode(mode)
    except ValueError:
        raise ValueError(
            f"autoreset_mode must be one of gymnasium.vector.AutoresetMode "
            f"{[m.value for m in AutoresetMode]}, got {mode!r}"
        ) from None


def _reset_mask(options: dict | None, num_envs: int) -> np.ndarray | None:
    """``options["reset_mask"]`` checked as gymnasium's ``SyncVectorEnv`` checks it."""
    if not options or "reset_mask" not in options:
        return None
    mask = options["reset_mask"]
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must be a numpy bool array of shape ({num_envs},), got {mask!r}")
    if not mask.any():
        raise ValueError("options['reset_mask'] must mark at least one env")
    return mask


def _add(infos: dict, values: dict[str, np.ndarray], mask: np.ndarray | None) -> None:
    """Put batched ``values`` (copied) into ``infos`` with their ``_key`` masks: where ``mask``
    is False the value is zero (None for objects), as in gymnasium's ``VectorEnv._add_info``;
    mask None: every env has them."""
    if mask is None:
        every = np.ones(len(next(iter(values.values()))), np.bool_)
        for key, value in values.items():
            infos[key] = value.copy()
            infos[f"_{key}"] = every.copy()
        return
    for key, value in values.items():
        where = mask if value.ndim == 1 else mask.reshape(mask.shape + (1,) * (value.ndim - 1))
        if value.dtype == np.bool_:
            infos[key] = value & where
        else:
            blank = None if value.dtype == object else value.dtype.type(0)  # a scalar of value's dtype
            infos[key] = np.where(where, value, blank)
        infos[f"_{key}"] = mask.copy()


@numba.njit(cache=True)
def _episode_ends(invalid, could_wait, terminated, stepping, idle_steps, episode_steps, max_idle_steps,
                  max_episode_steps, truncated, idle_truncated, ended):
    """After a step: ``GeoPipeEnv``'s idle truncation (``max_idle_steps`` steps in a row that
    changed nothing: invalid with nothing to wait for) and, with ``max_episode_steps`` > 0,
    gymnasium's ``TimeLimit`` (truncated even if terminated); counts ``idle_steps`` and
    ``episode_steps`` on, writes ``truncated``, ``idle_truncated``, ``ended``; returns whether
    any episode ended. (One compiled call in place of a dozen small numpy operations a step.)"""
    any_ended = False
    for e in range(invalid.shape[0]):
        idle_steps[e] = idle_steps[e] + 1 if invalid[e] and not could_wait[e] else 0
        idle_truncated[e] = not terminated[e] and idle_steps[e] >= max_idle_steps
        truncated[e] = idle_truncated[e]
        if max_episode_steps > 0:
            episode_steps[e] += stepping[e]
            truncated[e] = truncated[e] or episode_steps[e] >= max_episode_steps
        ended[e] = terminated[e] or truncated[e]
        any_ended = any_ended or ended[e]
    return any_ended


class GeoPipeVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` GeoPipe simulations; arguments as ``GeoPipeEnv``, plus ``parallel`` (step
    the envs on numba's threads, ``NUMBA_NUM_THREADS`` / ``numba.set_num_threads``: same
    results, more throughput on a multi-core machine; episode resets stay serial),
    ``autoreset_mode`` (module docstring), ``max_episode_steps`` (None: no step limit; what
    ``gym.make_vec`` passes for it), ``render_mode`` (None: the native env does not render) and
    ``job_records`` (False here: the per-job records of a finished episode cost about as much
    Python as drawing the next episode; True gives them, as ``GeoPipeEnv`` does by default)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

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
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        job_records: bool = False,
        rules=None,
        **kwargs,
    ):
        if int(num_envs) != num_envs or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if kwargs:
            raise TypeError(f"unexpected arguments {sorted(kwargs)}")
        if not isinstance(parallel, bool | np.bool_):
            raise ValueError(f"parallel must be True or False, got {parallel!r}")
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool) or int(max_episode_steps) != max_episode_steps or max_episode_steps < 1
        ):
            raise ValueError(f"max_episode_steps must be an integer >= 1 or None, got {max_episode_steps!r}")
        if render_mode is not None:
            raise ValueError(
                f"GeoPipeVectorEnv does not render: render_mode must be None, got {render_mode!r} (for "
                "pictures: gym.make_vec(..., vectorization_mode='sync', render_mode=...) renders each "
                "GeoPipeEnv, and geo_gym.plot_schedule draws a simulate result)"
            )
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        self.max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        # The single env validates the arguments and fixes the spaces.
        self._template = GeoPipeEnv(
            scenario, scenario_kwargs, window, cost_weight, max_jobs, uncertainty, warmup_workloads,
            warmup_scenario, start_rule, max_idle_steps, job_records=job_records, rules=rules,
        )
        self.job_records = self._template.job_records
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
        self.rules, self.num_rules = self._template.rules, self._template.num_rules
        self.core = sim.ensure(
            sim.allocate(self.num_envs, k, self._template.max_jobs),
            **required_sizes(self._template._make_scenario(0), self._template.uncertainty),
        )
        self.opts = decision.allocate_options(self.num_envs, k, w, self.rules)
        self._rewards = np.zeros(self.num_envs)
        self._reward_jct = np.zeros(self.num_envs)
        self._reward_cost = np.zeros(self.num_envs)
        self._invalid = np.zeros(self.num_envs, np.bool_)
        self._terminated = np.zeros(self.num_envs, np.bool_)
        self._idle_steps = np.zeros(self.num_envs, np.int64)
        self._episode_steps = np.zeros(self.num_envs, np.int64)
        self._ended = np.zeros(self.num_envs, np.bool_)  # episode ended, env not reset yet
        self._any_ended = False
        self._every = np.ones(self.num_envs, np.bool_)  # every env steps (never handed out)
        self._scale = np.ones(self.num_envs)
        self._rngs: list[np.random.Generator] = [seeding.np_random(None)[0] for _ in range(num_envs)]
        # each env's workload: its Scenario and jobs, or (compiled resets) the seed that builds them
        self._scenarios = np.full(num_envs, None, dtype=object)
        self._jobs = np.full(num_envs, None, dtype=object)
        self._workload_seeds = np.full(num_envs, -1, np.int64)  # -1: none (loaded through loading)
        t = self._template
        self._plan, self.core = compiled_reset.plan(
            t._make_scenario, t._make_scenario(0), t.uncertainty, t.warmup_workloads, self.core, t.warmup_scenario
        )
        # Under compiled resets each env's generator state lives here (rng.state_arrays' layout,
        # one row an env), so that one compiled call resets every env that needs it; _rngs
        # then only seed them.
        self._states = np.zeros((num_envs, 4), np.uint64)
        self._bufs = np.zeros((num_envs, 2), np.uint32)
        if self._plan is not None:
            for e in range(num_envs):
                compiled_reset.store(self._rngs[e], self._states[e], self._bufs[e])

    @property
    def scenarios(self) -> list:
        """Each env's current workload (None before its first reset)."""
        return [self._scenario(e) for e in range(self.num_envs)]

    @property
    def jobs(self) -> list:
        """Each env's jobs in core index order."""
        return [self._episode_jobs(e) for e in range(self.num_envs)]

    def _scenario(self, e: int):
        if self._scenarios[e] is None and self._workload_seeds[e] >= 0:
            self._scenarios[e] = self._template._make_scenario(int(self._workload_seeds[e]))
        return self._scenarios[e]

    def _episode_jobs(self, e: int):
        if self._jobs[e] is not None:
            return self._jobs[e]
        scen = self._scenario(e)
        return [] if scen is None else scen.jobs  # (a compiled reset's workload: a JobTable)

    def _load(self, envs: np.ndarray) -> None:
        """Start the next episode of each env in ``envs`` (int64): one compiled call for all
        where ``compiled_reset`` applies, ``loading`` for the others."""
        through_loading = envs
        if self._plan is not None:
            compiled_reset.reset_many(self._plan, self.core, self.opts, envs, self._states, self._bufs,
                                      self._workload_seeds, self._scale)
            self._scenarios[envs] = None
            self._jobs[envs] = None
            through_loading = envs[self._workload_seeds[envs] < 0]
        for e in through_loading.tolist():
            self._load_through_loading(e)
        self._idle_steps[envs] = 0
        self._episode_steps[envs] = 0
        self._ended[envs] = False
        self._any_ended = bool(self._ended.any())
        for e in envs[self.opts.deadlock[envs]].tolist():
            self._check_deadlock(e)

    def _load_through_loading(self, e: int) -> None:
        t = self._template
        gen = self._rngs[e] if self._plan is None else compiled_reset.generator(self._states[e], self._bufs[e])
        self.core, self._jobs[e], self._scenarios[e], self._scale[e] = start_episode(
            self.core, e, t._checked_scenario, gen, t.uncertainty, t.warmup_workloads,
            t.warmup_scenario, t._make_scenario.num_jobs,
        )
        self._workload_seeds[e] = -1
        if self._plan is not None:
            compiled_reset.store(gen, self._states[e], self._bufs[e])
        decision.begin(self.core, self.opts, e)

    def _check_deadlock(self, e: int) -> None:
        if self.opts.deadlock[e]:
            stuck = [self._episode_jobs(e)[j].name for j in self.core.pending[e, : self.core.n_pending[e]]]
            raise RuntimeError(f"env {e}: no rule can ever place pending jobs {stuck}")

    @property
    def _obs(self) -> np.ndarray:
        """Every env's current observation (N, obs size): the decision arrays' own."""
        return self.opts.obs

    @property
    def _masks(self) -> np.ndarray:
        return self.opts.mask

    def _state_info(self) -> dict[str, np.ndarray]:
        """What every info of the single env carries: the current mask and clock."""
        return {"action_mask": self._masks, "time_h": self.core.now_s / SECONDS_PER_HOUR}

    def _end_info(self, summarized: np.ndarray, idle: np.ndarray) -> dict:
        """The single env's episode-end keys, batched: the summary, ``reward_scale`` (and
        ``jobs``) of the envs in ``summarized`` (terminated or idle-truncated), and
        ``truncated_idle`` of those in ``idle``."""
        values = np.zeros((self.num_envs, len(SUMMARY_KEYS)))  # rows C-contiguous, as the env's
        decision.summary_rows(self.core, np.flatnonzero(summarized), values)
        summary = dict(zip(SUMMARY_KEYS, values.T.copy(), strict=True))
        for key in decision.SUMMARY_COUNTS:  # ints in the single env's info
            summary[key] = summary[key].astype(np.int64)
        if self.job_records:
            summary["jobs"] = np.full(self.num_envs, None, dtype=object)
            for e in np.flatnonzero(summarized):
                summary["jobs"][e] = episode_records(self.core, e, self._episode_jobs(e), self._scenario(e).cluster.names)
        info: dict[str, Any] = {}
        if summarized.any():
            for key, value in summary.items():  # fresh, and zero (None) in the other envs' rows: as _add writes
                info[key] = value
                info[f"_{key}"] = summarized.copy()
            _add(info, {"reward_scale": self._scale}, summarized)
        if idle.any():
            _add(info, {"truncated_idle": idle}, idle)
        return info

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None):
        """Reset every env, or with ``options={"reset_mask": mask}`` those marked (the others
        keep their state). ``seed``: None (each env's generator goes on), an int (env i gets
        ``seed + i``) or one seed (or None) per env."""
        mask = _reset_mask(options, self.num_envs)
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, int | np.integer):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} envs")
        envs = np.arange(self.num_envs) if mask is None else np.flatnonzero(mask)
        for e in envs.tolist():
            if seeds[e] is not None:
                self._rngs[e] = seeding.np_random(seeds[e])[0]
                if self._plan is not None:
                    compiled_reset.store(self._rngs[e], self._states[e], self._bufs[e])
        self._load(envs)
        infos: dict[str, Any] = {}
        _add(infos, self._state_info(), mask)
        return self._obs.copy(), infos

    def step(self, actions):
        if self._scenarios[0] is None and self._workload_seeds[0] < 0:
            raise RuntimeError("call reset() before step()")
        actions = _actions(actions, self.num_envs, self.single_action_space.n)
        resetting = None  # NEXT_STEP: the envs whose episode ended at the last step reset now
        if self._any_ended:
            resetting = self._ended.copy()
            if self.autoreset_mode == AutoresetMode.DISABLED:
                raise RuntimeError(
                    f"envs {np.flatnonzero(resetting).tolist()} ended their episode and autoreset_mode "
                    "is DISABLED: reset them first, e.g. reset(options={'reset_mask': terminated | truncated})"
                )
            self._load(np.flatnonzero(resetting))
        stepping = self._every if resetting is None else ~resetting
        could_wait = self.opts.wait_ok.copy()
        self._step_batch(
            self.core,
            self.opts,
            actions,
            stepping,
            self.cost_weight,
            self._scale,
            self._rewards,
            self._reward_jct,
            self._reward_cost,
            self._invalid,
            self._terminated,
        )
        if self.opts.deadlock.any():
            for e in np.flatnonzero(self.opts.deadlock):
                self._check_deadlock(int(e))
        terminated = self._terminated.copy()
        truncated, idle_truncated, ended = (np.empty(self.num_envs, np.bool_) for _ in range(3))
        any_ended = _episode_ends(
            self._invalid, could_wait, terminated, stepping, self._idle_steps, self._episode_steps,
            self.max_idle_steps, self.max_episode_steps or 0, truncated, idle_truncated, ended,
        )
        step_info = {"invalid_action": self._invalid, "reward_jct": self._reward_jct, "reward_cost": self._reward_cost}
        infos: dict[str, Any] = {}
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            if any_ended:
                # the finished episodes' last observation and info, then their new episodes
                final_info: dict[str, Any] = {}
                _add(final_info, {**self._state_info(), **step_info}, ended)
                final_info.update(self._end_info(terminated | idle_truncated, idle_truncated))
                final_obs = np.full(self.num_envs, None, dtype=object)
                finished = np.flatnonzero(ended)
                for e in finished.tolist():
                    final_obs[e] = self._obs[e].copy()
                self._load(finished)
                infos.update(final_obs=final_obs, _final_obs=ended.copy(), final_info=final_info,
                             _final_info=ended.copy())
                _add(infos, step_info, ~ended)  # the finished episodes' are in final_info
                _add(infos, self._state_info(), None)
            else:
                _add(infos, {**step_info, **self._state_info()}, None)
        else:
            if resetting is None:
                _add(infos, {**step_info, **self._state_info()}, None)
            else:  # the envs that reset instead of stepping have no step keys
                _add(infos, step_info, stepping)
                _add(infos, self._state_info(), None)
            if any_ended:
                infos.update(self._end_info(terminated | idle_truncated, idle_truncated))
            self._ended = ended
            self._any_ended = any_ended
        return self._obs.copy(), self._rewards.copy(), terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """The current action mask of every env (N, n_actions)."""
        return self._masks.copy()
