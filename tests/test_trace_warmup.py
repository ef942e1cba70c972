"""traces.warmup: SchedMate's retrieval history pre-filled with the preceding trace window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import baselines
import geo_gym
from geo_gym.env import GeoPipeEnv
from geo_gym.uncertainty import UncertaintyConfig
from traces import read_philly_job_log
from traces.mapping import map_trace
from traces.warmup import simulate_warm

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "traces" / "data" / "synthetic_philly_job_log.json"
HOUR = 3600.0


@pytest.fixture(scope="module")
def windows():
    """Two consecutive 6-hour windows of the synthetic Philly sample: (current, preceding)."""
    table = read_philly_job_log(SAMPLE)
    start = float(table.submit.quantile(0.3))
    cur = map_trace(table, start=start, length=6 * HOUR, max_jobs=60).scenario
    past = map_trace(table, start=start - 6 * HOUR, length=6 * HOUR).scenario
    return cur, past


@pytest.mark.parametrize("name", ["bace_pipe", "schedmate_sjf", "random"])
def test_no_warmup_is_geo_gym_simulate(windows, name):
    cur, _ = windows
    kw = {"uncertainty": "realistic"}
    a = simulate_warm(cur, None, baselines.make(name), seed=3, env_kwargs=kw)
    b = geo_gym.simulate(cur, baselines.make(name), seed=3, env_kwargs=kw)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)


def test_warmup_changes_only_the_retrieval_predictions(windows):
    cur, past = windows
    # no retrieval predictor: the history is never read, and the perfect world draws nothing
    plain = geo_gym.simulate(cur, baselines.make("lcf"), seed=1)
    warm = simulate_warm(cur, past, baselines.make("lcf"), seed=1)
    pd.testing.assert_frame_equal(plain.jobs, warm.jobs)
    # SchedMate's retrieval: the first jobs are predicted from the preceding window's jobs
    cold = geo_gym.simulate(cur, baselines.make("schedmate_sjf"), seed=1)
    hot = simulate_warm(cur, past, baselines.make("schedmate_sjf"), seed=1)
    assert not np.allclose(cold.jobs.predicted_iters[:5], hot.jobs.predicted_iters[:5])
    assert (cold.jobs.iters == hot.jobs.iters).all()  # the same jobs ran the same work


def test_fast_path_and_env_build_the_same_history(windows):
    """With a window larger than any queue, the compiled path and the env decide alike."""
    cur, past = windows
    unc = UncertaintyConfig.preset("schedmate")
    policy = baselines.make("sjf")
    fast = simulate_warm(cur, past, policy, seed=2, window=64, env_kwargs={"uncertainty": unc})
    env = GeoPipeEnv(cur, window=64, uncertainty=unc, warmup_scenario=past)
    obs, info = env.reset(seed=2)
    term = False
    while not term:
        obs, _, term, _, info = env.step(policy.predict(obs)[0])
    assert fast.summary["avg_jct_h"] == pytest.approx(info["avg_jct_h"])
    assert fast.summary["total_cost"] == pytest.approx(info["total_cost"])
    assert env.core.pred_iters[0, : len(cur.jobs)] == pytest.approx(fast.jobs.predicted_iters.to_numpy())
    with pytest.raises(ValueError, match="warmup_workloads"):
        GeoPipeEnv(cur, warmup_scenario=past, warmup_workloads=2)
    with pytest.raises(ValueError, match="not both"):
        simulate_warm(cur, past, policy, env_kwargs={"warmup_workloads": 1})


def test_evaluate_option(tmp_path):
    from test_trace_evaluate import run

    out = run(tmp_path, "--trace", "philly", "--policies", "schedmate_sjf", "--seeds", "2",
              "--window-days", "0.1", "--window-start-days", "0", "--warmup-previous-window")
    assert out.returncode == 0, out.stderr[-3000:]
    windows = pd.read_csv(tmp_path / "workloads.csv")
    # the first window starts the trace: nothing precedes it
    assert windows.warmup_jobs.iloc[0] == 0 and windows.warmup_jobs.iloc[1] > 0
    whole = run(tmp_path, "--trace", "philly", "--policies", "lcf", "--seeds", "1", "--window-days", "0",
                "--warmup-previous-window")
    assert whole.returncode != 0 and "needs windows" in whole.stderr
