"""GeoPipeEnv: schedule pipeline-parallel LLM training jobs across geo-distributed regions.

## Description
A cloud of K regions (GPU capacity, electricity price, inter-region bandwidth) receives LLM
training jobs. At every scheduling point the agent picks which pending job to start and how to
place it across regions, or waits for the next event (a job arrives or ends). Costs follow
BACE-Pipe (iteration time Eq. 1, JCT Eq. 3, electricity Eq. 4, GPU and bandwidth constraints
Eq. 5/6); see docs/cost_model.md. One step = one scheduling decision.

## Action Space
``Discrete(W * R + 1)`` with W = ``window`` queue slots and R placement options (``rules``:
the default set's {num_rules} rules, or {num_all_rules} with ``rules="levels"``):
``action = slot * R + rule`` starts the job in that slot with that rule's placement;
``action = W * R`` waits until the next event. Rules (``geo_gym.placement.RULE_NAMES``, the
default set):

| rule | placement |
|---|---|
| 0 pathfinder | Alg. 1 + Alg. 2 (BACE-Pipe) |
| 1 pathfinder_uniform | Alg. 1, uniform allocation (w/o Cost-Min) |
| 2 cr_ldf_cost_min | CR-LDF path + Alg. 2 (w/o Pathfinder) |
| 3 lcf / 4 ldf | cheapest / largest single region |
| 5 cr_lcf / 6 cr_ldf | cross-region by price / from the largest region by bandwidth |
| 7 pathfinder_half / 8 pathfinder_quarter | Alg. 1 + 2 aiming at ceil(K*/2) / ceil(K*/4) GPUs |

``rules="levels"`` makes the GPU count part of the action: after these nine, four more
options, Alg. 1 + 2 aiming at the job's minimum (``pathfinder_min``) and a quarter, half and
three quarters of the way from it to K* (``pathfinder_span25`` / ``_span50`` / ``_span75``;
``placement.LEVEL_RULE_NAMES``), so that Pathfinder offers five GPU levels from the memory
minimum to K*. ``rules`` also takes a list of rule names (``placement.ALL_RULE_NAMES``): the
options in that order.

Invalid actions are masked: ``info["action_mask"]`` and ``action_masks()`` (bool, one entry
per action). An option that would place a job on fewer GPUs than its start rule's minimum
(by default the fewest GPUs its model's memory fits on, ``geo_gym/memory.py``) is invalid. **A masked action is treated as "wait"**: time advances to the next event if
there is one, else nothing happens; ``info["invalid_action"]`` is True. Rewards stay
consistent, so the episode-return identity below holds for any action sequence.

## Observation Space
``Box(0, 100, ({size},), float32)``:

Names from ``geo_gym.decision`` (``GLOBAL_FEATURES``, ``REGION_FEATURES``, ``SLOT_FEATURES``,
``OPTION_FEATURES``; ``decision.slot_index`` etc. give an entry's index, and
``decision.feature_names(K, W)`` every entry's name):

{observation_table}

Slot s occupies ``{slot_start}``, its options follow it. Future submissions are not
shown (a real scheduler does not know them), nor are true durations or failure times. Values are clipped at 100. Durations shown are
predictions (``pred_iters``), never the truth.

## Rewards
Per step: ``-(delta sum over jobs in the system of hours + cost_weight x delta dollars) /
scale``, with ``scale`` = sum over the episode's jobs of their ideal durations at their
configured (requested) iterations, E_j(K*) in hours: a constant of the workload that needs
neither the hidden fates nor a predictor. Hence an episode's return is exactly
``-(N x avg JCT_h + cost_weight x total cost $) / scale``; ``info["reward_jct"]`` and
``info["reward_cost"]`` give the two parts of each step, and the final ``info`` gives
``reward_scale``.

## Starting State
Empty cluster at t = 0; the workload is drawn from the scenario with a seed from
``self.np_random`` (so ``reset(seed=s)`` fixes it); jobs submitted at t = 0 are queued. On the
built-in scenarios without per-episode uncertainty draws the whole reset is one compiled call
(``geo_gym.compiled_reset``, the same numbers), and ``current_scenario`` is built from the
workload's seed when read.

## Episode End
Terminated when every job has ended. At the end ``info`` holds ``avg_jct_h``, ``total_cost``,
``makespan_h``, ``avg_wait_h``, ``failures``, ``reward_scale`` and ``jobs`` (a record per job;
``job_records=False`` leaves them out: building them costs about as much as a reset).
Truncated after ``max_idle_steps`` consecutive steps that change nothing: a masked action
when no event is pending (time cannot advance and nothing is placed), so that no policy,
masked or not, can loop forever. A truncated episode's last ``info`` has the same keys (its
unfinished jobs make ``avg_jct_h`` and ``makespan_h`` NaN) and ``truncated_idle`` = True.

## Arguments
``scenario`` (name, ``Scenario``, or a list of Scenarios of one region count: a pool from which
each episode's workload seed picks one, e.g. a trace's windows), ``scenario_kwargs`` (its knobs), ``window`` (W, 8),
``cost_weight`` (hours per dollar, 0.1), ``max_jobs`` (jobs the simulator state is first
sized for; it grows to fit any workload),
``uncertainty`` (an ``UncertaintyConfig`` or a preset name: "perfect" (default), "realistic",
"schedmate"), ``warmup_workloads`` (workloads whose jobs pre-fill the retrieval history),
``warmup_scenario`` (instead, one fixed workload whose jobs pre-fill it, e.g. the preceding
trace window), ``max_idle_steps`` (100: consecutive steps that change nothing before the
episode is truncated), ``job_records`` (True: the last ``info`` holds a record per job),
``start_rule`` (how few GPUs a job may start on: "memory", the physical minimum
of its model's memory, is the built-in scenarios' default; "any", "fraction:X", "kstar",
"request"; None keeps the scenario's own; ``geo_gym/start_rule.py``), ``rules`` (the
placement options of each slot: None or "default", "levels", or a list of rule names; see
Action Space), ``render_mode``
(None, "rgb_array" or "human"; see Rendering).

## Rendering
``render_mode="rgb_array"``: ``render()`` returns the schedule so far as an (H, W, 3) uint8
picture (800 x 480): one lane per region with every attempt of every job as a bar over its
GPUs, coloured by model, failed attempts hatched with an x at the failure; the queue and the
inter-region links' use over time (``geo_gym/render.py``). It works with gymnasium's
``RecordVideo`` (needs moviepy: the ``dev`` extra). ``"human"``: the same in a matplotlib
window, redrawn at every reset and step (``render()`` returns None). With a render mode the
env logs every start in ``env.schedule`` (a ``geo_gym.render.ScheduleLog``); without one it
logs nothing. ``geo_gym.plot_schedule`` draws the same from ``simulate(..., record=True)``.
"""

from __future__ import annotations

import gc
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from geo_gym import compiled_reset, decision, sim
from geo_gym.loading import start_episode
from geo_gym.placement import ALL_RULE_NAMES, NUM_RULES, rule_set
from geo_gym.scenarios import Scenario, scenario_factory
from geo_gym.start_rule import StartRule
from geo_gym.state import SECONDS_PER_HOUR
from geo_gym.uncertainty import UncertaintyConfig
from geo_gym.workload import label_columns

# The observation's size and table come from geo_gym.decision, where the layout is named once.
__doc__ = __doc__.format(
    num_rules=NUM_RULES,
    num_all_rules=len(ALL_RULE_NAMES),
    size=f"{decision.NUM_GLOBAL} + {decision.NUM_REGION}K + W ({decision.NUM_SLOT} + {decision.NUM_OPTION}R)",
    slot_start=f"{decision.NUM_GLOBAL} + {decision.NUM_REGION}K + s ({decision.NUM_SLOT} + {decision.NUM_OPTION}R)",
    observation_table=decision.observation_table(),
)


def as_uncertainty(uncertainty) -> UncertaintyConfig:
    """None (perfect world), a preset name, a dict of UncertaintyConfig fields (optionally with
    "preset": name as the base), or an UncertaintyConfig."""
    if uncertainty is None:
        return UncertaintyConfig()
    if isinstance(uncertainty, str):
        return UncertaintyConfig.preset(uncertainty)
    if isinstance(uncertainty, dict):
        fields = dict(uncertainty)
        preset = fields.pop("preset", None)
        return UncertaintyConfig.preset(preset, **fields) if preset else UncertaintyConfig(**fields)
    if isinstance(uncertainty, UncertaintyConfig):
        return uncertainty
    raise ValueError(f"uncertainty must be a preset name, dict or UncertaintyConfig, got {uncertainty!r}")


def episode_columns(core: sim.Core, e: int, jobs: list, region_names) -> dict[str, list]:
    """Env e's finished episode as columns, one entry per job (in core order): name, model,
    dataset, submit/start/end/wait/JCT (h), cost, GPUs, path (region names), GPUs per path
    region, infrastructure failures, iterations run (its fate), configured and predicted.
    Built column by column (a whole trace is 111k jobs); values are Python numbers."""
    columns = episode_arrays(core, e, jobs, region_names)
    return {key: value if isinstance(value, list) else value.tolist() for key, value in columns.items()}


def episode_arrays(core: sim.Core, e: int, jobs: list, region_names, paths: bool = True,
                   copy: bool = True) -> dict:
    """``episode_columns`` with the numeric columns as numpy arrays (copies, float64 or
    int64: the dtypes a DataFrame gives the lists), the labels as ``label_columns(jobs,
    arrays=True)`` gives them: what ``geo_gym.simulate``'s per-job table is built from,
    without a Python number per cell. With ``paths=False`` the "path" and "gpus_per_region"
    entries are left as ``_PathParts`` (every job's path regions and GPUs, flat, copied out of
    the core), for ``path_lists`` to turn into the lists once the core is gone. With ``copy=False``
    the columns the core holds as they are (cost and iterations) are views of it and the hour
    columns are left as ``_Hours`` (views of its submit, start and end seconds) for
    ``hour_columns`` to compute: for a caller that drops the core, never to reuse it, before
    it builds the table (``geo_gym.simulate``: no copy of those beside the whole core)."""
    n = len(jobs)
    own = np.copy if copy else (lambda a: a)
    hours = dict.fromkeys(_HOUR_KEYS, _Hours(core.submit_s[e, :n], core.start_s[e, :n], core.end_s[e, :n]))
    if copy:
        hour_columns(hours)
    # every job's path entries, flat in job then path order
    plen = core.plen[e, :n]
    on_path = np.arange(core.path.shape[2]) < plen[:, None]
    regions = core.path[e, :n][on_path]
    parts = _PathParts(regions, core.alloc[e, np.nonzero(on_path)[0], regions], plen.copy(), tuple(region_names))
    columns = {
        **label_columns(jobs, arrays=True),
        **hours,
        "cost": own(core.cost_usd[e, :n]),
        "gpus": core.gpus[e, :n].astype(np.int64),
        "path": parts,
        "gpus_per_region": parts,
        "failures": core.n_fail[e, :n].astype(np.int64),
        "iters": own(core.iters[e, :n]),  # what it ran (its fate)
        "configured_iters": own(core.full_iters[e, :n]),
        "predicted_iters": own(core.pred_iters[e, :n]),
    }
    return path_lists(columns) if paths else columns


_HOUR_KEYS = ("submit_h", "start_h", "end_h", "wait_h", "jct_h")


class _Hours(NamedTuple):
    submit: np.ndarray  # seconds, each job's
    start: np.ndarray
    end: np.ndarray


def hour_columns(columns: dict) -> dict:
    """``columns`` with its ``_Hours`` entries (``episode_arrays(..., copy=False)``) as the
    hour columns, in place."""
    hours = columns.get("submit_h")
    if isinstance(hours, _Hours):
        submit, start, end = hours
        columns.update({
            "submit_h": submit / SECONDS_PER_HOUR,
            "start_h": start / SECONDS_PER_HOUR,
            "end_h": end / SECONDS_PER_HOUR,
            "wait_h": (start - submit) / SECONDS_PER_HOUR,
            "jct_h": (end - submit) / SECONDS_PER_HOUR,
        })
    return columns


class _PathParts(NamedTuple):
    regions: np.ndarray  # every job's path regions, flat in job then path order
    gpus: np.ndarray  # the GPUs in each
    plen: np.ndarray  # regions per job
    region_names: tuple


def path_lists(columns: dict) -> dict:
    """``columns`` (``episode_arrays(..., paths=False)``) with its "path" and
    "gpus_per_region" entries as per-job lists (region names; GPUs), in place. The lists are
    built with the garbage collector paused: lists of strings and ints hold no cycles, and on
    a trace of millions of jobs its passes over the objects already alive took most of the
    time."""
    parts = columns["path"]
    if not isinstance(parts, _PathParts):
        return columns
    paused = gc.isenabled()
    gc.disable()
    try:
        names = np.asarray(parts.region_names, dtype=object)[parts.regions].tolist()
        columns["path"] = _split(names, parts.plen)
        del names
        columns["gpus_per_region"] = _split(parts.gpus.tolist(), parts.plen)
    finally:
        if paused:
            gc.enable()
    return columns


def _split(flat: list, lengths: np.ndarray) -> list[list]:
    """``flat`` cut into consecutive lists of ``lengths`` items (slices: exactly sized lists,
    without a list of bounds)."""
    out = []
    a = 0
    for k in lengths.tolist():
        b = a + k
        out.append(flat[a:b])
        a = b
    return out


def episode_records(core: sim.Core, e: int, jobs: list, region_names) -> list[dict]:
    """``episode_columns`` as one record (dict) per job."""
    columns = episode_columns(core, e, jobs, region_names)
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def episode_summary(core: sim.Core, e: int) -> dict[str, float]:
    """avg_jct_h, total_cost, makespan_h, avg_wait_h, failures, false_restarts (application
    failures the failure handler misjudged and restarted), rerun_gpu_h and rerun_cost (what
    the attempts that re-ran them held and spent) of env e's finished episode."""
    values = np.empty(len(decision.SUMMARY_KEYS))
    decision.summary_values(core, e, values)
    out = dict(zip(decision.SUMMARY_KEYS, values.tolist(), strict=True))
    for key in decision.SUMMARY_COUNTS:
        out[key] = int(out[key])
    return out


def _action_index(action, n: int | None = None) -> int:
    """An action as a Python int: an int, a numpy integer, or a one-element integer array;
    with ``n``, one of Discrete(n)'s 0..n-1 (anything else is an error, not a "wait")."""
    if isinstance(action, bool):
        raise ValueError(f"an action is one integer, got {action!r}")
    if isinstance(action, (int, np.integer)):
        a = int(action)
    else:
        arr = np.asarray(action)
        if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"an action is one integer, got {action!r}")
        a = int(arr.reshape(()))
    if n is not None and not 0 <= a < n:
        raise ValueError(f"action {a} is outside the action space Discrete({n})")
    return a


class GeoPipeEnv(gym.Env):
    __doc__ = __doc__
    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": 4}

    def __init__(
        self,
        scenario: str | Scenario | list[Scenario] = "paper-default",
        scenario_kwargs: dict[str, Any] | None = None,
        window: int = 8,
        cost_weight: float = 0.1,
        max_jobs: int | None = None,
        uncertainty=None,
        warmup_workloads: int = 0,
        warmup_scenario: Scenario | None = None,
        start_rule: StartRule | str | None = None,
        max_idle_steps: int = 100,
        render_mode: str | None = None,
        job_records: bool = True,
        rules=None,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.schedule = None  # a geo_gym.render.ScheduleLog of the episode, with a render mode
        self._figure = None
        if int(window) != window or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        if max_jobs is not None and (isinstance(max_jobs, bool) or not isinstance(max_jobs, int | np.integer)
                                     or max_jobs < 1):
            raise ValueError(f"max_jobs must be an integer >= 1 or None, got {max_jobs!r}")
        if not (cost_weight >= 0 and np.isfinite(cost_weight)):
            raise ValueError(f"cost_weight must be a finite number >= 0, got {cost_weight!r}")
        self.scenario = scenario
        self.scenario_kwargs = dict(scenario_kwargs or {})
        self.window = int(window)
        self.cost_weight = float(cost_weight)
        if isinstance(max_idle_steps, bool) or int(max_idle_steps) != max_idle_steps or max_idle_steps < 1:
            raise ValueError(f"max_idle_steps must be an integer >= 1, got {max_idle_steps!r}")
        self.max_idle_steps = int(max_idle_steps)
        if not isinstance(job_records, bool | np.bool_):
            raise ValueError(f"job_records must be True or False, got {job_records!r}")
        self.job_records = bool(job_records)
        self._idle_steps = 0
        self.uncertainty = as_uncertainty(uncertainty)
        if int(warmup_workloads) != warmup_workloads or warmup_workloads < 0:
            raise ValueError(f"warmup_workloads must be an integer >= 0, got {warmup_workloads!r}")
        self.warmup_workloads = int(warmup_workloads)
        if warmup_scenario is not None and self.warmup_workloads:
            raise ValueError("give warmup_workloads or warmup_scenario, not both")
        self.warmup_scenario = warmup_scenario
        if scenario == "random" and self.scenario_kwargs.get("num_regions") is None:
            raise ValueError(
                "scenario 'random' draws 3-6 regions per seed and an env's observation has a fixed "
                "size: pass scenario_kwargs={'num_regions': K}"
            )
        self._make_scenario = scenario_factory(scenario, start_rule, **self.scenario_kwargs)
        probe = self._make_scenario(0)
        self.start_rule = probe.start_rule
        self.num_regions = probe.cluster.num_regions
        self.max_jobs = int(max_jobs or len(probe.jobs))
        self.core = sim.allocate(1, self.num_regions, self.max_jobs)
        self.rules = rule_set(rules)  # the option set's rule names, in option order
        self.num_rules = len(self.rules)
        self.opts = decision.allocate_options(1, self.num_regions, self.window, self.rules)
        self.observation_space = gym.spaces.Box(
            0.0, decision.OBS_HIGH, (decision.obs_size(self.num_regions, self.window, self.num_rules),), np.float32
        )
        self.action_space = gym.spaces.Discrete(decision.num_actions(self.window, self.num_rules))
        self.wait_action = self.window * self.num_rules
        self._scale = 1.0
        # the episode's workload: its Scenario and jobs, or (compiled resets) the seed that builds them
        self._scenario: Scenario | None = None
        self._jobs = None
        self._workload_seed: int | None = None
        self._plan, self.core = compiled_reset.plan(
            self._make_scenario, probe, self.uncertainty, self.warmup_workloads, self.core, self.warmup_scenario
        )
        self._rng_views: compiled_reset.Views | None = None  # np_random's state, for compiled resets
        # core and options as one struct (decision.Pair), and what a compiled reset reads
        self._pair = decision.pair(self.core, self.opts)
        self._resetter: compiled_reset.Resetter | None = None

    def _checked_scenario(self, seed: int) -> Scenario:
        scen = self._make_scenario(seed)
        if scen.cluster.num_regions != self.num_regions:
            raise ValueError(
                f"scenario has {scen.cluster.num_regions} regions; this env was built for "
                f"{self.num_regions} (fix num_regions in scenario_kwargs)"
            )
        return scen

    @property
    def _obs(self) -> np.ndarray:
        """The current observation (the decision arrays' own row: a copied env has its own)."""
        return self.opts.obs[0]

    @property
    def _mask(self) -> np.ndarray:
        return self.opts.mask[0]

    def _info(self) -> dict[str, Any]:
        return {"action_mask": self._mask.copy(), "time_h": float(self.core.now_s[0] / SECONDS_PER_HOUR)}

    @property
    def current_scenario(self) -> Scenario | None:
        """The episode's workload (None before the first reset); a compiled reset builds it
        from its seed when asked."""
        if self._scenario is None and self._workload_seed is not None:
            self._scenario = self._make_scenario(self._workload_seed)
        return self._scenario

    @property
    def jobs(self):
        """The episode's jobs in core index order (submit order)."""
        if self._jobs is not None:
            return self._jobs
        scen = self.current_scenario
        return [] if scen is None else scen.jobs  # (a compiled reset's workload: a JobTable)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        drawn = self._compiled_reset() if self._plan is not None else None
        if drawn is not None:
            self._workload_seed, self._scale = drawn
            self._scenario = self._jobs = None
        else:
            self.core, self._jobs, self._scenario, self._scale = start_episode(
                self.core, 0, self._checked_scenario, self.np_random, self.uncertainty,
                self.warmup_workloads, self.warmup_scenario, self._make_scenario.num_jobs,
            )
            self._workload_seed = None
            if self.core is not self._pair.__dict__["core"]:  # loading grew the core
                self._pair = decision.pair(self.core, self.opts)
            decision.begin(self.core, self.opts, 0)
        self._check_deadlock()
        self._idle_steps = 0
        if self.render_mode is not None:
            from geo_gym.render import ScheduleLog

            self.schedule = ScheduleLog(self.core, 0, self.jobs, self.current_scenario.cluster.names)
            if self.render_mode == "human":
                self._show()
        return self._obs.copy(), self._info()

    def _compiled_reset(self) -> tuple[int, float] | None:
        """``compiled_reset.reset_env`` from ``np_random``'s own state; None: reset through
        loading (the episode needs it, or ``np_random`` is not numpy's PCG64)."""
        held = compiled_reset.views(self._rng_views, self.np_random)
        if held is None:
            return None
        r = self._resetter
        if r is None or r.__dict__["views"] is not held or r.__dict__["pair"] is not self._pair:
            r = self._resetter = compiled_reset.resetter(self._pair, self._plan, held)
        self._rng_views = held
        return compiled_reset.reset_env(r)

    def _check_deadlock(self) -> None:
        if self.opts.deadlock[0]:
            stuck = [self.jobs[j].name for j in self.core.pending[0, : self.core.n_pending[0]]]
            raise RuntimeError(
                f"no rule can ever place pending jobs {stuck}: each needs at least the GPUs of its "
                f"start rule ({self.start_rule}) free at once, and nothing more will free up"
            )

    def step(self, action):
        if self._scenario is None and self._workload_seed is None:
            raise RuntimeError("call reset() before step()")
        a = _action_index(action, self.action_space.n)
        could_wait = bool(self.opts.wait_ok[0])
        placing = self._placement(a) if self.schedule is not None else None
        reward, reward_jct, reward_cost, invalid, terminated = decision.step_pair(
            self._pair, a, self.cost_weight, self._scale
        )
        terminated = bool(terminated)
        if placing is not None and not invalid:  # a valid start action placed that job there
            self.schedule.record(self.core, 0, *placing)
        # an invalid action with no pending event changes nothing (the step's contract)
        self._idle_steps = self._idle_steps + 1 if invalid and not could_wait else 0
        truncated = not terminated and self._idle_steps >= self.max_idle_steps
        self._check_deadlock()
        info = self._info()
        info["invalid_action"] = bool(invalid)
        info["reward_jct"] = float(reward_jct)
        info["reward_cost"] = float(reward_cost)
        if terminated or truncated:
            info.update(episode_summary(self.core, 0))
            info["reward_scale"] = self._scale
            if self.job_records:
                info["jobs"] = episode_records(self.core, 0, self.jobs, self.current_scenario.cluster.names)
        if truncated:
            info["truncated_idle"] = True
        if self.render_mode == "human":
            self._show()
        return self._obs.copy(), float(reward), terminated, truncated, info

    def _placement(self, a: int) -> tuple[int, np.ndarray, np.ndarray] | None:
        """(job, path, GPUs per path region) that action ``a`` would place, read before the
        step (placing shifts the queue, a failure in the same step clears the core's row)."""
        slot, rule = divmod(a, self.num_rules)
        if slot >= self.opts.n_win[0]:
            return None
        path = self.opts.path[0, slot, rule, : self.opts.plen[0, slot, rule]].copy()
        return int(self.opts.win[0, slot]), path, self.opts.alloc[0, slot, rule][path]

    def render(self):
        """The schedule so far: an (H, W, 3) uint8 array ("rgb_array"), or drawn in a
        matplotlib window ("human", returns None); see Rendering."""
        if self.render_mode is None:
            gym.logger.warn("render() without a render_mode: pass render_mode='rgb_array' or 'human' to the env")
            return None
        if self.schedule is None:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "human":
            self._show()
            return None
        from matplotlib.figure import Figure

        from geo_gym import render

        if self._figure is None:
            self._figure = Figure(figsize=render.FIGSIZE, dpi=render.DPI)
        return render.to_rgb(self._draw(self._figure))

    def _draw(self, fig):
        from geo_gym import render

        now_h = float(self.core.now_s[0] / SECONDS_PER_HOUR)
        return render.draw(fig, self.schedule, now_h, title=self.current_scenario.name)

    def _show(self) -> None:
        """Redraw the human-mode window (a pyplot figure, kept open across episodes)."""
        import matplotlib.pyplot as plt

        from geo_gym import render

        if self._figure is None or not plt.fignum_exists(self._figure.number):
            self._figure = plt.figure(figsize=render.FIGSIZE, dpi=render.DPI)
        self._draw(self._figure)
        plt.pause(1.0 / self.metadata["render_fps"])

    def close(self):
        if self._figure is not None and self.render_mode == "human":
            import matplotlib.pyplot as plt

            plt.close(self._figure)
        self._figure = None
        super().close()

    def action_masks(self) -> np.ndarray:
        """sb3-contrib MaskablePPO's hook."""
        return self._mask.copy()

    def decode_action(self, action: int) -> tuple[int, str] | None:
        """(queue slot, rule name) of an action, or None for "wait"."""
        a = _action_index(action)
        if not 0 <= a <= self.wait_action:
            raise ValueError(f"action {a} is outside Discrete({self.wait_action + 1})")
        if a == self.wait_action:
            return None
        return a // self.num_rules, self.rules[a % self.num_rules]
