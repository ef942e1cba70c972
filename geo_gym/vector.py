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
    given = a.reshape(num_envs)
    a = given.astype(np.int64)
    if _any_outside(a, n):
        bad = (given < 0) | (given >= n)
        raise ValueError(f"actions {given[bad].tolist()} (envs {np.flatnonzero(bad).tolist()}) are outside Discrete({n})")
    return a


@numba.njit(cache=True)
def _any_outside(a, n):
    """Whether some entry of ``a`` is outside [0, n). (Between compiled steps numpy's
    reductions cost several times what they do in a loop of their own; this costs one call.)"""
    for x in a:
        if x < 0 or x >= n:
            return True
    return False


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


# Every info key of the vector env, in the order it writes them: the block that holds its
# values (float, count or flag rows, or the action mask) and its group, the envs that have it:
# those that stepped, every env's current state, the episodes summarized at their end, the idle
# truncations. _fill_info writes every key's values and masks in one compiled call (a numpy
# operation or two a key cost more than all the rest of a step's Python); _info keeps the
# groups given.
STEP, STATE, END, IDLE = range(4)
_FLOAT_KEYS = ("reward_jct", "reward_cost", "time_h",
               *(k for k in SUMMARY_KEYS if k not in decision.SUMMARY_COUNTS), "reward_scale")
_FLAG_KEYS = ("invalid_action", "truncated_idle")
_INFO_KEYS = (
    ("invalid_action", STEP), ("reward_jct", STEP), ("reward_cost", STEP), ("action_mask", STATE), ("time_h", STATE),
    *((k, END) for k in SUMMARY_KEYS), ("reward_scale", END), ("truncated_idle", IDLE),
)
_KEY_GROUP = np.array([group for _, group in _INFO_KEYS], np.int64)
_BLOCKS = (_FLOAT_KEYS, decision.SUMMARY_COUNTS, _FLAG_KEYS)  # _fill_info's rows; the action mask is block 3
_JCT, _COST, _TIME, _SCALE = (_FLOAT_KEYS.index(k) for k in ("reward_jct", "reward_cost", "time_h", "reward_scale"))


def _block_row(key: str) -> tuple[int, int]:
    """Where _fill_info writes ``key``'s values: (block, row); the action mask: (3, -1), whole."""
    for b, keys in enumerate(_BLOCKS):
        if key in keys:
            return b, keys.index(key)
    return 3, -1


# where each summary value (SUMMARY_KEYS order) goes: its block (float or count) and row
_SUMMARY_BLOCK, _SUMMARY_ROW = (np.array(column, np.int64) for column in zip(*map(_block_row, SUMMARY_KEYS), strict=True))

# each group's keys as _info reads them: (key, its mask's key, its index in _INFO_KEYS, block, row)
_GROUP_ENTRIES = tuple(
    tuple((key, f"_{key}", k, *_block_row(key)) for k, (key, g) in enumerate(_INFO_KEYS) if g == group)
    for group in (STEP, STATE, END, IDLE)
)


@numba.njit(cache=True)
def _fill_info(c, step, state, end, idle, invalid, reward_jct, reward_cost, scale, mask,
               floats, counts, flags, action_mask, key_masks):
    """The values of every info key (rows of ``floats``, ``counts``, ``flags`` in _FLOAT_KEYS,
    SUMMARY_COUNTS, _FLAG_KEYS order, and ``action_mask``) and each key's ``_key`` mask (rows
    of ``key_masks``, _INFO_KEYS order): zero where its group's mask (``step``, ``state``,
    ``end``, ``idle``) is False, as gymnasium's ``VectorEnv._add_info`` writes. Returns how many
    envs are in ``end`` and in ``idle``."""
    summary = np.empty(len(SUMMARY_KEYS))
    n_end = n_idle = 0
    for e in range(floats.shape[1]):
        flags[0, e] = invalid[e] and step[e]  # (_FLAG_KEYS order)
        flags[1, e] = idle[e]
        floats[_JCT, e] = reward_jct[e] if step[e] else 0.0
        floats[_COST, e] = reward_cost[e] if step[e] else 0.0
        floats[_TIME, e] = c.now_s[e] / SECONDS_PER_HOUR if state[e] else 0.0
        if state[e]:
            action_mask[e, :] = mask[e, :]
        else:
            action_mask[e, :] = False
        summary[:] = 0.0
        if end[e]:
            decision.summary_values(c, e, summary)
        for j in range(summary.shape[0]):
            if _SUMMARY_BLOCK[j] == 0:
                floats[_SUMMARY_ROW[j], e] = summary[j]
            else:
                counts[_SUMMARY_ROW[j], e] = np.int64(summary[j])
        floats[_SCALE, e] = scale[e] if end[e] else 0.0
        groups = (step[e], state[e], end[e], idle[e])  # (STEP, STATE, END, IDLE order)
        for k in range(key_masks.shape[0]):
            key_masks[k, e] = groups[_KEY_GROUP[k]]
        n_end += end[e]
        n_idle += idle[e]
    return n_end, n_idle


# The rows of the bool block _episode_ends writes after a step (fresh each step: the first two
# are handed out as the step's terminated and truncated).
TERMINATED, TRUNCATED, IDLE_TRUNCATED, ENDED, SUMMARIZED, GOING_ON = range(6)


@numba.njit(cache=True)
def _episode_ends(invalid, could_wait, terminated_now, stepping, idle_steps, episode_steps, max_idle_steps,
                  max_episode_steps, ends, ended_envs):
    """After a step: ``GeoPipeEnv``'s idle truncation (``max_idle_steps`` steps in a row that
    changed nothing: invalid with nothing to wait for) and, with ``max_episode_steps`` > 0,
    gymnasium's ``TimeLimit`` (truncated even if terminated); counts ``idle_steps`` and
    ``episode_steps`` on and writes the rows of ``ends`` (TERMINATED ... GOING_ON: summarized
    = terminated or idle-truncated, the single env's summary; going on = not ended); returns
    how many episodes ended, their envs in the first entries of ``ended_envs``. (One compiled
    call in place of a dozen small numpy operations.)"""
    n_ended = 0
    for e in range(invalid.shape[0]):
        idle_steps[e] = idle_steps[e] + 1 if invalid[e] and not could_wait[e] else 0
        idle = not terminated_now[e] and idle_steps[e] >= max_idle_steps
        truncated = idle
        if max_episode_steps > 0:
            episode_steps[e] += stepping[e]
            truncated = truncated or episode_steps[e] >= max_episode_steps
        ended = terminated_now[e] or truncated
        ends[TERMINATED, e] = terminated_now[e]
        ends[TRUNCATED, e] = truncated
        ends[IDLE_TRUNCATED, e] = idle
        ends[ENDED, e] = ended
        ends[SUMMARIZED, e] = terminated_now[e] or idle
        ends[GOING_ON, e] = not ended
        if ended:
            ended_envs[n_ended] = e
            n_ended += 1
    return n_ended


@numba.njit(cache=True)
def _loaded(envs, workload_seeds, idle_steps, episode_steps, ended):
    """Loading ``envs`` begins their episodes: step counters at zero, not ended. Returns (how
    many of them ``loading`` must load: ``compiled_reset`` left their seed at -1, whether any
    env's episode is still ended)."""
    n_left = 0
    for e in envs:
        idle_steps[e] = 0
        episode_steps[e] = 0
        ended[e] = False
        n_left += workload_seeds[e] < 0
    any_ended = False
    for e in range(ended.shape[0]):
        any_ended = any_ended or ended[e]
    return n_left, any_ended


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
        self._no_env = np.zeros(self.num_envs, np.bool_)  # (never handed out)
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
        if self._plan is not None:
            compiled_reset.reset_many(self._plan, self.core, self.opts, envs, self._states, self._bufs,
                                      self._workload_seeds, self._scale)
            self._scenarios[envs] = None
            self._jobs[envs] = None
        n_left, self._any_ended = _loaded(envs, self._workload_seeds, self._idle_steps, self._episode_steps, self._ended)
        if n_left:  # (without a plan: every env)
            for e in envs[self._workload_seeds[envs] < 0].tolist():
                self._load_through_loading(e)
        self._check_deadlocks(envs)

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

    def _check_deadlocks(self, envs: np.ndarray | None = None) -> None:
        """Raise for the first env (of ``envs``; None: of all) whose pending jobs no rule can
        ever place."""
        if not np.count_nonzero(self.opts.deadlock):  # (a third of .any()'s time on small arrays)
            return
        stuck_envs = np.flatnonzero(self.opts.deadlock) if envs is None else envs[self.opts.deadlock[envs]]
        if len(stuck_envs):
            e = int(stuck_envs[0])
            stuck = [self._episode_jobs(e)[j].name for j in self.core.pending[e, : self.core.n_pending[e]]]
            raise RuntimeError(f"env {e}: no rule can ever place pending jobs {stuck}")

    @property
    def _obs(self) -> np.ndarray:
        """Every env's current observation (N, obs size): the decision arrays' own."""
        return self.opts.obs

    @property
    def _masks(self) -> np.ndarray:
        return self.opts.mask

    def _info(self, step=None, state=None, end=None, idle=None) -> dict:
        """A batched info in gymnasium's vector convention: the keys of each group given (a
        bool mask: the envs that have them): ``step`` the step's (``invalid_action``, the
        reward's parts), ``state`` the current episode's (``action_mask``, ``time_h``), ``end``
        a finished episode's summary and ``reward_scale`` (and ``jobs``), ``idle`` its
        ``truncated_idle``; the last two only where some env has them, as the single env
        gives them only then. Fresh arrays, zero (None) where an env has no value."""
        n = self.num_envs
        floats, counts = np.empty((len(_FLOAT_KEYS), n)), np.empty((len(decision.SUMMARY_COUNTS), n), np.int64)
        flags, key_masks = np.empty((len(_FLAG_KEYS), n), np.bool_), np.empty((len(_INFO_KEYS), n), np.bool_)
        action_mask = np.empty_like(self.opts.mask)
        none = self._no_env
        n_end, n_idle = _fill_info(
            self.core, none if step is None else step, none if state is None else state,
            none if end is None else end, none if idle is None else idle, self._invalid, self._reward_jct,
            self._reward_cost, self._scale, self.opts.mask, floats, counts, flags, action_mask, key_masks,
        )
        present = (step is not None, state is not None, n_end > 0, n_idle > 0)
        blocks = (floats, counts, flags, action_mask)
        info: dict[str, Any] = {}
        for group in (STEP, STATE, END, IDLE):
            if present[group]:  # (views of the present keys only: each costs about a microsecond)
                for key, mask_key, k, b, row in _GROUP_ENTRIES[group]:
                    info[key] = blocks[b][row] if row >= 0 else blocks[b]
                    info[mask_key] = key_masks[k]
        if present[END] and self.job_records:
            info["jobs"] = np.full(n, None, dtype=object)
            for e in np.flatnonzero(end).tolist():
                info["jobs"][e] = episode_records(self.core, e, self._episode_jobs(e), self._scenario(e).cluster.names)
            info["_jobs"] = end.copy()
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
        return self._obs.copy(), self._info(state=self._every if mask is None else mask)

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
        self._check_deadlocks()
        ends, finished = np.empty((GOING_ON + 1, self.num_envs), np.bool_), np.empty(self.num_envs, np.int64)
        n_ended = _episode_ends(self._invalid, could_wait, self._terminated, stepping, self._idle_steps,
                                self._episode_steps, self.max_idle_steps, self.max_episode_steps or 0, ends, finished)
        terminated, truncated, idle_truncated, ended, summarized, going_on = ends
        any_ended, finished = n_ended > 0, finished[:n_ended]
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            if any_ended:
                # the finished episodes' last observation and info, then their new episodes
                final_info = self._info(step=ended, state=ended, end=summarized, idle=idle_truncated)
                final_obs = np.empty(self.num_envs, object)  # (numpy fills it with None)
                for e, obs in zip(finished.tolist(), self._obs[finished], strict=True):  # rows of a fresh copy
                    final_obs[e] = obs
                self._load(finished)
                infos = {"final_obs": final_obs, "_final_obs": ended.copy(), "final_info": final_info,
                         "_final_info": ended.copy()}
                infos.update(self._info(step=going_on, state=self._every))  # the finished episodes' are in final_info
            else:
                infos = self._info(step=self._every, state=self._every)
        else:  # the envs that reset instead of stepping have no step keys
            infos = self._info(step=stepping, state=self._every, end=summarized, idle=idle_truncated)
            self._ended = ended  # (a row nobody else holds: loading writes it)
            self._any_ended = any_ended
        return self._obs.copy(), self._rewards.copy(), terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """The current action mask of every env (N, n_actions)."""
        return self._masks.copy()
