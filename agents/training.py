"""SB3 set-up on the native vector env, checkpoints, and the callbacks that log a run:
held-out evaluations against BACE-Pipe, the training episodes' outcomes, the run's settings."""

from __future__ import annotations

import json
import random
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import HParam
from stable_baselines3.common.monitor import ResultsWriter
from stable_baselines3.common.save_util import load_from_zip_file
from stable_baselines3.common.vec_env import VecMonitor

import baselines
from agents.evaluation import evaluate
from agents.features import SlotAttention, SlotEncoder
from agents.optim import EagerAdam
from agents.policy import AgentPolicy
from agents.protocol import objective
from geo_gym.sb3 import SB3VecEnv
from geo_gym.vector import SUMMARY_KEYS, GeoPipeVectorEnv

ALGOS = {"ppo": PPO, "maskable-ppo": MaskablePPO}
FEATURES = {"slots": SlotEncoder, "attention": SlotAttention}
# scripts/train_ppo.py's PPO settings besides the rollout length (--n-steps)
PPO_KWARGS = {"batch_size": 256, "learning_rate": 3e-4, "ent_coef": 0.01, "gamma": 1.0, "gae_lambda": 0.95}
# the episode summary each finished training episode adds to its row of monitor.csv and to
# SB3's episode record (rollout/ep_<key>_mean in TensorBoard)
EPISODE_KEYS = SUMMARY_KEYS


def make_vec_env(num_envs: int, scenario, scenario_kwargs=None, seed: int = 0, monitor_dir=None,
                 append: bool = False, **env_kwargs) -> VecMonitor:
    """The native vector env as SB3's VecEnv, under SB3's ``VecMonitor``: each finished episode's
    return, length, time and ``EPISODE_KEYS`` go into its ``info["episode"]`` (SB3's
    rollout/ep_rew_mean and ``EpisodeMetrics``) and, with ``monitor_dir``, a row of
    monitor_dir/monitor.csv (``append``: after the rows already there, e.g. a resumed run's,
    with their start time, so that its ``t`` column keeps counting from the first start)."""
    venv = VecMonitor(SB3VecEnv(GeoPipeVectorEnv(num_envs, scenario, scenario_kwargs, **env_kwargs)),
                      info_keywords=EPISODE_KEYS)
    if monitor_dir is not None:
        path = Path(monitor_dir) / "monitor.csv"
        append = append and path.exists()
        if append:
            with path.open() as f:
                venv.t_start = json.loads(f.readline().lstrip("#"))["t_start"]
        venv.results_writer = ResultsWriter(str(path), header={"t_start": venv.t_start, "env_id": "geo_gym/GeoPipe-v0"},
                                            extra_keys=EPISODE_KEYS, override_existing=not append)
    venv.seed(seed)
    return venv


def make_model(algo: str, env, seed: int, tensorboard_log: str | None, features: str = "slots", **ppo_kwargs):
    """SB3's ``algo`` on ``env`` with the project's network: ``features`` "slots" (one encoder
    shared by the queue slots, agents/features.py) or "attention" (the same, then
    self-attention over the slots), two 128-wide layers, EagerAdam."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {sorted(ALGOS)}, got {algo!r}")
    if features not in FEATURES:
        raise ValueError(f"features must be one of {sorted(FEATURES)}, got {features!r}")
    # the observation size alone is ambiguous beyond 45 regions; the env knows its count, and
    # its placement options per slot
    layout = {key: int(env.get_attr(key)[0]) for key in ("num_regions", "num_rules")}
    policy_kwargs = {
        "features_extractor_class": FEATURES[features],
        "features_extractor_kwargs": layout,
        "net_arch": [128, 128],
        # torch.optim.Adam's arithmetic without its torch._dynamo import (agents/optim.py); SB3
        # gives Adam eps=1e-5 only when the class is exactly torch.optim.Adam, so it is given here
        "optimizer_class": EagerAdam,
        "optimizer_kwargs": {"eps": 1e-5},
    }
    return ALGOS[algo](
        "MlpPolicy", env, seed=seed, tensorboard_log=tensorboard_log, policy_kwargs=policy_kwargs,
        verbose=0, **ppo_kwargs,
    )


def load_model(algo: str, path: str | Path, env=None):
    return ALGOS[algo].load(str(path), env=env, device="cpu")


class CheckpointError(RuntimeError):
    """A checkpoint that does not reload, or no usable checkpoint to resume from."""


def previous_path(last: str | Path) -> Path:
    """Where the checkpoint before ``last`` is kept: runs/<name>/previous.zip next to last.zip."""
    last = Path(last)
    return last.with_name("previous.zip" if last.name == "last.zip" else last.stem + "-previous.zip")


def checkpoint_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a readable checkpoint (missing, truncated, corrupt), in one line, or
    None when it reads. Touches no random state; whether it fits an algorithm and envs is the
    loader's question."""
    path = Path(path)
    if not path.exists():
        return "missing"
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
        if bad is not None:
            return f"{bad} inside fails its checksum"
        data, params, _ = load_from_zip_file(path, device="cpu", print_system_info=False)
    except Exception as err:  # noqa: BLE001 - whatever the reader trips on, the file is unusable
        return " ".join(f"{type(err).__name__}: {err}".split())
    if not data or not params:
        return "no model data or parameters in it"
    return None


def verify_checkpoint(path: str | Path, algo_class) -> None:
    """Reload ``path`` as ``algo_class`` (as load_model does); raise CheckpointError naming the
    file when that fails. The global random states are restored afterwards: loading reseeds
    them, and a verified run must train exactly as an unverified one."""
    states = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []):
        try:
            model = algo_class.load(str(path), device="cpu")
        except Exception as err:  # noqa: BLE001
            raise CheckpointError(f"checkpoint {path} does not reload: {type(err).__name__}: {err}") from err
        finally:
            random.setstate(states[0])
            np.random.set_state(states[1])
    if model is None or getattr(model, "policy", None) is None:
        raise CheckpointError(f"checkpoint {path} does not reload: no model in it")


def pick_checkpoint(last: str | Path) -> tuple[Path, str | None]:
    """The checkpoint to resume from: ``last`` if it reads, else the previous one, with a one-line
    note naming the broken file. CheckpointError naming both files when neither reads."""
    last = Path(last)
    previous = previous_path(last)
    problem = checkpoint_problem(last)
    if problem is None:
        return last, None
    fallback = checkpoint_problem(previous)
    if fallback is None:
        return previous, f"{last} is unusable ({problem}); resuming from {previous}"
    raise CheckpointError(f"no usable checkpoint: {last} ({problem}), {previous} ({fallback})")


class CheckpointLast(BaseCallback):
    """Every ``every`` steps save the model to ``path`` (atomically: write a partial file, reload
    it to verify it, then rename), keeping the one before as previous_path(path), so a killed
    run loses at most one interval and a broken last checkpoint still leaves an older one.
    ``on_save(path, timesteps)``, if given, is called after each save (a sweep's trial reports
    the checkpoint to Ray Tune there)."""

    def __init__(self, path: Path, every: int, on_save: Callable[[Path, int], None] | None = None):
        super().__init__()
        self.path = Path(path)
        self.previous = previous_path(self.path)
        self.every = int(every)
        self.on_save = on_save
        self._last = 0

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.stem + "-partial.zip")
        self.model.save(str(tmp))
        verify_checkpoint(tmp, type(self.model))
        if self.path.exists():
            self.path.replace(self.previous)
        tmp.replace(self.path)
        if self.on_save is not None:
            self.on_save(self.path, self.num_timesteps)

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


class ProgressLines(BaseCallback):
    """Every ``every`` steps print one flushed line, for logs without a progress bar:
    "timesteps 20480/100352, 31 s, agent JCT 0.90x BACE-Pipe, cost 1.02x" (the ratios when
    ``compare`` evaluated since the previous line). Reads only: training is unchanged."""

    def __init__(self, every: int, total: int, compare: CompareToBaceCallback | None = None,
                 write: Callable[[str], None] | None = None):
        super().__init__()
        self.every = int(every)
        self.total = int(total)
        self.compare = compare
        self.write = write or (lambda line: print(line, flush=True))
        self._last = 0
        self._seen = 0
        self._start = 0.0

    def _on_training_start(self) -> None:
        self._last = self.num_timesteps - self.num_timesteps % self.every
        self._seen = len(self.compare.history) if self.compare is not None else 0
        self._start = time.time()

    def _on_step(self) -> bool:
        if self.num_timesteps - self._last >= self.every:
            self._last = self.num_timesteps
            self.write(self.line())
        return True

    def line(self) -> str:
        text = f"timesteps {self.num_timesteps}/{self.total}, {time.time() - self._start:.0f} s"
        if self.compare is not None and len(self.compare.history) > self._seen:
            self._seen = len(self.compare.history)
            row = self.compare.history[-1]
            text += f", agent JCT {row['jct_ratio']:.2f}x BACE-Pipe, cost {row['cost_ratio']:.2f}x"
            if "objective_ratio" in row:
                text += f"; objective {row['objective_ratio']:.3f}x best fixed"
        return text


class CompareToBaceCallback(BaseCallback):
    """Every ``every`` steps, and at the end of training (unless it has just done so), run the
    agent and BACE-Pipe on the same held-out seeds and log both to TensorBoard:
    eval/agent_avg_jct_h, eval/bace_avg_jct_h, eval/jct_ratio, the total costs and their ratio,
    and the infrastructure failures per episode of each. With ``best_fixed`` (name, policy):
    the protocol's best fixed policy too (agents/protocol.py: chosen on validation seeds, not
    these), as eval/best_avg_jct_h, eval/best_total_cost and eval/objective_ratio, agent / best
    fixed in the trained objective (N x avg JCT + ``cost_weight`` x cost, ratio of the means
    over these seeds). ``at_start``: evaluate once before the first update as well (the
    starting policy, e.g. after behaviour cloning)."""

    def __init__(self, every: int, scenario, seeds, scenario_kwargs=None, env_kwargs=None,
                 best_fixed: tuple[str, object] | None = None, cost_weight: float = 0.0, at_start: bool = False):
        super().__init__()
        self.every = int(every)
        self.scenario = scenario
        self.seeds = list(seeds)
        self.scenario_kwargs = scenario_kwargs
        self.env_kwargs = env_kwargs
        self.cost_weight = cost_weight
        self.at_start = at_start
        self._last = 0
        self.history: list[dict] = []
        # the fixed policies are deterministic: evaluate them once
        fixed = {"bace_pipe": baselines.make("bace_pipe")}
        if best_fixed is not None:
            fixed["best"] = best_fixed[1]
        runs = evaluate(fixed, scenario, self.seeds, scenario_kwargs, env_kwargs)
        self._bace = runs[runs.policy == "bace_pipe"]
        self._best = runs[runs.policy == "best"] if best_fixed is not None else None

    def _on_training_start(self) -> None:
        self._last = self.num_timesteps - self.num_timesteps % self.every  # as CheckpointLast
        if self.at_start:
            self._evaluate()

    def _on_step(self) -> bool:
        if self.num_timesteps - self._last >= self.every:
            self._last = self.num_timesteps
            self._evaluate()
        return True

    def _on_training_end(self) -> None:
        # every run logs eval/ at least once, whatever --eval-every; SB3 writes no log after
        # the last update, so this one is written here (with the last update's train/ values)
        if not self.history or self.history[-1]["timesteps"] != self.num_timesteps:
            self._evaluate()
            self.logger.dump(self.num_timesteps)

    def _evaluate(self) -> None:
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
        if self._best is not None:
            row["best_avg_jct_h"] = float(self._best.avg_jct_h.mean())
            row["best_total_cost"] = float(self._best.total_cost.mean())
            row["objective_ratio"] = float(
                objective(agent.avg_jct_h, agent.total_cost, agent.num_jobs, self.cost_weight).mean()
                / objective(self._best.avg_jct_h, self._best.total_cost, self._best.num_jobs, self.cost_weight).mean())
        self.history.append(row)
        for key, value in row.items():
            if key != "timesteps":
                self.logger.record(f"eval/{key}", value)


class EpisodeMetrics(BaseCallback):
    """After each rollout, the training episodes' outcomes beside SB3's rollout/ep_rew_mean and
    over the same episodes (SB3's last ``stats_window_size``, 100 by default): the mean of each
    ``EPISODE_KEYS`` value as rollout/ep_<key>_mean (rollout/ep_avg_jct_h_mean,
    rollout/ep_total_cost_mean, rollout/ep_failures_mean, ...). Needs ``make_vec_env``'s
    VecMonitor, which puts them in SB3's episode records. Reads only: training is unchanged."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        episodes = [ep for ep in self.model.ep_info_buffer if EPISODE_KEYS[0] in ep]
        if episodes:
            for key in EPISODE_KEYS:
                self.logger.record(f"rollout/ep_{key}_mean", float(np.mean([ep[key] for ep in episodes])))


class RunSettings(BaseCallback):
    """At the start of training, ``settings`` (a flat dict: the script's options) in
    TensorBoard twice: as the text "settings" (a markdown table, TEXT tab) and as SB3's
    ``HParam`` (HPARAMS tab, beside ``metrics``, the scalar tags to compare runs by). Values
    that are not numbers, strings or booleans (dicts, lists, None) are written as JSON."""

    METRICS = ("eval/objective_ratio", "eval/jct_ratio", "eval/cost_ratio", "rollout/ep_rew_mean", "rollout/ep_avg_jct_h_mean")

    def __init__(self, settings: dict, metrics=METRICS):
        super().__init__()
        self.settings = {key: value if isinstance(value, bool | int | float | str) else json.dumps(value)
                         for key, value in settings.items()}
        self.metrics = tuple(metrics)

    def _on_training_start(self) -> None:
        rows = "\n".join(f"| {key} | {value} |" for key, value in self.settings.items())
        text_only = ("stdout", "log", "json", "csv")
        self.logger.record("settings", f"| setting | value |\n|:--|:--|\n{rows}", exclude=text_only)
        # HParam needs a value per metric but writes only the tags: the HPARAMS tab shows the
        # run's own scalars under them
        self.logger.record("hparams", HParam(self.settings, {m: 0.0 for m in self.metrics}), exclude=text_only)
        self.logger.dump(self.num_timesteps)

    def _on_step(self) -> bool:
        return True
