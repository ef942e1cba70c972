"""geo_gym.memory: the per-stage GPU memory formula against hand-computed bytes, the memory
minimum (min_stages), K* over the stage counts that fit, loading refusing models that never
fit, and bad MemoryModel input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import baselines
import geo_gym
from geo_gym import catalog, costmodel, memory
from geo_gym.catalog import GPUType, ModelSpec
from geo_gym.cluster import Cluster, Region
from geo_gym.env import GeoPipeEnv
from geo_gym.memory import GIB, MemoryModel, min_stages, stage_memory_bytes
from geo_gym.scenarios import Scenario, make_scenario
from geo_gym.workload import JobSpec, JobTable, profile, profile_columns

LLAMA70 = catalog.model_by_name("Llama-3.1-70B")  # 70e9 params, 80 layers, hidden 8192, batch 128
QWEN14 = catalog.model_by_name("Qwen2.5-14B")  # 14e9 params, 48 layers, hidden 5120, batch 512
ALPACA = catalog.dataset_by_name("Alpaca-52k")
SEQ = catalog.DEFAULT_SEQ_LEN  # 2048 tokens per sample
MICRO = catalog.DEFAULT_MICRO_BATCH  # 1 sample per micro-batch
A6000_BYTES = 48 * 2**30  # 48 GB = 48 GiB on the A6000 (memory.py: GB are GiB)
DEFAULT = MemoryModel()


def mem(model: ModelSpec, stages: int, mm: MemoryModel = DEFAULT) -> float:
    """stage_memory_bytes of a catalog model with the default batch settings."""
    m = costmodel.num_microbatches(model.batch_size, MICRO)
    return stage_memory_bytes(mm, model.params, model.layers, model.hidden, stages, m, MICRO * SEQ)


def minimum(model: ModelSpec, mm: MemoryModel = DEFAULT, memory_gb: float = 48.0) -> int:
    m = costmodel.num_microbatches(model.batch_size, MICRO)
    return min_stages(mm, model.params, model.layers, model.hidden, m, MICRO * SEQ, memory_gb)


# ------------------------------------------------------------------ hand-computed bytes
# Llama-3.1-70B: 70e9 / 80 = 875e6 parameters per layer, 16 bytes each (mixed-precision Adam)
LLAMA_LAYER = 70e9 / 80 * 16  # 14e9 bytes of model state per layer
LLAMA_A = 2048 * 8192 * 2  # 33,554,432 bytes: one micro-batch's stage input (BF16)
LLAMA_M = 128 // 1  # M_j: batch 128 / micro-batch 1
LLAMA_RECOMPUTE = 34 * 2048 * 1 * 8192  # 570,425,344 bytes: one layer's recompute working set
RESERVE = 1 * 2**30  # 1 GiB framework reserve

# Qwen2.5-14B: 14e9 / 48 parameters per layer, 16 bytes each
QWEN_LAYER = 14e9 / 48 * 16  # 4,666,666,666.67 bytes per layer
QWEN_A = 2048 * 5120 * 2  # 20,971,520 bytes
QWEN_M = 512 // 1  # batch 512 / micro-batch 1
QWEN_RECOMPUTE = 34 * 2048 * 1 * 5120  # 356,515,840 bytes


def test_hand_constants():
    # the arithmetic above, spelled out once (guards against a typo in the expected values)
    assert LLAMA_LAYER == 14e9 and LLAMA_A == 33_554_432 and LLAMA_M * LLAMA_A == 4 * 2**30
    assert LLAMA_RECOMPUTE == 570_425_344
    assert QWEN_A == 20_971_520 and QWEN_M * QWEN_A == 10 * 2**30 and QWEN_RECOMPUTE == 356_515_840


@pytest.mark.parametrize(
    "stages,layers_on_stage",
    [(80, 1), (40, 2), (27, 3), (26, 4), (1, 80)],  # ceil(80 / L)
)
def test_llama70b_stage_bytes_gpipe(stages, layers_on_stage):
    # GPipe: all M = 128 micro-batch inputs in flight, plus one layer's recompute set, plus reserve
    expected = layers_on_stage * LLAMA_LAYER + LLAMA_M * LLAMA_A + LLAMA_RECOMPUTE + RESERVE
    assert mem(LLAMA70, stages) == pytest.approx(expected, rel=1e-12)


def test_llama70b_hand_values_and_minimum():
    # 27 stages: 3 layers each -> 42e9 + 4 GiB + 570,425,344 + 1 GiB = 47,939,134,464 bytes
    assert mem(LLAMA70, 27) == pytest.approx(47_939_134_464, rel=1e-12)
    # 26 stages: 4 layers each -> 56e9 + ... = 61,939,134,464 bytes
    assert mem(LLAMA70, 26) == pytest.approx(61_939_134_464, rel=1e-12)
    assert mem(LLAMA70, 27) <= A6000_BYTES < mem(LLAMA70, 26)  # 51,539,607,552 bytes
    assert minimum(LLAMA70) == 27


@pytest.mark.parametrize("stages,layers_on_stage", [(48, 1), (8, 6), (6, 8), (5, 10), (1, 48)])
def test_qwen14b_stage_bytes_gpipe(stages, layers_on_stage):
    expected = layers_on_stage * QWEN_LAYER + QWEN_M * QWEN_A + QWEN_RECOMPUTE + RESERVE
    assert mem(QWEN14, stages) == pytest.approx(expected, rel=1e-12)


def test_qwen14b_hand_values_and_minimum():
    # fixed part: 10 GiB of inputs (512 micro-batches) + 356,515,840 + 1 GiB = 12,167,675,904
    fixed = 10 * 2**30 + 356_515_840 + 2**30
    assert fixed == 12_167_675_904
    # 6 stages hold 8 layers: 37,333,333,333.33 + fixed = 49,501,009,237.33 <= 48 GiB
    assert mem(QWEN14, 6) == pytest.approx(8 * 14e9 / 48 * 16 + fixed, rel=1e-12)
    assert mem(QWEN14, 6) <= A6000_BYTES
    # 5 stages hold 10 layers: 46,666,666,666.67 + fixed = 58.8e9 > 48 GiB
    assert mem(QWEN14, 5) > A6000_BYTES
    assert minimum(QWEN14) == 6


def test_qwen14b_1f1b_hand_values():
    mm = MemoryModel(schedule="1f1b")
    # 1F1B holds min(M, L) = 5 inputs on 5 stages: 10 layers + 5 A + recompute + reserve
    expected5 = 10 * QWEN_LAYER + 5 * QWEN_A + QWEN_RECOMPUTE + RESERVE  # 48,201,782,... bytes
    assert mem(QWEN14, 5, mm) == pytest.approx(expected5, rel=1e-12)
    assert mem(QWEN14, 5, mm) <= A6000_BYTES
    # 4 stages: 12 layers = 56e9 bytes of model state alone: too much
    assert mem(QWEN14, 4, mm) == pytest.approx(12 * QWEN_LAYER + 4 * QWEN_A + QWEN_RECOMPUTE + RESERVE)
    assert mem(QWEN14, 4, mm) > A6000_BYTES
    assert minimum(QWEN14, mm) == 5 < minimum(QWEN14) == 6


def test_recompute_off_hand_value():
    # without recomputation every layer keeps 34 s b h bytes per in-flight micro-batch
    mm = MemoryModel(recompute=False)
    expected = 3 * LLAMA_LAYER + LLAMA_M * 3 * LLAMA_RECOMPUTE + RESERVE
    assert mem(LLAMA70, 27, mm) == pytest.approx(expected, rel=1e-12)
    # 1 layer and 128 micro-batches of 570 MB each: 87 GB > 48 GiB, so Llama-70B never fits
    assert minimum(LLAMA70, mm) == 0


def test_usable_fraction_and_reserve_move_the_minimum_by_hand():
    # usable 0.5: 24 GiB = 25,769,803,776; fixed 4 GiB + 570,425,344 + 1 GiB = 5,938,... leaves
    # 19.8e9: one layer (14e9) per stage -> 80 stages; 79 stages hold 2 layers (28e9) -> no
    half = MemoryModel(usable_fraction=0.5)
    assert mem(LLAMA70, 80, half) <= 0.5 * A6000_BYTES < mem(LLAMA70, 79, half)
    assert minimum(LLAMA70, half) == 80
    # reserve 10 GiB: 51.5e9 - 4 GiB - 570,425,344 - 10 GiB = 35.9e9 -> 2 layers -> 40 stages
    big_reserve = MemoryModel(reserve_gb=10.0)
    assert mem(LLAMA70, 40, big_reserve) == pytest.approx(43_602_810_880, rel=1e-12)
    assert minimum(LLAMA70, big_reserve) == 40
    # a larger GPU: 80 GiB leaves 80 GiB - 5.94e9 = 79.96e9 -> 5 layers -> ceil(80/L) <= 5 -> 16
    assert minimum(LLAMA70, DEFAULT, 80.0) == 16


@pytest.mark.parametrize("model", catalog.MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("mm", [DEFAULT, MemoryModel(schedule="1f1b"), MemoryModel(bytes_per_param=18.0)],
                         ids=["gpipe", "1f1b", "bpp18"])
def test_minimum_fits_and_one_less_does_not(model, mm):
    n = minimum(model, mm)
    limit = memory.usable_bytes(mm, 48.0)
    assert 1 <= n <= model.layers
    assert mem(model, n, mm) <= limit
    if n > 1:
        assert mem(model, n - 1, mm) > limit
    # min_stages' documented premise: every count from the minimum up fits as well
    assert all(mem(model, k, mm) <= limit for k in range(n, model.layers + 1))


def test_1f1b_without_recompute_every_count_above_minimum_fits():
    # Under 1F1B without recomputation an extra stage can hold one more micro-batch of whole
    # layers' activations: Qwen2.5-32B first fits at 22 stages, not at 25..31, and again from
    # 32 (two layers a stage) on. The minimum is where the counts that fit become unbroken.
    mm = MemoryModel(schedule="1f1b", recompute=False)
    model = catalog.model_by_name("Qwen2.5-32B")
    limit = memory.usable_bytes(mm, 48.0)
    assert mem(model, 22, mm) <= limit and mem(model, 25, mm) > limit
    n = minimum(model, mm)
    assert n > 25
    assert all(mem(model, k, mm) <= limit for k in range(n, model.layers + 1))
    assert mem(model, n - 1, mm) > limit


@pytest.mark.parametrize("model", catalog.MODELS, ids=lambda m: m.name)
def test_1f1b_needs_no_more_than_gpipe_and_recompute_saves_memory(model):
    gpipe, f1b = DEFAULT, MemoryModel(schedule="1f1b")
    no_rec = MemoryModel(recompute=False)
    for k in sorted({1, 2, 5, 8, model.layers // 2, model.layers}):
        assert mem(model, k, f1b) <= mem(model, k, gpipe)
        assert mem(model, k, no_rec) > mem(model, k, gpipe)
    assert minimum(model, f1b) <= minimum(model, gpipe)
    no_rec_min = minimum(model, no_rec)
    assert no_rec_min == 0 or no_rec_min >= minimum(model, gpipe)


def test_1f1b_strictly_smaller_for_some_model():
    # not a tautology: the two schedules differ where M > L
    assert any(minimum(m, MemoryModel(schedule="1f1b")) < minimum(m) for m in catalog.MODELS)


# ------------------------------------------------------------------ K* over the counts that fit
@pytest.mark.parametrize("model", catalog.MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("gpu_gb", [48.0, 24.0])
def test_kstar_is_eq13_argmin_over_counts_that_fit(model, gpu_gb):
    gpu = GPUType(f"G{gpu_gb:g}", gpu_gb, catalog.A6000.effective_flops, 0.3)
    mem_min = minimum(model, DEFAULT, gpu_gb)
    if mem_min == 0:
        pytest.skip(f"{model.name} does not fit a {gpu_gb:g} GB GPU")
    p = profile(JobSpec("x", model, ALPACA), gpu)
    p_any = profile(JobSpec("x", model, ALPACA), gpu, start_rule="any")
    assert p.memory_min == mem_min and p_any.memory_min == 1
    assert mem_min <= p.k_star <= model.layers
    intra, overhead = catalog.DEFAULT_INTRA_REGION_GBPS, catalog.DEFAULT_STAGE_OVERHEAD_S
    args = (p.work, p.num_microbatches, p.activation_gbit, intra, overhead, model.layers)
    assert p.k_star == costmodel.k_star(*args, min_stages=mem_min)
    assert p_any.k_star == costmodel.k_star(*args)

    # Eq. (13) by brute force over [memory minimum, layers], ties to fewer GPUs
    def t_iter(k):
        return costmodel.single_region_iteration_time(
            p.work, k, p.activation_gbit, intra, overhead, p.num_microbatches)

    times = [t_iter(k) for k in range(mem_min, model.layers + 1)]
    assert p.k_star == mem_min + int(np.argmin(times))
    # restricting the domain changes K* only when the unrestricted argmin does not fit
    if p_any.k_star >= mem_min:
        assert p.k_star == p_any.k_star
    else:
        assert p.k_star > p_any.k_star
    assert p.min_gpus == mem_min and p.k_target == p.k_star


def test_kstar_moves_when_the_unrestricted_argmin_does_not_fit():
    # 20 GiB: one Llama-70B layer (14e9 + 5.94e9 bytes) fits, two (28e9 + ...) do not, so every
    # layer needs its own GPU: K* = the layer count
    gpu = GPUType("G20", 20.0, catalog.A6000.effective_flops, 0.3)
    p = profile(JobSpec("x", LLAMA70, ALPACA), gpu)
    assert p.memory_min == 80 == p.k_star == p.min_gpus
    assert profile(JobSpec("x", LLAMA70, ALPACA), gpu, start_rule="any").k_star < 80


# ------------------------------------------------------------------ models that never fit
# 8 GiB: Llama-3.2-1B fits (1.24e9 + 4 GiB of inputs + 142.6e6 + 1 GiB = 6.75e9 bytes on 16
# stages), Llama-3.1-70B does not even at one layer per GPU (14e9 bytes of model state alone)
TINY = GPUType("TinyGPU", 8.0, catalog.A6000.effective_flops, 0.3)


def tiny_cluster(gpu: GPUType = TINY) -> Cluster:
    return Cluster((Region("R0", 8, 0.2, 50.0), Region("R1", 8, 0.1, 50.0)), gpu=gpu)


def test_never_fitting_model_is_refused_at_load_naming_job_model_and_gpu():
    scen = Scenario("tiny", tiny_cluster(), (JobSpec("big-job", LLAMA70, ALPACA),))
    pattern = r"big-job.*Llama-3\.1-70B.*TinyGPU"
    with pytest.raises(ValueError, match=pattern):
        geo_gym.simulate(scen, baselines.make("bace_pipe"), seed=0)
    env = GeoPipeEnv(scen)
    with pytest.raises(ValueError, match=pattern):
        env.reset(seed=0)
    with pytest.raises(ValueError, match=pattern):
        profile_columns(scen.jobs, TINY)


def test_never_fitting_catalog_table_job_is_refused_naming_it():
    # a JobTable is profiled per model (_catalog_table): the same refusal, naming the job
    jobs = JobTable(model=[8, 2], dataset=[0, 0], submit=[0.0, 1.0], epochs=[1.0, 1.0])
    assert catalog.MODELS[8].name == "Llama-3.2-1B"
    scen = Scenario("tiny-table", tiny_cluster(), jobs)
    with pytest.raises(ValueError, match=r"'job2'.*Llama-3\.1-70B.*TinyGPU"):
        geo_gym.simulate(scen, baselines.make("fcfs"), seed=0)


def test_huge_model_on_a6000_is_refused():
    huge = ModelSpec("Huge-2T", 2e12, 10, 8192, 128)  # 200e9 params = 3.2e12 bytes per layer
    scen = Scenario("huge", Cluster((Region("R", 64, 0.2, 50.0),)), (JobSpec("h1", huge, ALPACA),))
    with pytest.raises(ValueError, match=r"h1.*Huge-2T.*A6000"):
        geo_gym.simulate(scen, baselines.make("bace_pipe"), seed=0)


def test_any_start_rule_loads_the_same_never_fitting_scenario():
    scen = Scenario("tiny", tiny_cluster(), (JobSpec("big-job", LLAMA70, ALPACA),))
    res = geo_gym.simulate(scen, baselines.make("bace_pipe"), seed=0, env_kwargs={"start_rule": "any"})
    assert 1 <= res.jobs["gpus"].iloc[0] <= 16 and np.isfinite(res.summary["avg_jct_h"])
    env = GeoPipeEnv(scen, start_rule="any")
    env.reset(seed=0)
    assert env.core.min_gpus[0, 0] == 1
    # the scenario's own rule works the same way
    res2 = geo_gym.simulate(Scenario("tiny", tiny_cluster(), scen.jobs, start_rule="any"),
                            baselines.make("bace_pipe"), seed=0)
    assert res2.summary == res.summary


def test_minimum_above_cluster_is_refused_naming_job():
    # fits the GPU, but needs 27 GPUs on a 16-GPU cluster
    scen = Scenario("small", Cluster((Region("R0", 8, 0.2, 50.0), Region("R1", 8, 0.1, 50.0))),
                    (JobSpec("llama", LLAMA70, ALPACA),))
    with pytest.raises(ValueError, match=r"llama.*27 GPUs"):
        geo_gym.simulate(scen, baselines.make("bace_pipe"), seed=0)


# ------------------------------------------------------------------ the memory model as a setting
def test_scenario_memory_model_reaches_the_core():
    # Falcon-40B: 20 GPUs under GPipe, 15 under 1F1B (geo_gym.memory's formula)
    falcon = catalog.model_by_name("Falcon-40B")
    assert (minimum(falcon), minimum(falcon, MemoryModel(schedule="1f1b"))) == (20, 15)
    for mm, want in ((None, 20), (MemoryModel(schedule="1f1b"), 15)):
        scen = make_scenario("paper-default", 0, memory_model=mm)
        env = GeoPipeEnv(scen)
        env.reset(seed=0)
        j = [i for i, job in enumerate(env.jobs) if job.model is falcon]
        assert j and all(env.core.min_gpus[0, i] == want for i in j)
    with pytest.raises(ValueError, match="memory_model"):
        make_scenario("paper-default", 0, memory_model="1f1b")


# ------------------------------------------------------------------ bad input names the value
@pytest.mark.parametrize("kwargs,pattern", [
    ({"bytes_per_param": 0}, r"bytes_per_param.*0"),
    ({"bytes_per_param": -1}, r"bytes_per_param.*-1"),
    ({"bytes_per_param": float("nan")}, r"bytes_per_param.*nan"),
    ({"bytes_per_param": float("inf")}, r"bytes_per_param.*inf"),
    ({"bytes_per_param": True}, r"bytes_per_param.*True"),
    ({"usable_fraction": 0}, r"usable_fraction.*0"),
    ({"usable_fraction": 1.5}, r"usable_fraction.*1\.5"),
    ({"usable_fraction": float("nan")}, r"usable_fraction.*nan"),
    ({"reserve_gb": -1}, r"reserve_gb.*-1"),
    ({"reserve_gb": float("inf")}, r"reserve_gb.*inf"),
    ({"schedule": "zb"}, r"schedule.*'zb'"),
    ({"recompute": "yes"}, r"recompute.*'yes'"),
])
def test_bad_memory_model_input_names_the_value(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        MemoryModel(**kwargs)


def test_good_memory_model_edges_accepted():
    MemoryModel(usable_fraction=1.0, reserve_gb=0.0, bytes_per_param=1e-3, schedule="1f1b", recompute=False)


@pytest.mark.parametrize("value", [0, -4.0])
def test_gpu_type_memory_must_be_positive(value):
    with pytest.raises(ValueError, match=rf"memory_gb.*{value}"):
        GPUType("bad", value, 1e12, 0.3)


def test_gib_constant():
    assert GIB == 2.0**30 and math.isclose(memory.usable_bytes(DEFAULT, 48.0), A6000_BYTES)
