"""Reader for the official AcmeTrace job tables (Shanghai AI Lab, NSDI'24), returning the common
job table of :mod:`traces.schema`.

Official columns (InternLM/AcmeTrace README, ``data/job_trace/trace_{seren,kalos}.csv``):

* Seren: ``job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,
  duration,queue,gpu_time``
* Kalos: as Seren plus ``mem_per_pod_GB,shared_mem_per_pod`` after ``cpu_num`` and
  ``fail_time,stop_time`` after ``end_time``.

Decisions:

* ``cluster=None`` auto-detects: a file with ``fail_time`` or ``mem_per_pod_GB`` is Kalos,
  otherwise Seren. All official columns of that cluster must be present (a missing one is an
  error naming it); extra columns are ignored.
* Times are ISO-8601 with a UTC offset and are parsed tz-aware; ``t0`` is the earliest
  ``submit_time`` exactly as written (offset kept). ``submit_time`` is required; ``start_time``
  may be empty (a job cancelled in the queue), ``end_time`` may be empty (RUNNING); Kalos
  ``fail_time``/``stop_time`` may be empty.
* ``duration`` and ``queue`` are taken from their columns (seconds), not recomputed, because they
  are the published values; an empty ``duration`` (e.g. RUNNING) is NaN. Negative values error.
* ``attempts`` is ``((start, end),)`` when ``start_time`` is present, else ``()``: Acme records a
  single run per job. ``gpus_per_node = gpu_num / node_num`` (NaN for CPU jobs).
* States must be in the cluster's published set: COMPLETED, CANCELLED, FAILED, TIMEOUT,
  NODE_FAIL, plus PREEMPTED (Seren) or RUNNING (Kalos).
* ``stop_time`` and the CPU/memory columns are validated as parseable but not carried into the
  common table (the simulator schedules GPUs). ``vc`` is None (Acme has no VC column).
* CPU jobs (``gpu_num == 0``) are kept; ``gpu_only=True`` is the explicit filter that drops them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ._io import load_csv, parse_number, parse_times, require_columns
from .schema import TraceFormatError, build_job_table

SEREN_COLUMNS: tuple[str, ...] = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "type", "state",
    "submit_time", "start_time", "end_time", "duration", "queue", "gpu_time",
)
KALOS_COLUMNS: tuple[str, ...] = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "mem_per_pod_GB", "shared_mem_per_pod",
    "type", "state", "submit_time", "start_time", "end_time", "fail_time", "stop_time",
    "duration", "queue", "gpu_time",
)
ACME_COLUMNS = {"seren": SEREN_COLUMNS, "kalos": KALOS_COLUMNS}
_COMMON_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")
ACME_STATES = {
    "seren": (*_COMMON_STATES, "PREEMPTED"),
    "kalos": (*_COMMON_STATES, "RUNNING"),
}


def detect_acme_cluster(columns: list[str] | pd.Index) -> str:
    """'kalos' when Kalos-only columns are present, else 'seren'."""
    return "kalos" if {"fail_time", "mem_per_pod_GB"} & set(columns) else "seren"


def _check_states(raw: pd.DataFrame, cluster: str, path: object) -> None:
    allowed = ACME_STATES[cluster]
    bad = np.flatnonzero(~raw["state"].isin(allowed).to_numpy())
    if bad.size:
        row = int(bad[0])
        raise TraceFormatError(path, row, "state", f"unknown {cluster} state "
                               f"{raw['state'].iloc[row]!r}; expected {list(allowed)}")


def _check_required_text(raw: pd.DataFrame, column: str, path: object) -> None:
    bad = np.flatnonzero(raw[column].isna().to_numpy())
    if bad.size:
        raise TraceFormatError(path, int(bad[0]), column, "missing value")


_UTC_OFFSET = r"(?:[+-]\d{2}:?\d{2}|Z)\s*$"


def _check_offsets(raw: pd.DataFrame, columns: tuple[str, ...], path: object) -> None:
    """Every time in the file has a UTC offset or none has: a time without one among times with
    one would be read as UTC and move by the offset (8 h for Acme's +08:00)."""
    first = None
    for column in columns:
        text = raw[column]
        present = text.notna().to_numpy()
        aware = text.astype(str).str.contains(_UTC_OFFSET, regex=True).to_numpy()
        if first is None and present.any():
            first = bool(aware[present][0])
        if first is not None:
            bad = np.flatnonzero(present & (aware != first))
            if bad.size:
                what = "has no UTC offset, unlike" if first else "has a UTC offset, unlike"
                raise TraceFormatError(path, int(bad[0]), column, f"{text.iloc[bad[0]]!r} {what} the file's first time")


def _check_consistency(nodes: np.ndarray, gpus: np.ndarray, submit: np.ndarray, start: np.ndarray,
                       path: object) -> None:
    bad = np.flatnonzero((nodes == 0) & (gpus > 0))
    if bad.size:
        raise TraceFormatError(path, int(bad[0]), "node_num", f"0 nodes for {gpus[bad[0]]} GPUs")
    bad = np.flatnonzero(start < submit)  # NaN (never started) compares False
    if bad.size:
        raise TraceFormatError(path, int(bad[0]), "start_time", "starts before submit_time")


def _attempts(start: np.ndarray, end: np.ndarray, path: object) -> list[tuple]:
    bad = np.flatnonzero(end < start)
    if bad.size:
        raise TraceFormatError(path, int(bad[0]), "end_time", "ends before start_time")
    return [((s, e),) if not np.isnan(s) else () for s, e in zip(start, end, strict=True)]


def read_acme(path: str | Path, cluster: str | None = None, gpu_only: bool = False) -> pd.DataFrame:
    """Read an official AcmeTrace CSV (Seren or Kalos schema) into the common job table."""
    raw = load_csv(path)
    cluster = cluster.lower() if cluster else detect_acme_cluster(raw.columns)
    if cluster not in ACME_COLUMNS:
        raise ValueError(f"{path}: unknown Acme cluster {cluster!r}; expected seren, kalos or None")
    require_columns(raw, ACME_COLUMNS[cluster], path)
    for column in ("job_id", "state"):
        _check_required_text(raw, column, path)
    _check_states(raw, cluster, path)

    times = ("submit_time", "start_time", "end_time") + (("fail_time", "stop_time") if cluster == "kalos" else ())
    _check_offsets(raw, times, path)
    nodes = parse_number(raw, "node_num", path, integer=True, min_value=0)
    gpus = parse_number(raw, "gpu_num", path, integer=True, min_value=0)
    parse_number(raw, "cpu_num", path, min_value=0)
    submit = parse_times(raw, "submit_time", path, utc=True)
    start = parse_times(raw, "start_time", path, utc=True, allow_missing=True)
    end = parse_times(raw, "end_time", path, utc=True, allow_missing=True)
    fail = np.full(len(raw), np.nan)
    if cluster == "kalos":
        parse_number(raw, "mem_per_pod_GB", path, allow_missing=True)
        fail = parse_times(raw, "fail_time", path, utc=True, allow_missing=True)
        parse_times(raw, "stop_time", path, utc=True, allow_missing=True)
    duration = parse_number(raw, "duration", path, allow_missing=True)
    queue = parse_number(raw, "queue", path, allow_missing=True)
    parse_number(raw, "gpu_time", path, allow_missing=True)
    _check_consistency(nodes, gpus, submit, start, path)

    keep = gpus > 0 if gpu_only else np.ones(len(raw), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_node = np.where((gpus > 0) & (nodes > 0), gpus / np.maximum(nodes, 1), np.nan)
    columns = {
        "job_id": raw["job_id"].to_numpy()[keep].tolist(), "submit": submit[keep],
        "gpus": gpus[keep], "gpus_per_node": per_node[keep], "duration": duration[keep],
        "queue": queue[keep], "state": raw["state"].to_numpy()[keep].tolist(),
        "attempts": [a for a, k in zip(_attempts(start, end, path), keep, strict=True) if k],
        "fail_time": fail[keep], "user": raw["user"].to_numpy()[keep].tolist(),
        "vc": [None] * int(keep.sum()),
        "type": raw["type"].to_numpy()[keep].tolist(),
    }
    t0 = None
    if keep.any():  # the earliest kept submit, as written in the file (keeps its UTC offset)
        first = int(np.argmin(submit[keep]))
        t0 = pd.Timestamp(raw["submit_time"].to_numpy()[keep][first]).isoformat()
    df = build_job_table(columns, path, t0)
    df.attrs["cluster"] = cluster
    return df
