import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym.cluster import Cluster, Region
from geo_gym.env import GeoPipeEnv
from geo_gym.scenarios import make_scenario, scenario_factory, scenario_names
from geo_gym.uncertainty import UncertaintyConfig


def test_paper_default_loads_and_is_seeded():
    s = make_scenario("paper-default", seed=1)
    assert len(s.jobs) == 8 and s.cluster.num_regions == 6
    assert s.cluster.capacities.tolist() == [64, 64, 16, 128, 32, 32]
    assert s.cluster.bandwidth[0, 1] == pytest.approx((50 + 90) / 2)
    same = make_scenario("paper-default", seed=1)
    assert [j.dataset for j in s.jobs] == [j.dataset for j in same.jobs]
    assert len(make_scenario("paper-default", num_jobs=24).jobs) == 24


def test_sensitivity_knobs():
    s = make_scenario("paper-default", bandwidth_scale=0.3, capacity_scale=0.5)
    assert s.cluster.capacities.tolist() == [32, 32, 8, 64, 16, 16]
    assert s.cluster.bandwidth[0, 1] == pytest.approx(0.3 * 70)


def test_fig1_scenario():
    s = make_scenario("paper-fig1")
    assert [j.name for j in s.jobs] == ["P", "Q"]
    assert s.cluster.capacities.tolist() == [4, 3, 2, 2]
    assert s.cluster.bandwidth[0, 2] == pytest.approx(1.0)  # A-C 1000 Mbps
    assert s.cluster.bandwidth[1, 3] == pytest.approx(0.2)  # B-D 200 Mbps


def test_unknown_scenario_and_knob():
    with pytest.raises(ValueError, match="known scenarios"):
        make_scenario("nope")
    assert "paper-default" in scenario_names()
    with pytest.raises(ValueError, match="no knob"):
        make_scenario("paper-fig1", num_jobs=3)


def test_scenario_factory_checks_once_and_draws_as_make_scenario():
    # Envs build their workloads through a factory checked at construction.
    make = scenario_factory("random", num_regions=4, mean_interarrival=60.0)
    for seed in (0, 7):
        a, b = make(seed), make_scenario("random", seed, num_regions=4, mean_interarrival=60.0)
        assert a.jobs == b.jobs and a.cluster.regions == b.cluster.regions
        np.testing.assert_array_equal(a.cluster.bandwidth, b.cluster.bandwidth)
    assert scenario_factory("paper-fig1")(5).jobs == make_scenario("paper-fig1").jobs  # no seed
    ready = make_scenario("paper-default", seed=2)
    assert scenario_factory(ready)(9) is ready
    with pytest.raises(ValueError, match="no knob"):
        scenario_factory("recurring", num_regions=3)
    with pytest.raises(ValueError, match=r"no knob\(s\) \['seed'\]"):
        scenario_factory("paper-default", seed=3)  # the seed is the factory's argument
    with pytest.raises(ValueError, match="ready-made"):
        scenario_factory(ready, num_jobs=3)


def test_bad_cluster_input_names_field():
    with pytest.raises(ValueError, match="gpus"):
        Region("x", -1, 0.1, 10)
    with pytest.raises(ValueError, match="price_per_kwh"):
        Region("x", 1, -0.1, 10)
    with pytest.raises(ValueError, match="bandwidth must have shape"):
        Cluster((Region("a", 1, 0.1, 1), Region("b", 1, 0.1, 1)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="bandwidth_scale"):
        make_scenario("paper-default", bandwidth_scale=0)


def test_asymmetric_matrix_accepted():
    bw = np.array([[0, 1.0], [3.0, 0]])
    cl = Cluster((Region("a", 1, 0.1, 1), Region("b", 1, 0.1, 1)), bw)
    assert cl.bandwidth[0, 1] == 1.0 and cl.bandwidth[1, 0] == 3.0


def test_fig1_placements_under_the_cost_model():
    import subprocess
    import sys
    from pathlib import Path

    from baselines.paper import fig1

    df = fig1().set_index("strategy")
    assert list(df.index) == ["LCF", "LDF", "Ours (FCFS)", "Ours (Reordered)"]
    # docs/cost_model.md, "Fig. 1 under this model": the paper's JCT order holds, and the
    # reordered plan puts P on the 200 Mbps B-D link, which breaks Eq. (6)
    jct = df["avg_jct_h"]
    assert jct["LCF"] > jct["LDF"] > jct["Ours (FCFS)"] > jct["Ours (Reordered)"] > 0
    assert "Eq. (6) violated" in df.loc["Ours (Reordered)", "eq6_violations"]
    assert (df.drop(index="Ours (Reordered)")["eq6_violations"] == "none").all()
    script = Path(__file__).resolve().parents[1] / "scripts" / "fig1.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "Ours (Reordered)" in out.stdout


def test_recurring_fates_come_from_templates_only():
    # A recurring job that completes must not get a second, untemplated early-end coin from
    # UncertaintyConfig.early_end_rate: its fate is part of the world (scenarios.recurring).
    runs = {
        rate: geo_gym.simulate(
            "recurring", baselines.make("sjf"), seed=3,
            env_kwargs={"uncertainty": UncertaintyConfig(early_end_rate=rate)},
        ).jobs
        for rate in (0.0, 0.9)
    }
    np.testing.assert_array_equal(runs[0.0].iters.values, runs[0.9].iters.values)
    # catalog jobs run whole iterations: a completing job runs its configured count rounded
    early = runs[0.9].iters.values < runs[0.9].configured_iters.values - 0.5
    assert 0 < early.sum() < 0.6 * len(early)  # templates' mean early-end rate is 0.45


@pytest.mark.parametrize("name, knobs, field", [
    ("recurring", {"mean_interarrival": -1.0}, "mean_interarrival"),
    ("recurring", {"mean_interarrival": float("nan")}, "mean_interarrival"),
    ("recurring", {"templates_per_user": 1.5}, "templates_per_user"),
    ("recurring", {"num_users": 0}, "num_users"),
    ("random", {"num_regions": 2.5}, "num_regions"),
    ("random", {"num_regions": True}, "num_regions"),
    ("random", {"mean_interarrival": float("inf")}, "mean_interarrival"),
    ("paper-default", {"capacity_scale": float("inf")}, "capacity_scale"),
    ("paper-default", {"bandwidth_scale": float("nan")}, "bandwidth_scale"),
    ("paper-default", {"num_jobs": -5}, "num_jobs"),
])
def test_bad_knobs_are_errors_naming_the_knob(name, knobs, field):
    with pytest.raises(ValueError, match=field):
        make_scenario(name, 0, **knobs)


def test_compute_knobs_set_the_stage_overhead_and_the_gpus_flops():
    from geo_gym import catalog
    from geo_gym.scenarios import scenario_knobs
    from geo_gym.workload import profile_columns

    for name in scenario_names():
        assert {"stage_overhead", "mfu"} <= set(scenario_knobs(name))
    base = make_scenario("paper-default", 3)
    # the defaults are the scenario's own physics: the same cluster object, the same results
    same = make_scenario("paper-default", 3, stage_overhead=catalog.DEFAULT_STAGE_OVERHEAD_S, mfu=catalog.ASSUMED_MFU)
    assert same.cluster is base.cluster and same.stage_overhead == base.stage_overhead
    default = geo_gym.simulate("paper-default", baselines.make("bace_pipe"), seed=1).summary
    named = geo_gym.simulate("paper-default", baselines.make("bace_pipe"), seed=1,
                             scenario_kwargs={"mfu": 0.4, "stage_overhead": 0.15}).summary
    assert named == default
    slow = make_scenario("paper-default", 3, stage_overhead=0.05, mfu=0.2)
    assert slow.stage_overhead == 0.05 and slow.cluster.gpu.effective_flops == catalog.A6000_PEAK_FLOPS * 0.2
    assert slow.cluster.gpu.memory_gb == base.cluster.gpu.memory_gb  # only the FLOP/s change
    old, new = (profile_columns(s.jobs, s.cluster.gpu, s.stage_overhead, s.cluster.intra_region_gbps)
                for s in (base, slow))
    np.testing.assert_allclose(new["work"], 2 * old["work"])  # half the MFU: twice the work
    # a smaller share of overhead in t_comp makes more stages worth it (Eq. 13)
    assert (new["k_target"] >= old["k_target"]).all() and (new["k_target"] > old["k_target"]).any()
    env = GeoPipeEnv("paper-default", {"mfu": 0.2, "stage_overhead": 0.05})  # the env takes them too
    env.reset(seed=0)
    assert env.current_scenario.cluster.gpu == slow.cluster.gpu and env.current_scenario.stage_overhead == 0.05


@pytest.mark.parametrize("knobs, says", [
    ({"mfu": 0.0}, "mfu must be a number in (0, 1]"),
    ({"mfu": 1.5}, "mfu must be a number in (0, 1]"),
    ({"mfu": True}, "mfu must be a number in (0, 1]"),
    ({"stage_overhead": 0.0}, "stage_overhead must be a finite number > 0"),
    ({"stage_overhead": float("nan")}, "stage_overhead must be a finite number > 0"),
])
def test_bad_compute_knobs_are_errors_naming_the_knob(knobs, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        make_scenario("paper-default", 0, **knobs)
