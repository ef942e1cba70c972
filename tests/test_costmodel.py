"""Each equation of BACE-Pipe III-A on hand-computed values."""

import numpy as np
import pytest

from geo_gym import catalog, costmodel
from geo_gym.workload import JobSpec, profile


def test_iteration_time_eq1_hand_value():
    # L=3 stages, t_comp=1, links 0.5 and 2.0, M=4: Delta=2 -> (2.5 + 3 + 3*2) * 2 = 23
    assert costmodel.iteration_time(1.0, [0.5, 2.0], 4) == pytest.approx(23.0)
    # single stage: (0 + 1*t + (M-1)*t) * 2 = 2 M t
    assert costmodel.iteration_time(0.25, [], 8) == pytest.approx(4.0)


def test_priority_eq12():
    assert costmodel.priority(0.2, 0.6, 0.0) == pytest.approx(0.8)
    assert costmodel.priority(0.2, 0.6, 1.0) == pytest.approx(0.4)
    assert costmodel.priority(0.2, 0.6, 0.5) == pytest.approx(0.5 * 0.8 + 0.5 * 0.4)


def test_energy_cost_eq4():
    # 2 h on 4 GPUs at $0.2 + 2 GPUs at $0.3, 0.3 kW each: 2 * (0.8 + 0.6) * 0.3
    assert costmodel.energy_cost(2.0, [4, 2], [0.2, 0.3]) == pytest.approx(0.84)
    assert costmodel.energy_cost(1.0, [1], [0.5], gpu_kw=1.0) == pytest.approx(0.5)


def test_intensity_sensitivity_alpha():
    assert costmodel.intensity(3.0, 12.0) == pytest.approx(0.25)
    assert costmodel.sensitivity(1.0, 4.0) == pytest.approx(0.25)
    bw = np.array([[0, 10.0], [20.0, 0]])
    res = np.array([[0, 3.0], [3.0, 0]])
    assert costmodel.alpha(res, bw) == pytest.approx(6.0 / 30.0)


def test_tcomp_tcomm_bj():
    assert costmodel.t_comp(4.0, 4, 0.1) == pytest.approx(1.1)
    assert costmodel.t_comm(0.5, 2.0) == pytest.approx(0.25)
    assert costmodel.min_bandwidth(0.5, 0.25) == pytest.approx(2.0)
    # Llama-3.1-70B activation, micro-batch 1 x 2048 tokens x 8192 x 2 B = 33.5 MB
    assert costmodel.activation_gbit(1, 2048, 8192) == pytest.approx(33554432 * 8 / 1e9)


def test_k_star_is_argmin_of_eq1():
    work, mb, act, intra, ov = 4.0, 64, 0.2, 100.0, 0.1
    times = [
        costmodel.single_region_iteration_time(work, k, act, intra, ov, mb) for k in range(1, 81)
    ]
    assert costmodel.k_star(work, mb, act, intra, ov, 80) == int(np.argmin(times)) + 1
    # capped by the layer count
    assert costmodel.k_star(work, mb, act, intra, ov, 5) == 5


def test_pipeline_iteration_time_matches_eq1():
    bw = np.array([[0, 2.0], [2.0, 0]])
    # 2 stages in region 0 and 1 in region 1: links intra (0.2/100) and inter (0.2/2)
    t = costmodel.pipeline_iteration_time(
        np.array([0, 1]), 2, np.array([2, 1]), bw, 100.0, 0.2, 3.0, 0.1, 5
    )
    assert t == pytest.approx(costmodel.iteration_time(1.1, [0.002, 0.1], 5))
    assert costmodel.pipeline_iteration_time_nb(
        np.array([0, 1]), 2, np.array([2, 1]), bw, 100.0, 0.2, 3.0, 0.1, 5
    ) == pytest.approx(t)


def test_table_iii_k_star_range_and_profile():
    ks = {}
    for m in catalog.PAPER_MODELS:
        p = profile(JobSpec(m.name, m, catalog.PAPER_DATASETS[0]))
        assert 8 <= p.k_star <= 80 and p.k_star <= m.layers
        assert p.iterations == np.ceil(52002 / m.batch_size)
        assert p.e1 > p.ideal_duration > 0
        ks[m.name] = p.k_star
    assert ks["FLM-101B"] > ks["Llama-3.1-70B"] > ks["Gemma-3-27B"] > ks["Ministral-3-14B"]


def test_catalog_constants():
    assert [r.gpus for r in catalog.PAPER_REGIONS] == [64, 64, 16, 128, 32, 32]
    assert [d.samples for d in catalog.PAPER_DATASETS] == [52_002, 1_810_000, 8_010_000]
    assert catalog.A6000.power_kw == 0.3
    with pytest.raises(ValueError, match="unknown model"):
        catalog.model_by_name("GPT-9")
