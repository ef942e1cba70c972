"""Synthetic generators: round trip through the readers, calibration against the published
statistics (constants in traces.synthetic, each with its source), determinism, and the committed
example files in traces/data being exactly what the generator writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traces import read_acme, read_philly_job_log
from traces.acme import KALOS_COLUMNS, SEREN_COLUMNS
from traces.synthetic import (
    ACME_CPU_STATE_MIX,
    ACME_GPU_JOB_SHARE,
    ACME_GPU_MEAN_GPUS,
    ACME_GPU_MEDIAN_QUEUE_S,
    ACME_GPU_MEDIAN_RUN_S,
    ACME_GPU_SIZE_MIX,
    ACME_GPU_STATE_MIX,
    EXAMPLE_FILES,
    PHILLY_ATTEMPTS_BY_STATUS,
    PHILLY_GPU_SIZE_COUNTS,
    PHILLY_MEDIAN_RUN_S,
    PHILLY_STATUS_MIX,
    _acme_numbers,
    generate_acme,
    generate_philly_job_log,
    write_acme_csv,
    write_example,
    write_philly_job_log,
)

DATA = Path(__file__).resolve().parents[1] / "traces" / "data"
CLUSTERS = ["seren", "kalos"]
N_STATS = 20_000  # large enough that the tolerances below are > 4 standard errors


@pytest.fixture(scope="module", params=CLUSTERS)
def acme_big(request) -> tuple[str, pd.DataFrame]:
    return request.param, generate_acme(request.param, N_STATS, seed=7)


@pytest.fixture(scope="module")
def philly_big(tmp_path_factory) -> pd.DataFrame:
    """A 10,000-job synthetic log, written and read back through the real reader."""
    path = tmp_path_factory.mktemp("philly") / "log.json"
    return read_philly_job_log(write_philly_job_log(generate_philly_job_log(N_STATS // 2, 7), path))


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_acme_round_trip(tmp_path: Path, cluster: str) -> None:
    raw = generate_acme(cluster, 500, seed=1)
    assert tuple(raw.columns) == (SEREN_COLUMNS if cluster == "seren" else KALOS_COLUMNS)
    path = write_acme_csv(raw, tmp_path / f"syn_{cluster}.csv")
    df = read_acme(path)  # auto-detects the cluster from the columns
    assert df.attrs["cluster"] == cluster and len(df) == len(raw)
    assert df["job_id"].tolist() == raw["job_id"].tolist()
    assert df["gpus"].tolist() == raw["gpu_num"].tolist()
    assert df["state"].tolist() == raw["state"].tolist()
    assert np.allclose(df["duration"], raw["duration"].astype(float), equal_nan=True)
    started = df["num_attempts"] == 1
    assert (started == raw["start_time"].notna()).all()
    # start - submit equals the queue column; end - start the duration.
    starts = np.array([a[0][0] for a in df.loc[started, "attempts"]])
    assert np.allclose(starts - df.loc[started, "submit"], df.loc[started, "queue"])


def test_philly_round_trip(tmp_path: Path) -> None:
    obj = generate_philly_job_log(300, seed=1)
    path = write_philly_job_log(obj, tmp_path / "log.json")
    df = read_philly_job_log(path)
    assert len(df) == 300 and df["job_id"].tolist() == [j["jobid"] for j in obj]
    assert df["num_attempts"].tolist() == [len(j["attempts"]) for j in obj]
    status_to_state = {"Pass": "COMPLETED", "Killed": "CANCELLED", "Failed": "FAILED",
                       "Running": "RUNNING"}
    assert df["state"].tolist() == [status_to_state[j["status"]] for j in obj]
    started = df["num_attempts"] > 0
    assert (df.loc[started, "gpus"] >= 1).all()
    assert (df.loc[df["state"] == "RUNNING", "duration"].isna()).all()


# ------------------------------------------------------------------ calibration
def test_acme_gpu_share_and_size_mix(acme_big) -> None:
    cluster, raw = acme_big
    gpu = raw[raw["gpu_num"] > 0]
    assert len(gpu) / len(raw) == pytest.approx(ACME_GPU_JOB_SHARE[cluster], abs=0.015)
    mix = gpu["gpu_num"].value_counts(normalize=True)
    for size, weight in ACME_GPU_SIZE_MIX[cluster].items():
        assert mix.get(size, 0.0) == pytest.approx(weight, abs=0.015), size
    assert gpu["gpu_num"].median() == 1  # med_gpu_num, cluster_summary.csv
    assert gpu["gpu_num"].max() <= 1024
    assert (raw["node_num"] == np.maximum(1, -(-raw["gpu_num"] // 8))).all()


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_acme_mean_gpus_matches_summary(cluster: str) -> None:
    # The mean is dominated by rare 256-1024 GPU jobs, so it needs a large sample (~1 % s.e.).
    # _acme_numbers is generate_acme's numeric core (no time formatting), so this stays fast.
    d = _acme_numbers(np.random.default_rng(11), cluster, 200_000)
    mean = d["gpus"][d["is_gpu"]].mean()
    assert mean == pytest.approx(ACME_GPU_MEAN_GPUS[cluster], rel=0.10)


def test_acme_durations_and_queue(acme_big) -> None:
    cluster, raw = acme_big
    gpu = raw[(raw["gpu_num"] > 0) & raw["start_time"].notna()]
    # median GPU run time (cluster_summary.csv: Seren 122 s, Kalos 124 s) within 10 %
    assert gpu["duration"].astype(float).median() == pytest.approx(
        ACME_GPU_MEDIAN_RUN_S[cluster], rel=0.10)
    # heavy tail: p99 far above the median, as in the published stats (Seren p99 / p50 ~ 1000)
    assert gpu["duration"].astype(float).quantile(0.99) > 50 * ACME_GPU_MEDIAN_RUN_S[cluster]
    assert gpu["queue"].astype(float).median() == pytest.approx(
        ACME_GPU_MEDIAN_QUEUE_S[cluster], abs=3)


def test_acme_state_mix(acme_big) -> None:
    cluster, raw = acme_big
    for is_gpu, mix in ((True, ACME_GPU_STATE_MIX[cluster]), (False, ACME_CPU_STATE_MIX[cluster])):
        part = raw[(raw["gpu_num"] > 0) == is_gpu]
        share = part["state"].value_counts(normalize=True)
        total = sum(mix.values())
        for state in ("COMPLETED", "CANCELLED", "FAILED"):
            assert share.get(state, 0.0) == pytest.approx(mix[state] / total, abs=0.02), state
    # the published all-jobs Kalos mix (third-party stats: 75.8 / 22.2 / 2.0 %) within 2 points
    if cluster == "kalos":
        share = raw["state"].value_counts(normalize=True)
        assert share["COMPLETED"] == pytest.approx(0.758, abs=0.02)
        assert share["FAILED"] == pytest.approx(0.222, abs=0.02)
        assert share["CANCELLED"] == pytest.approx(0.020, abs=0.02)


def test_acme_arrivals_sorted_and_rate(acme_big) -> None:
    cluster, raw = acme_big
    submit = pd.to_datetime(raw["submit_time"], utc=True)
    assert submit.is_monotonic_increasing
    days = (submit.iloc[-1] - submit.iloc[0]).total_seconds() / 86_400
    per_day = {"seren": 1_031_550 / 184, "kalos": 62_413 / 123}[cluster]
    assert len(raw) / days == pytest.approx(per_day, rel=0.10)


def test_philly_calibration(philly_big: pd.DataFrame) -> None:
    df = philly_big
    started = df[df["num_attempts"] > 0]
    mix = started["gpus"].value_counts(normalize=True)
    total = sum(PHILLY_GPU_SIZE_COUNTS.values())
    for size in (1, 2, 4, 8):
        assert mix.get(size, 0.0) == pytest.approx(PHILLY_GPU_SIZE_COUNTS[size] / total,
                                                   abs=0.015), size
    # median run time (official Philly summary 874 s) within 10 %; NaN = still running
    done = started["duration"].dropna()
    assert done.median() == pytest.approx(PHILLY_MEDIAN_RUN_S, rel=0.10)
    # status mix (official summary 60.4 / 9.0 / 30.5 %) within 2 points
    share = df["state"].value_counts(normalize=True)
    norm = sum(PHILLY_STATUS_MIX.values())
    for status, state in (("Pass", "COMPLETED"), ("Killed", "CANCELLED"), ("Failed", "FAILED")):
        assert share[state] == pytest.approx(PHILLY_STATUS_MIX[status] / norm, abs=0.02)
    # multi-attempt share implied by P(attempts | status) of the real subset and that mix
    implied = sum(PHILLY_STATUS_MIX[s] / norm * sum(c for k, c in PHILLY_ATTEMPTS_BY_STATUS[s]
                                                     .items() if k > 1)
                  / sum(PHILLY_ATTEMPTS_BY_STATUS[s].values()) for s in PHILLY_STATUS_MIX)
    assert (df["num_attempts"] > 1).mean() == pytest.approx(implied, abs=0.02)
    # ... which lies between the raw 1-day subset (18 %) and marwage's >=4-GPU Pass jobs (27 %)
    assert 0.18 <= implied <= 0.27


# ------------------------------------------------------------------ determinism
def test_same_seed_same_output_different_seed_different() -> None:
    a, b, c = (generate_acme("kalos", 300, seed=s) for s in (5, 5, 6))
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)
    p, q, r = (generate_philly_job_log(200, seed=s) for s in (5, 5, 6))
    assert p == q and p != r


@pytest.mark.parametrize("name", sorted(EXAMPLE_FILES))
def test_committed_examples_are_generator_output(tmp_path: Path, name: str) -> None:
    committed = DATA / name
    assert committed.exists(), f"{committed} missing: run python -m traces.synthetic --out traces/data"
    assert "synthetic" in name and committed.stat().st_size < 500_000
    fresh = write_example(name, tmp_path)
    assert fresh.read_bytes() == committed.read_bytes(), (
        f"{name} differs from the generator output; regenerate with "
        "python -m traces.synthetic --out traces/data")


def test_committed_examples_read_back() -> None:
    seren = read_acme(DATA / "synthetic_acme_seren.csv")
    kalos = read_acme(DATA / "synthetic_acme_kalos.csv")
    philly = read_philly_job_log(DATA / "synthetic_philly_job_log.json")
    assert (len(seren), len(kalos), len(philly)) == (2000, 2000, 1000)
    assert seren.attrs["cluster"] == "seren" and kalos.attrs["cluster"] == "kalos"


def test_cli_writes_one_trace_of_any_size(tmp_path: Path) -> None:
    import json

    from traces.synthetic import generate_philly_job_log, main

    target = tmp_path / "syn_philly.json"
    main(["--kind", "philly", "--jobs", "30", "--seed", "4", "--file", str(target)])
    assert json.loads(target.read_text()) == generate_philly_job_log(30, 4)
    main(["--kind", "kalos", "--jobs", "25", "--seed", "4", "--file", str(tmp_path / "k.csv")])
    assert len(read_acme(tmp_path / "k.csv")) == 25
