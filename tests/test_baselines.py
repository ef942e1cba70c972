"""Fixed policies: registry, decisions on hand-worked states, env path == fast path."""

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym.env import GeoPipeEnv
from geo_gym.runner import simulate, summarize


def env_rollout(policy, scenario, seed, **kw):
    env = GeoPipeEnv(scenario, kw.pop("scenario_kwargs", None), **kw)
    obs, info = env.reset(seed=seed)
    while True:
        action, _ = policy.predict(obs, deterministic=True)
        obs, _, term, _, info = env.step(action)
        if term:
            return info


def test_registry():
    assert set(baselines.names()) >= {
        "bace_pipe", "bace_pipe_no_priority", "bace_pipe_no_pathfinder", "bace_pipe_no_costmin",
        "lcf", "ldf", "cr_lcf", "cr_ldf", "fcfs", "sjf", "random",
    }
    with pytest.raises(ValueError, match="known policies"):
        baselines.make("nope")
    with pytest.raises(ValueError, match="order must be"):
        baselines.FixedPolicy("x", "lifo", "lcf")


@pytest.mark.parametrize("name", [n for n in baselines.names() if n != "random"])
@pytest.mark.parametrize("scenario,kwargs", [("paper-default", {}), ("random", {"num_regions": 4, "num_jobs": 8})])
def test_env_path_equals_fast_path(name, scenario, kwargs):
    policy = baselines.make(name)
    fast = simulate(scenario, policy, seed=5, scenario_kwargs=kwargs)
    info = env_rollout(policy, scenario, 5, scenario_kwargs=kwargs)
    assert fast.summary["avg_jct_h"] == info["avg_jct_h"]
    assert fast.summary["total_cost"] == info["total_cost"]
    assert fast.jobs["gpus"].tolist() == [j["gpus"] for j in info["jobs"]]


def test_strict_order_does_not_backfill():
    # One 16-GPU region. a takes its 8 GPUs; b needs 12 (min_gpus) and cannot start until a
    # ends; c fits on the 8 left. Backfilling starts c at once, strict order keeps it behind b.
    from geo_gym import catalog
    from geo_gym.cluster import Cluster, Region
    from geo_gym.scenarios import Scenario
    from geo_gym.workload import JobSpec

    # Llama-3.2-1B fits on one GPU (K* = 16), so the requests alone set the GPU counts
    small, alpaca = catalog.model_by_name("Llama-3.2-1B"), catalog.dataset_by_name("Alpaca-52k")
    jobs = (
        JobSpec("a", small, alpaca, max_gpus=8),
        JobSpec("b", small, alpaca, min_gpus=12),
        JobSpec("c", small, alpaca, max_gpus=4),
    )
    scen = Scenario("strict", Cluster((Region("R", 16, 0.2, 10.0),)), jobs)
    starts = {}
    for strict in (False, True):
        policy = baselines.make("fcfs", strict=strict)
        fast = simulate(scen, policy, seed=0)
        info = env_rollout(policy, scen, 0)
        assert fast.jobs["start_h"].tolist() == [j["start_h"] for j in info["jobs"]]
        starts[strict] = dict(zip(fast.jobs["name"], fast.jobs["start_h"], strict=True))
    a_end = simulate(scen, baselines.make("fcfs"), seed=0).jobs.set_index("name").end_h["a"]
    assert starts[False]["c"] == 0.0 and starts[False]["b"] == pytest.approx(a_end)
    assert starts[True]["b"] == pytest.approx(a_end) and starts[True]["c"] >= starts[True]["b"]
    with pytest.raises(ValueError, match="strict"):
        baselines.make("random", strict=True)


def test_random_policy_is_seeded_and_valid():
    a = simulate("random", baselines.make("random", seed=1), seed=2, scenario_kwargs={"num_regions": 3})
    b = simulate("random", baselines.make("random", seed=1), seed=2, scenario_kwargs={"num_regions": 3})
    assert a.summary == b.summary
    assert a.summary["steps"] >= a.summary["num_jobs"]


def test_policies_read_envs_with_more_regions_than_the_size_tells():
    # Sizes repeat when the region count differs by MAX_INFERRED_REGIONS (45 with today's
    # blocks): a (MAX + 1)-region observation has the size of a 1-region one with a longer
    # window, so the layout comes from the env, not the size.
    import math

    from baselines.policies import MAX_INFERRED_REGIONS, layout_from_obs_size
    from geo_gym import decision

    assert MAX_INFERRED_REGIONS == decision.PER_SLOT // math.gcd(decision.PER_SLOT, decision.NUM_REGION)
    k = MAX_INFERRED_REGIONS + 1
    env = GeoPipeEnv("random", {"num_regions": k, "num_jobs": 10}, window=8)
    size = env.observation_space.shape[0]
    assert layout_from_obs_size(size)[0] == 1  # the inference alone is wrong here
    assert layout_from_obs_size(size, k) == (k, 8)
    for policy in (baselines.make("bace_pipe", num_regions=k), baselines.make("random", num_regions=k)):
        obs, info = env.reset(seed=1)
        for _ in range(200):
            a = int(policy.predict(obs)[0])
            assert info["action_mask"][a], (policy, a)
            obs, _, done, _, info = env.step(a)
            if done:
                break
        assert done
    # simulate hands the env's region count to a policy that reads the observation
    kwargs = {"num_regions": k, "num_jobs": 10}
    res = simulate("random", baselines.make("random", seed=0), seed=1, scenario_kwargs=kwargs)
    assert res.summary["num_jobs"] == 10 and res.summary["invalid_actions"] == 0


def test_fig1_lcf_and_ldf_choose_the_papers_regions():
    lcf = simulate("paper-fig1", baselines.make("lcf")).jobs.set_index("name")
    assert lcf.loc["P", "path"] == ["C"] and lcf.loc["P", "gpus"] == 2  # cheapest region
    assert lcf.loc["Q", "path"] == ["B"] and lcf.loc["Q", "gpus"] == 3  # next cheapest left
    ldf = simulate("paper-fig1", baselines.make("ldf")).jobs.set_index("name")
    assert ldf.loc["P", "path"] == ["A"] and ldf.loc["P", "gpus"] == 4  # largest region
    assert ldf.loc["Q", "path"] == ["B"] and ldf.loc["Q", "gpus"] == 3


def test_fig1_bace_pipe_order_follows_eq12():
    # At alpha = 0 Eq. (12) ranks by 1 - I_j: the job with the smaller E_j(1) goes first.
    # Q (Llama-3.1-70B) has the larger E_j(1), so BACE-Pipe starts P first here; the paper's
    # narrative reorders Q first (docs/results.md discusses the disagreement).
    res = simulate("paper-fig1", baselines.make("bace_pipe")).jobs.set_index("name")
    assert res.loc["P", "start_h"] == 0.0 and res.loc["Q", "start_h"] == 0.0
    # Hand-worked Alg. 1 for P (K* = 48, t_comp(g) = 0.926/g + 0.15 s, A_P = 0.168 Gbit):
    # from A, C over 1000 Mbps (0.168 s <= t_comp(6)), then B over C-B 700 Mbps
    # (0.24 s <= t_comp(9) = 0.253 s); D over B-D 200 Mbps fails (0.84 s). Start B reaches
    # the same 9 GPUs at the same average price, so the earlier start region A wins.
    assert res.loc["P", "path"] == ["A", "C", "B"] and res.loc["P", "gpus_per_region"] == [4, 2, 3]
    assert res.loc["Q", "path"] == ["D"] and res.loc["Q", "gpus"] == 2  # what is left


def test_priority_uses_alpha_and_sensitivity():
    # One slot-level hand check of Eq. (12) on the observation features.
    from geo_gym import fixed

    feats = np.array([[1.0, 0.0, 5.0], [0.2, 1.0, 1.0]], dtype=np.float32)  # I, D, log ideal
    gpus = np.array([8, 8])
    assert list(fixed.order_candidates(fixed.ORDER_PRIORITY, feats, 2, np.float32(0.0), gpus)) == [1, 0]
    assert list(fixed.order_candidates(fixed.ORDER_PRIORITY, feats, 2, np.float32(1.0), gpus)) == [0, 1]
    assert list(fixed.order_candidates(fixed.ORDER_SJF, feats, 2, np.float32(0.0), gpus)) == [1, 0]
    assert list(fixed.order_candidates(fixed.ORDER_FCFS, feats, 2, np.float32(0.0), gpus)) == [0, 1]


def test_qssf_orders_by_predicted_gpu_time():
    # Helios' QSSF: GPUs x predicted duration, not the duration alone (SJF). Predicted hours
    # 1, 4, 3 on 64, 4, 8 GPUs: GPU-hours 64, 16, 24.
    from geo_gym import fixed

    hours = np.array([1.0, 4.0, 3.0])
    feats = np.zeros((3, 3), dtype=np.float32)
    feats[:, 2] = np.log1p(hours)  # the observation's log1p(predicted E_j(K*) h)
    gpus = np.array([64, 4, 8])
    assert list(fixed.order_candidates(fixed.ORDER_SJF, feats, 3, np.float32(0.0), gpus)) == [0, 2, 1]
    assert list(fixed.order_candidates(fixed.ORDER_QSSF, feats, 3, np.float32(0.0), gpus)) == [1, 2, 0]
    policy = baselines.make("qssf")
    assert (policy.order, policy.rule) == ("qssf", "pathfinder")


def test_qssf_starts_the_least_gpu_time_first():
    # One 8-GPU region, strict order (no backfilling), every job submitted at 0. "wide" runs
    # 1 h on 8 GPUs (8 GPU-h), "narrow" 4 h on 1 GPU (4 GPU-h): SJF starts wide first, QSSF
    # narrow first, and the env path agrees with the fast path.
    from geo_gym import catalog
    from geo_gym.cluster import Cluster, Region
    from geo_gym.scenarios import Scenario
    from geo_gym.workload import JobSpec

    small, alpaca = catalog.model_by_name("Llama-3.2-1B"), catalog.dataset_by_name("Alpaca-52k")
    def iterations(gpus, hours):  # the iteration count that runs ``hours`` on ``gpus`` GPUs
        p = geo_gym.workload.profile(JobSpec("x", small, alpaca, max_gpus=gpus), start_rule="request")
        return hours * 3600.0 / (p.ideal_duration / p.iterations)

    jobs = (
        JobSpec("wide", small, alpaca, max_gpus=8, min_gpus=8, iterations=iterations(8, 1.0)),
        JobSpec("narrow", small, alpaca, max_gpus=1, iterations=iterations(1, 4.0)),
    )
    scen = Scenario("qssf", Cluster((Region("R", 8, 0.2, 10.0),)), jobs, start_rule="request")
    first = {}
    for name in ("sjf", "qssf"):
        policy = baselines.make(name, strict=True)
        fast = simulate(scen, policy, seed=0).jobs.set_index("name")
        info = env_rollout(policy, scen, 0)
        assert fast.start_h.tolist() == [j["start_h"] for j in info["jobs"]]
        first[name] = fast.start_h.idxmin()
        assert fast.jct_h.min() == pytest.approx(1.0 if first[name] == "wide" else 4.0)
    assert first == {"sjf": "wide", "qssf": "narrow"}


def test_simulate_result_table():
    res = geo_gym.simulate("paper-default", baselines.make("bace_pipe"), seed=0)
    assert len(res.jobs) == 8
    assert {"name", "submit_h", "start_h", "end_h", "jct_h", "cost", "path", "gpus_per_region"} <= set(res.jobs)
    assert res.summary["avg_jct_h"] == pytest.approx(res.jobs["jct_h"].mean())
    assert res.summary["total_cost"] == pytest.approx(res.jobs["cost"].sum())
    assert (res.jobs["gpus"] <= 80).all()


@pytest.mark.parametrize("name", ["bace_pipe", "sjf", "random"])  # the fast path and the env's
@pytest.mark.parametrize("preset", [None, "realistic"])
def test_summarize_is_simulates_summary(name, preset):
    # the evaluations read only the summary: it must be the table's to the bit, quantiles included
    kwargs = {"scenario_kwargs": {"num_regions": 5, "num_jobs": 30},
              "env_kwargs": {"uncertainty": preset, "warmup_workloads": 1}}
    full = simulate("random", baselines.make(name), seed=3, **kwargs)
    alone = summarize("random", baselines.make(name), seed=3, **kwargs)
    assert alone == full.summary
    assert alone["p99_jct_h"] == full.jobs["jct_h"].quantile(0.99)
    assert alone["p50_jct_h"] == full.jobs["jct_h"].median()


def test_benchmark_quick_runs(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("main", "bandwidth", "capacity", "jobs", "ablation"):
        assert (tmp_path / f"{name}.csv").stat().st_size > 0
        assert (tmp_path / f"{name}.png").stat().st_size > 0
    import pandas as pd

    summary = pd.read_csv(tmp_path / "summary.csv")
    bace = summary[summary.policy == "bace_pipe"]
    assert (bace.jct_vs_bace_pipe == 1.0).all() and (bace.cost_vs_bace_pipe == 1.0).all()
    # every other row is that policy's metric over BACE-Pipe's on the same seed, averaged
    rows = pd.read_csv(tmp_path / "main.csv")
    ref = rows[rows.policy == "bace_pipe"].set_index("seed")
    lcf = rows[rows.policy == "lcf"].set_index("seed")
    main_lcf = summary[(summary.experiment == "main") & (summary.policy == "lcf")].iloc[0]
    assert main_lcf.jct_vs_bace_pipe == pytest.approx((lcf.avg_jct_h / ref.avg_jct_h).mean(), rel=1e-9)
    assert main_lcf.cost_vs_bace_pipe == pytest.approx((lcf.total_cost / ref.total_cost).mean(), rel=1e-9)
    assert (tmp_path / "summary.md").read_text().startswith("|")


@pytest.mark.parametrize("name", ["bace_pipe", "sjf", "lcf"])
@pytest.mark.parametrize("preset", ["realistic", "schedmate"])
def test_env_path_equals_fast_path_under_uncertainty(name, preset):
    kwargs = {"num_regions": 4, "num_jobs": 8}
    policy = baselines.make(name)
    fast = simulate("random", policy, seed=9, scenario_kwargs=kwargs, env_kwargs={"uncertainty": preset, "warmup_workloads": 1})
    info = env_rollout(policy, "random", 9, scenario_kwargs=kwargs, uncertainty=preset, warmup_workloads=1)
    assert fast.summary["avg_jct_h"] == info["avg_jct_h"]
    assert fast.summary["total_cost"] == info["total_cost"]
    assert fast.summary["failures"] == info["failures"]


def test_benchmark_uncertainty_quick_runs(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd

    script = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"
    out = subprocess.run(
        [sys.executable, str(script), "--uncertainty", "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    summary = pd.read_csv(tmp_path / "uncertainty_summary.csv")
    oracle = summary[(summary.prediction == "oracle") & summary.handler]
    assert (oracle.jct_vs_oracle == 1.0).all() and (oracle.within_100pct == 1.0).all()
    assert (summary.failures > 0).any() and (tmp_path / "uncertainty.png").stat().st_size > 0
    # a non-reference row: the same policy's JCT over its oracle+handler JCT, seed by seed
    rows = pd.read_csv(tmp_path / "uncertainty.csv")
    pick = (rows.policy == "sjf") & (rows.failure_scale == 1.0) & rows.handler
    ref = rows[pick & (rows.prediction == "oracle")].set_index("seed").avg_jct_h
    other = rows[pick & (rows.prediction != "oracle")]
    name = other.prediction.iloc[0]
    mine = other[other.prediction == name].set_index("seed").avg_jct_h
    row = summary[(summary.policy == "sjf") & (summary.failure_scale == 1.0) & summary.handler
                  & (summary.prediction == name)].iloc[0]
    assert row.jct_vs_oracle == pytest.approx((mine / ref).mean(), rel=1e-9)
