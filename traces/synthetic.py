"""Synthetic job traces written in the *official* file schemas, calibrated to published statistics.

Why: the full Acme job tables (and the full Philly job log) are too large to ship, so the
simulator and the readers are exercised on files that this module writes in exactly the official
schemas (see :mod:`traces.acme` and :mod:`traces.philly`), with the distributions below matched to
the statistics in /work/shared/traces/ (README.md, acme/cluster_summary.csv,
acme/kalos_full_stats_fnstggl.json, acme/seren_head80k_stats_fnstggl.json, and the Philly tables).

Generators (every random draw goes through one ``np.random.default_rng(seed)``):

* :func:`generate_acme` (``cluster`` = ``"seren"`` or ``"kalos"``) -> DataFrame with the official
  Acme columns in the official order; :func:`write_acme_csv` writes it.
* :func:`generate_philly_job_log` -> list of dicts in raw ``cluster_job_log`` format;
  :func:`write_philly_job_log` writes it as JSON.

Model (per job, independent draws unless stated):

* Arrivals: a Poisson process at the trace's mean rate (jobs / trace days), modulated by a daily
  sinusoid (``DIURNAL_AMPLITUDE``, an *assumption*: none of the shipped files gives the daily
  profile), simulated by thinning.
* GPU job or CPU job (Acme): Bernoulli with the published GPU-job share.
* GPU count: categorical over powers of two (plus Philly's 24), weights chosen so that the median
  and mean match the published median/avg GPU number (Acme) or copied from the RFold size
  histogram (Philly). Machines: Acme uses 8-GPU nodes (``node_num = ceil(gpu_num / 8)``); Philly
  draws GPUs-per-machine from the RFold ``shape`` histogram for that size.
* Run time: log-normal with the published median and ``sigma = sqrt(2 ln(mean / median))`` so that
  the untruncated mean equals the published mean, capped at the published maximum. The cap and the
  rounding to whole seconds lower the mean a little; the median is what the tests check.
* Queue: log-normal the same way from the published median/mean queue time.
* State: categorical with the published mix for GPU and CPU jobs separately. Acme's rare states
  (Seren PREEMPTED/NODE_FAIL/TIMEOUT, Kalos RUNNING) use the third-party counts and are carved out
  of FAILED (Seren) / COMPLETED (Kalos) so the three published rates stay as they are.
* Acme job type: the third-party per-type counts for GPU jobs; CPU jobs are type ``CPU``.
* Philly attempts: number of attempts drawn *conditionally on the status* from the joint
  (status, attempts) counts of the real 1-day raw subset; the total run time is split over the
  attempts with Dirichlet(1, ..., 1) shares and attempts are separated by log-normal gaps whose
  median matches the subset (181 s).

Deliberate assumptions (not calibrated, documented so nobody mistakes them for data):
``DIURNAL_AMPLITUDE``; 20 % of Acme CANCELLED jobs never start (empty start/end time, duration 0);
Acme CPU/memory columns; Kalos ``fail_time`` = end time of FAILED/NODE_FAIL jobs and ``stop_time``
= end time of CANCELLED jobs; Philly ``Running`` share at the snapshot (0.5 %), whose last attempt
has the end time ``"None"`` (the spelling the real log uses); user and VC ids (Zipf-like reuse of
random hex ids).

``python -m traces.synthetic --out traces/data`` regenerates the committed example files with the
seeds in :data:`EXAMPLE_FILES`; the output is byte-for-byte deterministic.
``python -m traces.synthetic --kind seren --jobs 20000 --seed 7 --file out/seren_20k.csv`` writes
one synthetic trace of any size (``write_synthetic``).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .acme import ACME_COLUMNS

# =============================================================================== calibration
# --- Acme, per cluster. Source unless stated: acme/cluster_summary.csv (official, full traces).
ACME_JOB_COUNT = {"seren": 1_031_550, "kalos": 62_413}          # job_num
ACME_GPU_JOB_SHARE = {"seren": 663_813 / 1_031_550,              # gpu_job_num / job_num
                      "kalos": 19_907 / 62_413}
# Trace periods (README: Seren and Kalos, Mar-Aug 2023; Kalos May-Aug per the AcmeTrace paper).
ACME_TRACE_START = {"seren": "2023-03-01 00:00:00", "kalos": "2023-05-01 00:00:00"}
ACME_TRACE_DAYS = {"seren": 184.0, "kalos": 123.0}
ACME_UTC_OFFSET = "+08:00"  # Shanghai; the official times carry an offset
ACME_GPU_MEDIAN_RUN_S = {"seren": 122.0, "kalos": 124.0}        # med_run_time_gpu
ACME_GPU_MEAN_RUN_S = {"seren": 1414.335, "kalos": 1259.689}    # avg_run_time_gpu
ACME_GPU_MAX_RUN_S = {"seren": 1_209_604.0, "kalos": 625_740.0}  # max_run_time_gpu
ACME_CPU_MEDIAN_RUN_S = {"seren": 14.0, "kalos": 22.0}           # med_run_time_cpu
ACME_CPU_MEAN_RUN_S = {"seren": 733.894, "kalos": 118.352}       # avg_run_time_cpu
ACME_GPU_MEDIAN_QUEUE_S = {"seren": 1.0, "kalos": 17.0}          # med_que_time_gpu
ACME_GPU_MEAN_QUEUE_S = {"seren": 445.984, "kalos": 214.179}     # avg_que_time_gpu
ACME_CPU_MEDIAN_QUEUE_S = {"seren": 1.0, "kalos": 9.0}           # med_que_time_cpu
ACME_CPU_MEAN_QUEUE_S = {"seren": 4.813, "kalos": 88.401}        # avg_que_time_cpu
# Queue cap: max queue_wait_s of the third-party stats (Seren: first 80k rows; Kalos: full).
ACME_MAX_QUEUE_S = {"seren": 78_329.0, "kalos": 2_968_325.0}
ACME_GPU_MEAN_GPUS = {"seren": 5.68, "kalos": 26.77}              # avg_gpu_num (median 1, max 1024)

# GPU-count mix of GPU jobs. Not published as a histogram: weights chosen so that the median is
# 1 (med_gpu_num) and the mean is avg_gpu_num above (within ~3 %); Kalos also matches the
# third-party percentiles of all jobs (p90 = p95 = 1, p99 = 256 GPUs with 68 % CPU jobs).
ACME_GPU_SIZE_MIX: dict[str, dict[int, float]] = {
    "seren": {1: 0.6278, 2: 0.06, 4: 0.07, 8: 0.17, 16: 0.03, 32: 0.025, 64: 0.01,
              128: 0.005, 256: 0.0015, 512: 0.0005, 1024: 0.0002},
    "kalos": {1: 0.848, 2: 0.01, 4: 0.01, 8: 0.04, 16: 0.01, 32: 0.01, 64: 0.015,
              128: 0.015, 256: 0.021, 512: 0.01, 1024: 0.011},
}
ACME_GPUS_PER_NODE = 8  # A100 8-GPU servers (AcmeTrace paper); node_num = ceil(gpu_num / 8)

# State mix. GPU and CPU rates: complete/cancel/fail_rate_{gpu,cpu} of cluster_summary.csv.
# Rare states: third-party counts (seren_head80k: PREEMPTED 1010, NODE_FAIL 44, TIMEOUT 54 of
# 79,999 jobs; kalos_full: RUNNING 3 of 62,413), carved out of FAILED / COMPLETED.
ACME_GPU_STATE_MIX: dict[str, dict[str, float]] = {
    "seren": {"COMPLETED": 0.497, "CANCELLED": 0.075,
              "FAILED": 0.429 - (1010 + 44 + 54) / 79_999,
              "PREEMPTED": 1010 / 79_999, "NODE_FAIL": 44 / 79_999, "TIMEOUT": 54 / 79_999},
    "kalos": {"COMPLETED": 0.541 - 3 / 62_413, "CANCELLED": 0.062, "FAILED": 0.397,
              "RUNNING": 3 / 62_413},
}
ACME_CPU_STATE_MIX: dict[str, dict[str, float]] = {
    "seren": {"COMPLETED": 0.858, "CANCELLED": 0.039, "FAILED": 0.102},
    "kalos": {"COMPLETED": 0.86, "CANCELLED": 0.001, "FAILED": 0.14},
}
# GPU-job type counts (third-party subgroup_counts.type, all non-CPU types).
ACME_GPU_TYPE_COUNTS: dict[str, dict[str, int]] = {
    "seren": {"SFT": 25_781, "Other": 13_195, "Eval": 2_965, "Debug": 2_492, "Pretrain": 2_085},
    "kalos": {"Eval": 18_471, "Pretrain": 641, "Debug": 537, "Other": 250, "SFT": 8},
}
# CPU cores: GPU jobs get 16 per GPU (128-core / 8-GPU nodes; Kalos cpu p99 3840 ~ 240 GPUs);
# CPU-job core mix matches the third-party medians (Seren 2, Kalos 8). Rough, not a fit.
ACME_CPUS_PER_GPU = 16
ACME_CPU_JOB_CORES_MIX: dict[str, dict[int, float]] = {
    "seren": {2: 0.6, 4: 0.15, 8: 0.15, 16: 0.07, 32: 0.03},
    "kalos": {8: 0.95, 4: 0.02, 16: 0.03},
}
ACME_NEVER_STARTED_CANCEL_SHARE = 0.2  # assumption, see module docstring
ACME_USERS = {"seren": 400, "kalos": 150}  # assumption: size of the user pool

# --- Philly. Sources: README "Verified statistics" and acme/cluster_summary.csv (Philly row).
PHILLY_JOB_COUNT = 111_549             # RFold, all jobs
PHILLY_TRACE_DAYS = 129.4              # RFold arrival span
PHILLY_TRACE_START = "2017-10-03 00:00:00"  # inside the 2017-09-04 .. 2017-12-22 period
PHILLY_MEDIAN_RUN_S = 874.0            # med_run_time_gpu (official summary)
PHILLY_MEAN_RUN_S = 18_006.055         # avg_run_time_gpu
PHILLY_MAX_RUN_S = 4_240_676.0         # max_run_time_gpu
PHILLY_MEDIAN_QUEUE_S = 189.0          # med_que_time_gpu
PHILLY_MEAN_QUEUE_S = 3_760.604        # avg_que_time_gpu
PHILLY_MAX_QUEUE_S = 10 * 86_400.0     # assumption: cap the queue tail at 10 days
# Status mix: complete/cancel/fail_rate_gpu of the official summary (whole trace, not the
# 452-job subset, whose mix is 73/8/19 %). Running at the snapshot: assumption.
PHILLY_RUNNING_SHARE = 0.005
PHILLY_STATUS_MIX = {"Pass": 0.604, "Killed": 0.090, "Failed": 0.305}
# GPU sizes: RFold histogram (README); the 19 jobs of "other sizes" are left out.
PHILLY_GPU_SIZE_COUNTS = {1: 96_662, 2: 2_522, 4: 5_487, 8: 5_716, 16: 852, 24: 40,
                          32: 212, 64: 28, 128: 11}
# GPUs per machine for a given size: RFold shape histogram (e.g. size 8: "8" 4353, "4+4" 783,
# "2+2+2+2" 414, "1+...+1" 166). Sizes >= 16 use the size-16 row (8+8 461, 4x4 195, 2x8 144,
# 1x16 52); larger sizes have too few jobs to fit separately.
PHILLY_PER_NODE_COUNTS: dict[int, dict[int, int]] = {
    1: {1: 96_662},
    2: {2: 2_475, 1: 47},
    4: {4: 4_363, 2: 931, 1: 193},
    8: {8: 4_353, 4: 783, 2: 414, 1: 166},
    16: {8: 461, 4: 195, 2: 144, 1: 52},
}
PHILLY_MACHINES = 552                  # philly/cluster_machine_list.csv
PHILLY_VCS = 15                        # TitanSched: 15 VC hashes
PHILLY_USERS = 300                     # assumption: user pool size
# (status -> {number of attempts: jobs}) in the real 1-day raw subset (452 jobs).
PHILLY_ATTEMPTS_BY_STATUS: dict[str, dict[int, int]] = {
    "Pass": {1: 316, 2: 9, 3: 4, 4: 1, 5: 1},
    "Failed": {0: 1, 1: 24, 2: 4, 3: 2, 4: 1, 5: 53},
    "Killed": {0: 2, 1: 28, 2: 4, 3: 1, 4: 1},
    "Running": {1: 316, 2: 9, 3: 4, 4: 1, 5: 1},  # assumption: like Pass
}
PHILLY_RETRY_GAP_MEDIAN_S = 181.0      # median gap between attempts in the raw subset
PHILLY_RETRY_GAP_SIGMA = 1.0           # assumption

DIURNAL_AMPLITUDE = 0.5                # assumption: peak rate 1.5x, trough 0.5x the mean
DIURNAL_PEAK_HOUR = 15.0               # assumption: afternoon peak (local trace time)

_PHILLY_BASE = datetime.fromisoformat(PHILLY_TRACE_START)

EXAMPLE_FILES = {  # file name -> (generator kind, number of jobs, seed)
    "synthetic_acme_seren.csv": ("seren", 2000, 20230301),
    "synthetic_acme_kalos.csv": ("kalos", 2000, 20230501),
    "synthetic_philly_job_log.json": ("philly", 1000, 20171003),
}


# =============================================================================== draw helpers
def lognormal_sigma(median: float, mean: float) -> float:
    """sigma of a log-normal with this median and mean (mean = median * exp(sigma^2 / 2))."""
    return math.sqrt(2.0 * math.log(mean / median)) if mean > median else 0.0


def _lognormal(rng: np.random.Generator, median: float, mean: float, n: int,
               cap: float) -> np.ndarray:
    draws = rng.lognormal(math.log(median), lognormal_sigma(median, mean), n)
    return np.minimum(np.round(draws), cap)


def _categorical(rng: np.random.Generator, weights: Mapping[Any, float], n: int) -> np.ndarray:
    keys = list(weights)
    p = np.array([weights[k] for k in keys], dtype=float)
    idx = rng.choice(len(keys), size=n, p=p / p.sum())
    return np.array(keys, dtype=object)[idx] if isinstance(keys[0], str) else np.array(keys)[idx]


def arrival_times(rng: np.random.Generator, n: int, jobs_per_day: float) -> np.ndarray:
    """n arrival offsets (whole seconds, sorted, first one 0) of a diurnally modulated Poisson
    process, simulated by thinning a homogeneous process at the peak rate."""
    base = jobs_per_day / 86_400.0
    peak = base * (1.0 + DIURNAL_AMPLITUDE)
    accepted: list[np.ndarray] = []
    t, total = 0.0, 0
    while total < n:
        gaps = rng.exponential(1.0 / peak, 2 * n)
        times = t + np.cumsum(gaps)
        t = float(times[-1])
        phase = 2.0 * np.pi * (times / 3600.0 - DIURNAL_PEAK_HOUR + 6.0) / 24.0
        rate = base * (1.0 + DIURNAL_AMPLITUDE * np.sin(phase))
        keep = times[rng.random(times.size) < rate / peak]
        accepted.append(keep)
        total += keep.size
    times = np.concatenate(accepted)[:n]
    times = np.floor(times - times[0])
    return times


def _zipf_ids(rng: np.random.Generator, pool: int, n: int, prefix: str = "") -> np.ndarray:
    """n ids from a pool of ``pool`` random 6-hex ids, reused with weights 1/rank (a few heavy
    users, many light ones, as in every public cluster trace)."""
    ids = np.array([f"{prefix}{v:06x}" for v in rng.integers(0, 16**6, pool)], dtype=object)
    weights = 1.0 / np.arange(1, pool + 1)
    return ids[rng.choice(pool, size=n, p=weights / weights.sum())]


def _format_times(base: str, offsets: np.ndarray, suffix: str = "") -> list[str | None]:
    """Absolute time strings ``base + offsets`` (None where the offset is NaN)."""
    stamps = pd.Timestamp(base) + pd.to_timedelta(np.nan_to_num(offsets), unit="s")
    text = stamps.strftime("%Y-%m-%d %H:%M:%S")
    return [None if np.isnan(o) else f"{s}{suffix}" for s, o in zip(text, offsets, strict=True)]


# =============================================================================== Acme
def _acme_states(rng: np.random.Generator, cluster: str, is_gpu: np.ndarray) -> np.ndarray:
    states = np.empty(is_gpu.size, dtype=object)
    states[is_gpu] = _categorical(rng, ACME_GPU_STATE_MIX[cluster], int(is_gpu.sum()))
    states[~is_gpu] = _categorical(rng, ACME_CPU_STATE_MIX[cluster], int((~is_gpu).sum()))
    return states


def _by_class(rng: np.random.Generator, is_gpu: np.ndarray, gpu_draw, cpu_draw) -> np.ndarray:
    out = np.empty(is_gpu.size, dtype=float)
    out[is_gpu] = gpu_draw(int(is_gpu.sum()))
    out[~is_gpu] = cpu_draw(int((~is_gpu).sum()))
    return out


def _acme_numbers(rng: np.random.Generator, cluster: str, n: int) -> dict[str, np.ndarray]:
    """All numeric per-job draws for one Acme cluster (seconds relative to the trace start)."""
    c = cluster
    submit = arrival_times(rng, n, ACME_JOB_COUNT[c] / ACME_TRACE_DAYS[c])
    is_gpu = rng.random(n) < ACME_GPU_JOB_SHARE[c]
    gpus = np.where(is_gpu, _categorical(rng, ACME_GPU_SIZE_MIX[c], n), 0)
    nodes = np.maximum(1, -(-gpus // ACME_GPUS_PER_NODE))
    cpus = np.where(is_gpu, gpus * ACME_CPUS_PER_GPU,
                    _categorical(rng, ACME_CPU_JOB_CORES_MIX[c], n))
    duration = _by_class(
        rng, is_gpu,
        lambda k: _lognormal(rng, ACME_GPU_MEDIAN_RUN_S[c], ACME_GPU_MEAN_RUN_S[c], k,
                             ACME_GPU_MAX_RUN_S[c]),
        lambda k: _lognormal(rng, ACME_CPU_MEDIAN_RUN_S[c], ACME_CPU_MEAN_RUN_S[c], k,
                             ACME_GPU_MAX_RUN_S[c]))
    queue = _by_class(
        rng, is_gpu,
        lambda k: _lognormal(rng, ACME_GPU_MEDIAN_QUEUE_S[c], ACME_GPU_MEAN_QUEUE_S[c], k,
                             ACME_MAX_QUEUE_S[c]),
        lambda k: _lognormal(rng, ACME_CPU_MEDIAN_QUEUE_S[c], ACME_CPU_MEAN_QUEUE_S[c], k,
                             ACME_MAX_QUEUE_S[c]))
    state = _acme_states(rng, c, is_gpu)
    jtype = np.where(is_gpu, _categorical(rng, ACME_GPU_TYPE_COUNTS[c], n), "CPU")
    never_started = (state == "CANCELLED") & (rng.random(n) < ACME_NEVER_STARTED_CANCEL_SHARE)
    return {"submit": submit, "is_gpu": is_gpu, "gpus": gpus, "nodes": nodes, "cpus": cpus,
            "duration": duration, "queue": queue, "state": state, "type": jtype,
            "never_started": never_started}


def generate_acme(cluster: str, n_jobs: int, seed: int) -> pd.DataFrame:
    """A synthetic Acme job table with exactly the official columns of ``cluster``."""
    cluster = cluster.lower()
    if cluster not in ACME_COLUMNS:
        raise ValueError(f"unknown Acme cluster {cluster!r}; expected one of {sorted(ACME_COLUMNS)}")
    rng = np.random.default_rng(seed)
    d = _acme_numbers(rng, cluster, n_jobs)
    running = d["state"] == "RUNNING"
    start = np.where(d["never_started"], np.nan, d["submit"] + d["queue"])
    duration = np.where(d["never_started"], 0.0, np.where(running, np.nan, d["duration"]))
    end = start + duration  # NaN when never started or still running
    users = _zipf_ids(rng, ACME_USERS[cluster], n_jobs, prefix="u")
    base, tz = ACME_TRACE_START[cluster], ACME_UTC_OFFSET
    table: dict[str, Any] = {
        "job_id": [f"syn-{cluster}-{i:07d}" for i in range(n_jobs)],
        "user": users, "node_num": d["nodes"], "gpu_num": d["gpus"], "cpu_num": d["cpus"],
        "type": d["type"], "state": d["state"],
        "submit_time": _format_times(base, d["submit"], tz),
        "start_time": _format_times(base, start, tz),
        "end_time": _format_times(base, end, tz),
        "duration": pd.array(duration, dtype="Int64"),
        "queue": pd.array(np.where(d["never_started"], np.nan, d["queue"]), dtype="Int64"),
        "gpu_time": pd.array(duration * d["gpus"], dtype="Int64"),
    }
    if cluster == "kalos":
        failed = np.isin(d["state"], ["FAILED", "NODE_FAIL"])
        cancelled = d["state"] == "CANCELLED"
        mem = 16 * d["cpus"] // d["nodes"]  # assumption: 16 GB per core-pair slot
        table["mem_per_pod_GB"] = mem
        table["shared_mem_per_pod"] = mem // 2
        table["fail_time"] = _format_times(base, np.where(failed, end, np.nan), tz)
        table["stop_time"] = _format_times(base, np.where(cancelled, end, np.nan), tz)
    return pd.DataFrame(table)[list(ACME_COLUMNS[cluster])]


def write_acme_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write an Acme table as CSV (no index, ``\\n`` line ends, empty cells for missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n")
    return path


# =============================================================================== Philly
def _philly_gpus(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs, GPUs per machine) from the RFold size and shape histograms."""
    gpus = _categorical(rng, PHILLY_GPU_SIZE_COUNTS, n).astype(int)
    per_node = np.empty(n, dtype=int)
    for i, size in enumerate(gpus):
        row = PHILLY_PER_NODE_COUNTS[min(int(size), 16)]
        options = [g for g in row if size % g == 0]
        weights = np.array([row[g] for g in options], dtype=float)
        per_node[i] = options[rng.choice(len(options), p=weights / weights.sum())]
    return gpus, per_node


def _philly_detail(rng: np.random.Generator, gpus: int, per_node: int) -> list[dict[str, Any]]:
    machines = rng.choice(PHILLY_MACHINES, size=gpus // per_node, replace=False) + 1
    return [{"ip": f"m{m}", "gpus": [f"gpu{g}" for g in sorted(rng.choice(8, per_node,
                                                                           replace=False))]}
            for m in machines]


def _philly_attempt_spans(rng: np.random.Generator, submit: float, queue: float,
                          duration: float, k: int) -> list[tuple[float, float]]:
    """k (start, end) offsets: the run time split by Dirichlet shares, log-normal retry gaps."""
    shares = rng.dirichlet(np.ones(k)) if k > 1 else np.ones(1)
    runs = np.maximum(1.0, np.round(duration * shares))
    gaps = np.round(rng.lognormal(math.log(PHILLY_RETRY_GAP_MEDIAN_S), PHILLY_RETRY_GAP_SIGMA, k))
    spans, t = [], submit + queue
    for i in range(k):
        if i:
            t += gaps[i]
        spans.append((t, t + runs[i]))
        t += runs[i]
    return spans


def _philly_time(offset: float) -> str:
    """Naive Philly time string ``PHILLY_TRACE_START + offset`` (plain datetime: fast per value)."""
    return (_PHILLY_BASE + timedelta(seconds=float(offset))).strftime("%Y-%m-%d %H:%M:%S")


def _philly_attempt_counts(rng: np.random.Generator, status: np.ndarray) -> np.ndarray:
    """Number of attempts per job, drawn from the subset's counts for the job's status."""
    counts = np.zeros(status.size, dtype=int)
    for name, table in PHILLY_ATTEMPTS_BY_STATUS.items():
        mask = status == name
        counts[mask] = _categorical(rng, table, int(mask.sum()))
    return counts


def _philly_job(rng: np.random.Generator, i: int, draws: dict[str, Any]) -> dict[str, Any]:
    status = draws["status"][i]
    k = int(draws["attempts"][i])
    spans = _philly_attempt_spans(rng, draws["submit"][i], draws["queue"][i],
                                  draws["duration"][i], k)
    attempts = []
    for a, (start, end) in enumerate(spans):
        still_running = status == "Running" and a == k - 1
        attempts.append({
            "start_time": _philly_time(start),
            "end_time": "None" if still_running else _philly_time(end),
            "detail": _philly_detail(rng, int(draws["gpus"][i]), int(draws["per_node"][i])),
        })
    return {
        "status": status, "vc": draws["vc"][i], "jobid": f"application_synthetic_{i:06d}",
        "attempts": attempts, "submitted_time": _philly_time(draws["submit"][i]),
        "user": draws["user"][i],
    }


def generate_philly_job_log(n_jobs: int, seed: int) -> list[dict[str, Any]]:
    """A synthetic Philly ``cluster_job_log``: list of jobs in the raw JSON structure."""
    rng = np.random.default_rng(seed)
    status_mix = {k: v * (1 - PHILLY_RUNNING_SHARE) / sum(PHILLY_STATUS_MIX.values())
                  for k, v in PHILLY_STATUS_MIX.items()}
    status_mix["Running"] = PHILLY_RUNNING_SHARE
    gpus, per_node = _philly_gpus(rng, n_jobs)
    draws = {
        "submit": arrival_times(rng, n_jobs, PHILLY_JOB_COUNT / PHILLY_TRACE_DAYS),
        "status": _categorical(rng, status_mix, n_jobs), "gpus": gpus, "per_node": per_node,
        "duration": _lognormal(rng, PHILLY_MEDIAN_RUN_S, PHILLY_MEAN_RUN_S, n_jobs,
                               PHILLY_MAX_RUN_S),
        "queue": _lognormal(rng, PHILLY_MEDIAN_QUEUE_S, PHILLY_MEAN_QUEUE_S, n_jobs,
                            PHILLY_MAX_QUEUE_S),
        "vc": _zipf_ids(rng, PHILLY_VCS, n_jobs), "user": _zipf_ids(rng, PHILLY_USERS, n_jobs),
    }
    draws["attempts"] = _philly_attempt_counts(rng, draws["status"])
    return [_philly_job(rng, i, draws) for i in range(n_jobs)]


def write_philly_job_log(obj: list[dict[str, Any]], path: str | Path) -> Path:
    """Write a job log as compact JSON (one job per line keeps diffs readable and files small)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(job, separators=(",", ":")) for job in obj]
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")
    return path


# =============================================================================== CLI
def write_synthetic(kind: str, n_jobs: int, seed: int, target: str | Path) -> Path:
    """Generate ``n_jobs`` jobs of ``kind`` (``seren``, ``kalos`` or ``philly``) with ``seed``
    and write them to ``target`` in the official schema."""
    if kind == "philly":
        return write_philly_job_log(generate_philly_job_log(n_jobs, seed), target)
    return write_acme_csv(generate_acme(kind, n_jobs, seed), target)


def write_example(name: str, out_dir: str | Path) -> Path:
    """Regenerate one of :data:`EXAMPLE_FILES` into ``out_dir``."""
    kind, n_jobs, seed = EXAMPLE_FILES[name]
    return write_synthetic(kind, n_jobs, seed, Path(out_dir) / name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Write the synthetic example traces, or one synthetic trace of any size "
                    "(--kind/--jobs/--seed/--file), e.g. for benchmarks.")
    parser.add_argument("--out", default="traces/data", help="output folder (default traces/data)")
    parser.add_argument("--kind", choices=["seren", "kalos", "philly"], help="write one trace of this kind")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--file", type=Path, help="where to write the one trace (with --kind)")
    args = parser.parse_args(argv)
    if args.kind:
        if args.file is None:
            parser.error("--kind needs --file")
        if args.jobs < 1:
            parser.error(f"--jobs must be >= 1, got {args.jobs}")
        path = write_synthetic(args.kind, args.jobs, args.seed, args.file)
        print(f"wrote {path} ({path.stat().st_size:,} bytes): SYNTHETIC {args.kind}, "
              f"{args.jobs} jobs, seed {args.seed}")
        return
    for name in EXAMPLE_FILES:
        path = write_example(name, args.out)
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
