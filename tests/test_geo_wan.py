"""geo-wan: paper-default's regions, GPUs and jobs with the inter-region throughput DT-FM
measured between AWS regions (catalog.DTFM_LINKS). There Eq. (6) refuses placements that
Table II's links accept, and the Pathfinder ablation changes the average JCT
(docs/geo_wan.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import baselines
import geo_gym
from geo_gym import catalog
from geo_gym.cluster import ClusterState
from geo_gym.placement import Placement, check_placement, pathfinder
from geo_gym.scenarios import make_scenario
from geo_gym.workload import JobSpec, profile

EU_WEST, US_EAST_2, EU_CENTRAL, EA_EAST = 0, 1, 2, 3


def llama70b():
    m = catalog.model_by_name("Llama-3.1-70B")
    return profile(JobSpec("llama", m, catalog.PAPER_DATASETS[0]))


def test_links_are_the_cited_measurements():
    cl = make_scenario("geo-wan").cluster
    cities = [catalog.DTFM_CITY[n] for n in cl.names]
    assert cities == ["Ireland", "Ohio", "Frankfurt", "Tokyo", "Singapore", "Sydney"]
    for u, a in enumerate(cities):
        for v, b in enumerate(cities):
            want = 0.0 if u == v else catalog.measured_gbps(a, b)
            assert cl.bandwidth[u, v] == want, (a, b)
    # spot checks against DT-FM's delay_bandwidth_dict as published (Gbps)
    assert cl.bandwidth[EU_WEST, US_EAST_2] == 1.14  # "Ohio-Ireland": (77, 1.14)
    assert cl.bandwidth[EU_CENTRAL, EA_EAST] == 0.36  # "Tokyo-Frankfurt": (223, 0.36)
    assert cl.bandwidth[5, 2] == 0.328  # "Sydney-Frankfurt": (265, 0.328)
    assert len(catalog.DTFM_LINKS) == 15  # every pair of the six cities, once
    with pytest.raises(ValueError, match="no measured link"):
        catalog.measured_gbps("Ohio", "Virginia")


def test_everything_but_the_links_is_paper_default():
    for seed in (0, 3):
        wan, paper = make_scenario("geo-wan", seed, num_jobs=12), make_scenario("paper-default", seed, num_jobs=12)
        assert wan.jobs == paper.jobs and wan.name == "geo-wan"
        assert wan.cluster.capacities.tolist() == paper.cluster.capacities.tolist()
        assert wan.cluster.prices.tolist() == paper.cluster.prices.tolist()
    scaled = make_scenario("geo-wan", bandwidth_scale=0.3, capacity_scale=0.5).cluster
    assert scaled.bandwidth[EU_WEST, US_EAST_2] == pytest.approx(0.3 * 1.14)
    assert scaled.capacities.tolist() == [32, 32, 8, 64, 16, 16]


def test_eq6_refuses_what_table_ii_accepts():
    """Llama-3.1-70B at K* = 62 needs b_j = 1.19 Gbps on a crossed link: more than the fastest
    measured link (Ireland-Ohio, 1.14 Gbps), far less than Table II's 70 Gbps there."""
    p = llama70b()
    b_k = p.b_j(p.k_star)
    split = Placement((EU_WEST, US_EAST_2), (31, 31))
    wan, paper = make_scenario("geo-wan").cluster, make_scenario("paper-default").cluster
    free, none = wan.capacities, np.zeros((6, 6))
    assert 1.14 < b_k < 70.0
    with pytest.raises(ValueError, match=r"Eq. \(6\) violated.*\(0, 1\)"):
        check_placement(split, free, none, wan.bandwidth, b_k)
    check_placement(split, free, none, paper.bandwidth, b_k)  # fine on Table II's links
    # On 40 GPUs the job needs 1.01 Gbps: the free link carries it, a link already carrying
    # another job's 0.47 Gbps (Solar-Open-100B's b_j) does not.
    smaller = Placement((EU_WEST, US_EAST_2), (20, 20))
    state = ClusterState(wan)
    state.check(smaller, p.b_j(40))
    state.allocate(Placement((US_EAST_2, EU_WEST), (1, 1)), 0.47)
    with pytest.raises(ValueError, match=r"Eq. \(6\) violated"):
        state.check(smaller, p.b_j(40))


def test_pathfinder_stops_where_the_measured_links_do():
    """With no region holding K*, Alg. 1 grows a path over the best links while Eq. (6) holds:
    on Table II's links it reaches K*; on the measured ones it stops short, within Eq. (6)."""
    p = llama70b()
    free = np.array([32, 32, 16, 0, 0, 0])
    found = {}
    for name in ("paper-default", "geo-wan"):
        cl = make_scenario(name).cluster
        pl = pathfinder(free, cl.prices, cl.bandwidth, p.k_star, p.activation_gbit, p.t_comp)
        check_placement(pl, free, np.zeros((6, 6)), cl.bandwidth, p.b_j(pl.total))
        found[name] = pl
    assert found["paper-default"].total == p.k_star == 62
    assert found["geo-wan"].total < p.k_star


def test_pathfinder_ablation_changes_jct_only_where_bandwidth_binds():
    """On paper-default w/o Pathfinder (CR-LDF's path + Cost-Min) has BACE-Pipe's average JCT
    up to the pipeline-fill term of its other links (1e-5); on geo-wan the paths Eq. (6)
    leaves differ, and the JCT by more than 1%."""
    jct = {
        (scen, pol): geo_gym.simulate(scen, baselines.make(pol), seed=2).summary["avg_jct_h"]
        for scen in ("paper-default", "geo-wan") for pol in ("bace_pipe", "bace_pipe_no_pathfinder")
    }
    assert jct["paper-default", "bace_pipe_no_pathfinder"] == pytest.approx(jct["paper-default", "bace_pipe"], rel=1e-5)
    assert abs(jct["geo-wan", "bace_pipe_no_pathfinder"] / jct["geo-wan", "bace_pipe"] - 1) > 0.01


def test_benchmark_runs_on_geo_wan(tmp_path: Path):
    """benchmark.py --scenario geo-wan: the rows are geo-wan's; at 0.3x no measured link can
    carry any job's b_j, so the cross-region baselines equal their single-region ones."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--scenario", "geo-wan", "--bandwidth-scales", "0.3",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = pd.read_csv(tmp_path / "bandwidth.csv")
    assert set(rows.scenario) == {"geo-wan"} and set(rows.value) == {0.3}
    by = rows.set_index(["policy", "seed"]).avg_jct_h
    assert (by["cr_lcf"] == by["lcf"]).all() and (by["cr_ldf"] == by["ldf"]).all()
    one = rows[rows.policy == "cr_lcf"].iloc[0]
    res = geo_gym.simulate("geo-wan", baselines.make("cr_lcf"), seed=int(one.seed),
                           scenario_kwargs={"bandwidth_scale": 0.3})
    assert res.summary["avg_jct_h"] == one.avg_jct_h
