"""Training sweeps: several training runs (``agents.run.train_run``) over seeds, learning rates
and budgets, one after the other or as Ray Tune trials (scripts/sweep.py, docs/scale.md).

Each trial writes its usual run folder, ``<root>/<trial>/`` (checkpoints, TensorBoard logs,
comparison table, protocol.json). Under Tune, a trial reports every checkpoint it saves
(last.zip, with its evaluation history so far) to Tune, and Tune restarts a trial whose worker
or node is lost (``FailureConfig(max_failures)``) from its last reported checkpoint: the
restarted trial copies it into its run folder and resumes it as ``train_ppo.py --resume``
would. ``summary`` ranks the trials by agent / best fixed policy in the trained objective.

Ray is imported only by ``run_tune``; ``run_serial`` needs none.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from agents.run import TrainSettings, train_run

STATE = "trial.json"  # in a reported checkpoint: the steps it holds and the trial's restarts so far
# what a trial's final report holds, in the summary's order
RESULT_COLUMNS = ("objective_vs_best_fixed", "ci_low", "ci_high", "jct_vs_best_fixed", "cost_vs_best_fixed",
                  "jct_vs_bace_pipe", "cost_vs_bace_pipe", "best_fixed", "timesteps", "train_s")


def trial_name(seed: int, learning_rate: float, timesteps: int) -> str:
    return f"seed{seed}-lr{learning_rate:g}-steps{timesteps}"


def grid(seeds: Sequence[int], learning_rates: Sequence[float], budgets: Sequence[int]) -> list[dict]:
    """A trial per (seed, learning rate, budget): its name and the three values."""
    return [{"trial": trial_name(s, lr, t), "seed": int(s), "learning_rate": float(lr), "timesteps": int(t)}
            for t in budgets for lr in learning_rates for s in seeds]


def _settings(base: dict, trial: dict) -> TrainSettings:
    return TrainSettings(**base, seed=trial["seed"], learning_rate=trial["learning_rate"], timesteps=trial["timesteps"])


def _result(out: dict) -> dict:
    """A trial's final numbers (``train_run``'s return) under the summary's names."""
    ratio = out["objective_ratio"]
    return {"objective_vs_best_fixed": ratio["ratio"], "ci_low": ratio["ci_low"], "ci_high": ratio["ci_high"],
            "jct_vs_best_fixed": out["jct_ratio"], "cost_vs_best_fixed": out["cost_ratio"],
            "jct_vs_bace_pipe": out["agent_jct_vs_bace_pipe"], "cost_vs_bace_pipe": out["agent_cost_vs_bace_pipe"],
            "best_fixed": out["best_fixed"], "timesteps": out["timesteps"], "train_s": out["train_s"]}


def run_serial(trials: list[dict], base: dict, root: Path, log: Callable[[str], None] = print) -> list[dict]:
    """The trials one after the other in this process (no Ray); a summary row each."""
    rows = []
    for trial in trials:
        log(f"trial {trial['trial']}")
        out = train_run(_settings(base, trial), Path(root) / trial["trial"], log=log)
        rows.append({**trial, **_result(out), "restarts": 0, "restored_at": None, "node_id": None,
                     "run": str(Path(root) / trial["trial"]), "error": None})
    return rows


def tune_trial(config: dict) -> None:
    """Ray Tune's function trainable: one training run, resumed from Tune's last checkpoint of
    it when Tune restarts it."""
    import ray
    from ray import tune

    trial = config["trial"]
    run = Path(config["root"]) / trial["trial"]
    run.mkdir(parents=True, exist_ok=True)
    where = {"node_id": ray.get_runtime_context().get_node_id()}
    state = {"restarts": 0, "restored_at": None}
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:  # Tune restarts the trial: continue its last reported checkpoint
        with checkpoint.as_directory() as folder:
            saved = json.loads((Path(folder) / STATE).read_text())
            shutil.copyfile(Path(folder) / "last.zip", run / "last.zip")
            if (Path(folder) / "eval.csv").exists():
                shutil.copyfile(Path(folder) / "eval.csv", run / "eval.csv")
        state = {"restarts": saved["restarts"] + 1, "restored_at": saved["timesteps"]}
        print(f"{trial['trial']}: restarted ({state['restarts']}) from its checkpoint at "
              f"{saved['timesteps']} steps", flush=True)

    def report(path: Path, timesteps: int, history: list) -> None:
        with tempfile.TemporaryDirectory() as folder:
            shutil.copyfile(path, Path(folder) / "last.zip")
            if history:
                pd.DataFrame(history).to_csv(Path(folder) / "eval.csv", index=False)
            (Path(folder) / STATE).write_text(json.dumps({"timesteps": timesteps, "restarts": state["restarts"]}))
            # persisted to the sweep's storage before report returns
            tune.report({"timesteps": timesteps, "done": False, **state, **where},
                        checkpoint=tune.Checkpoint.from_directory(folder))

    out = train_run(_settings(config["settings"], trial), run, resume=checkpoint is not None,
                    on_checkpoint=report, log=lambda line: print(line, flush=True))
    tune.report({**_result(out), "done": True, **state, **where})


def run_tune(trials: list[dict], base: dict, root: Path, *, cpus_per_trial: float = 1.0,
             max_failures: int = 3, storage: str | None = None) -> list[dict]:
    """The trials as Ray Tune trials on the Ray cluster this process is connected to (or a
    local instance); a summary row each. Tune's own records go to ``storage`` (default
    ``<root>/tune``), which every node must reach."""
    from ray import tune

    root = Path(root).resolve()
    by_name = {t["trial"]: t for t in trials}
    tuner = tune.Tuner(
        tune.with_resources(tune_trial, {"cpu": cpus_per_trial}),
        param_space={"trial": tune.grid_search(trials), "settings": base, "root": str(root)},
        tune_config=tune.TuneConfig(
            trial_name_creator=lambda t: t.config["trial"]["trial"],
            trial_dirname_creator=lambda t: t.config["trial"]["trial"],
        ),
        run_config=tune.RunConfig(
            name="tune", storage_path=storage or str(root),
            failure_config=tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
            verbose=1,
        ),
    )
    rows = []
    for result in tuner.fit():
        trial = by_name[result.config["trial"]["trial"]]
        metrics = result.metrics or {}
        done = metrics.get("done") is True
        rows.append({**trial, **{k: metrics.get(k) if done else None for k in RESULT_COLUMNS},
                     "restarts": metrics.get("restarts", 0), "restored_at": metrics.get("restored_at"),
                     "node_id": metrics.get("node_id"), "run": str(root / trial["trial"]),
                     "error": None if result.error is None else " ".join(str(result.error).split())[:300]})
    return rows


def summary(rows: list[dict]) -> pd.DataFrame:
    """The trials ranked by agent / best fixed in the trained objective (lower is better;
    trials that did not finish last), in the order they were given where that ties."""
    table = pd.DataFrame(rows)
    score = pd.to_numeric(table["objective_vs_best_fixed"], errors="coerce")
    table.insert(0, "rank", score.rank(method="first", na_option="bottom").astype(int))
    return table.sort_values("rank", kind="stable").reset_index(drop=True)


def base_settings(options) -> dict:
    """The fields that every trial of a sweep shares, from parsed arguments."""
    return {k: v for k, v in asdict(TrainSettings.of(options)).items() if k not in ("seed", "learning_rate", "timesteps")}
