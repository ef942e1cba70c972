"""Readers for Microsoft Philly (ATC'19) job traces, all returning the common job table of
:mod:`traces.schema`.

Four formats are supported (see /work/shared/traces/README.md for origins):

``read_philly_job_log`` -- raw ``cluster_job_log`` JSON (optionally gzipped): a list of
    ``{status, vc, jobid, attempts: [{start_time, end_time, detail: [{ip, gpus: [...]}]}],
    submitted_time, user}``. Decisions:

    * Times are naive ``"YYYY-mm-dd HH:MM:SS"`` strings (cluster-local wall clock, time zone not
      published). They are treated as-is, so ``t0`` has no offset. ``None`` *and the literal
      string* ``"None"`` (which the real log uses for some end times) both mean "not recorded".
    * ``gpus`` is the **maximum over attempts** of the number of distinct ``(ip, gpu)`` pairs in
      an attempt's ``detail``: a retry may be placed differently, and the largest placement is the
      job's real demand. (In the 1-day subset all attempts of a job have the same count.)
      ``gpus_per_node`` is that attempt's GPUs divided by its distinct machines.
      A job that never started has no placement: ``gpus = 0``, ``gpus_per_node = NaN``.
    * ``duration`` is the sum of ``end - start`` over attempts; if any attempt has no end time
      (still running, or an end missing from the log) the run time is unknown and ``duration`` is
      NaN, while the attempt is kept with ``end = NaN``.
    * ``queue`` is first attempt start minus submit (NaN without attempts).
    * ``state``: Pass -> COMPLETED, Killed -> CANCELLED, Failed -> FAILED, Running -> RUNNING;
      anything else is an error.
    * ``fail_time`` is the end of the last attempt of a FAILED job (the log has no separate
      failure time); NaN otherwise. Earlier attempts of a retried job also ended in failures, but
      the table keeps one time per job, the terminal one.
    * An attempt without a start time, or ending before it starts, is an error: nothing is
      dropped silently.

``read_philly_rfold`` -- RFold's ``philly_trace.csv``: ``#job id, arrival time (sec), topology,
    shape, size, duration (sec)``. ``gpus = size``; ``shape`` like ``8+8`` lists GPUs per machine,
    so ``gpus_per_node = size / machines`` and the parts must add up to ``size``. No states,
    attempts, queue, users or absolute times: ``state = UNKNOWN``, ``attempts = ()``, ``t0 = None``.

``read_philly_titansched`` -- TitanSched's ``philly.csv``: ``timestamp, duration, num_gpus,
    gpu_time, cluster``. The file is not sorted and has no job id, so ``job_id`` is the 0-based
    data row in the file (as a string) and rows are then sorted by submit (stable); error messages
    use the file row. ``vc = cluster``; ``gpu_time`` must equal ``duration * num_gpus``.

``read_marwage_jobs`` -- marwage/philly-traces ``analysis/jobs.json``: ``{id, num_gpus, runtime
    (minutes), attempts: [{start_time, end_time}], submitted_time}``. That file only holds Pass
    jobs, so ``state = COMPLETED``. Its ``runtime`` is *last end minus first start* (checked on the
    real file: equal for all 3,034 jobs), so ``duration`` is recomputed as the sum of attempt run
    times to match the common schema; ``runtime`` is used only when a job has no attempts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._io import load_csv, load_json, parse_number, parse_times, require_columns
from .schema import TraceFormatError, build_job_table

PHILLY_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
PHILLY_STATUS_TO_STATE = {
    "Pass": "COMPLETED",
    "Killed": "CANCELLED",
    "Failed": "FAILED",
    "Running": "RUNNING",
}
_NAN = float("nan")


# --------------------------------------------------------------------------- time helpers
def _philly_seconds(value: Any, path: Any, row: str, column: str, optional: bool) -> float:
    """Naive Philly time string -> seconds on a naive clock (treated as UTC for arithmetic only)."""
    if value is None or value == "None":
        if optional:
            return _NAN
        raise TraceFormatError(path, row, column, "missing time")
    if not isinstance(value, str):
        raise TraceFormatError(path, row, column, f"time must be a string, got {value!r}")
    try:
        parsed = datetime.strptime(value, PHILLY_TIME_FORMAT)
    except ValueError as exc:
        raise TraceFormatError(path, row, column, f"unparsable time {value!r}") from exc
    return parsed.replace(tzinfo=UTC).timestamp()


def _naive_iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None).isoformat(sep=" ")


def _empty_columns() -> dict[str, list[Any]]:
    return {c: [] for c in ("job_id", "submit", "gpus", "gpus_per_node", "duration", "queue",
                            "state", "attempts", "fail_time", "user", "vc", "type")}


def _t0(submits: list[float] | np.ndarray) -> str | None:
    return _naive_iso(float(np.min(submits))) if len(submits) else None


# --------------------------------------------------------------------------- raw job log
def _field(job: dict, key: str, path: Any, row: str) -> Any:
    if key not in job:
        raise TraceFormatError(path, row, key, f"missing field; job has {sorted(job)}")
    return job[key]


def _placement(attempt: dict, path: Any, row: str, column: str) -> tuple[int, int]:
    """(distinct GPUs, distinct machines) of one attempt's ``detail``."""
    detail = attempt.get("detail", [])
    if not isinstance(detail, list):
        raise TraceFormatError(path, row, f"{column}.detail", f"must be a list, got {detail!r}")
    gpus, machines = set(), set()
    for node in detail:
        if not isinstance(node, dict) or not isinstance(node.get("gpus", []), list):
            raise TraceFormatError(path, row, f"{column}.detail",
                                   f"each entry must be {{ip, gpus: [...]}}, got {node!r}")
        machines.add(node.get("ip"))
        gpus.update((node.get("ip"), g) for g in node.get("gpus", []))
    return len(gpus), len(machines)


def _attempt_times(attempt: Any, path: Any, row: str, column: str) -> tuple[float, float]:
    if not isinstance(attempt, dict):
        raise TraceFormatError(path, row, column, f"attempt must be an object, got {attempt!r}")
    start = _philly_seconds(attempt.get("start_time"), path, row, f"{column}.start_time", False)
    end = _philly_seconds(attempt.get("end_time"), path, row, f"{column}.end_time", True)
    if end < start:
        raise TraceFormatError(path, row, f"{column}.end_time",
                               f"attempt ends before it starts ({attempt.get('end_time')!r} < "
                               f"{attempt.get('start_time')!r})")
    return start, end


def _job_log_row(job: Any, index: int, path: Any) -> dict[str, Any]:
    row = f"{index} (jobid {job.get('jobid') if isinstance(job, dict) else '?'})"
    if not isinstance(job, dict):
        raise TraceFormatError(path, row, "-", f"job must be an object, got {job!r}")
    status = _field(job, "status", path, row)
    if status not in PHILLY_STATUS_TO_STATE:
        raise TraceFormatError(path, row, "status", f"unknown status {status!r}; expected "
                               f"{sorted(PHILLY_STATUS_TO_STATE)}")
    raw_attempts = _field(job, "attempts", path, row)
    if not isinstance(raw_attempts, list):
        raise TraceFormatError(path, row, "attempts", f"must be a list, got {raw_attempts!r}")
    submit = _philly_seconds(_field(job, "submitted_time", path, row), path, row,
                             "submitted_time", False)
    attempts = [_attempt_times(a, path, row, f"attempts[{i}]") for i, a in enumerate(raw_attempts)]
    placements = [_placement(a, path, row, f"attempts[{i}]") for i, a in enumerate(raw_attempts)]
    gpus, machines = max(placements, default=(0, 0))
    state = PHILLY_STATUS_TO_STATE[status]
    durations = [end - start for start, end in attempts]
    return {
        "job_id": _field(job, "jobid", path, row),
        "submit": submit,
        "gpus": gpus,
        "gpus_per_node": gpus / machines if machines and gpus else _NAN,
        "duration": float(sum(durations)) if attempts else _NAN,  # NaN propagates from NaN ends
        "queue": attempts[0][0] - submit if attempts else _NAN,
        "state": state,
        "attempts": attempts,
        "fail_time": attempts[-1][1] if (attempts and state == "FAILED") else _NAN,
        "user": _field(job, "user", path, row),
        "vc": _field(job, "vc", path, row),
        "type": None,
    }


def _check_queue(rows: list[dict[str, Any]], path: Any) -> None:
    for row in rows:
        if row["queue"] < 0:
            raise TraceFormatError(path, f"jobid {row['job_id']}", "attempts[0].start_time",
                                   "first attempt starts before the job was submitted")


def read_philly_job_log(path: str | Path) -> pd.DataFrame:
    """Read a raw Philly ``cluster_job_log`` JSON (or .json.gz) into the common job table."""
    jobs = load_json(path)
    if not isinstance(jobs, list):
        raise TraceFormatError(path, "-", "-", f"top level must be a list of jobs, got "
                               f"{type(jobs).__name__}")
    rows = [_job_log_row(job, i, path) for i, job in enumerate(jobs)]
    _check_queue(rows, path)
    columns = _empty_columns()
    for row in rows:
        for key, value in row.items():
            columns[key].append(value)
    return build_job_table(columns, path, _t0(columns["submit"]))


# --------------------------------------------------------------------------- RFold CSV
RFOLD_COLUMNS = ("#job id", "arrival time (sec)", "topology", "shape", "size", "duration (sec)")


def _rfold_machines(shape: pd.Series, size: np.ndarray, path: Any) -> np.ndarray:
    """Machines per job from ``shape`` (``"8+8"`` -> 2); the parts must sum to ``size``."""
    machines = np.empty(len(shape), dtype=float)
    for row, text in enumerate(shape.to_numpy()):
        try:
            parts = [int(p) for p in str(text).split("+")]
        except ValueError as exc:
            raise TraceFormatError(path, row, "shape", f"expected GPUs per machine like "
                                   f"'8+8', got {text!r}") from exc
        if sum(parts) != size[row] or min(parts) <= 0:
            raise TraceFormatError(path, row, "shape", f"{text!r} does not add up to size "
                                   f"{size[row]}")
        machines[row] = len(parts)
    return machines


def read_philly_rfold(path: str | Path) -> pd.DataFrame:
    """Read RFold's Philly CSV (header starting with ``#job id``) into the common job table."""
    raw = load_csv(path)
    raw.columns = [c.strip() for c in raw.columns]
    require_columns(raw, RFOLD_COLUMNS, path)
    size = parse_number(raw, "size", path, integer=True, min_value=1)
    arrival = parse_number(raw, "arrival time (sec)", path)
    duration = parse_number(raw, "duration (sec)", path)
    machines = _rfold_machines(raw["shape"], size, path)
    n = len(raw)
    columns = {
        "job_id": raw["#job id"].fillna("").to_list(),
        "submit": arrival, "gpus": size, "gpus_per_node": size / machines,
        "duration": duration, "queue": np.full(n, _NAN), "state": ["UNKNOWN"] * n,
        "attempts": [()] * n, "fail_time": np.full(n, _NAN),
        "user": [None] * n, "vc": [None] * n, "type": [None] * n,
    }
    return build_job_table(columns, path, None)


# --------------------------------------------------------------------------- TitanSched CSV
TITANSCHED_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")


def read_philly_titansched(path: str | Path) -> pd.DataFrame:
    """Read TitanSched's Philly CSV into the common job table, sorted by submit."""
    raw = load_csv(path)
    require_columns(raw, TITANSCHED_COLUMNS, path)
    submit = parse_times(raw, "timestamp", path, fmt=PHILLY_TIME_FORMAT)
    duration = parse_number(raw, "duration", path)
    gpus = parse_number(raw, "num_gpus", path, integer=True, min_value=1)
    gpu_time = parse_number(raw, "gpu_time", path)
    mismatch = np.flatnonzero(~np.isclose(gpu_time, duration * gpus, rtol=1e-6, atol=1e-3))
    if mismatch.size:
        row = int(mismatch[0])
        raise TraceFormatError(path, row, "gpu_time", f"{gpu_time[row]!r} != duration * num_gpus")
    cluster = raw["cluster"]
    if cluster.isna().any():
        raise TraceFormatError(path, int(np.flatnonzero(cluster.isna())[0]), "cluster", "missing")
    order = np.argsort(submit, kind="stable")  # stable: equal timestamps keep file order
    n = len(raw)
    columns = {
        "job_id": [str(i) for i in order], "submit": submit[order], "gpus": gpus[order],
        "gpus_per_node": np.full(n, _NAN), "duration": duration[order],
        "queue": np.full(n, _NAN), "state": ["UNKNOWN"] * n, "attempts": [()] * n,
        "fail_time": np.full(n, _NAN), "user": [None] * n,
        "vc": cluster.to_numpy()[order].tolist(), "type": [None] * n,
    }
    return build_job_table(columns, path, _t0(submit))


# --------------------------------------------------------------------------- marwage jobs.json
def _marwage_row(job: Any, index: int, path: Any) -> dict[str, Any]:
    row = f"{index} (id {job.get('id') if isinstance(job, dict) else '?'})"
    if not isinstance(job, dict):
        raise TraceFormatError(path, row, "-", f"job must be an object, got {job!r}")
    gpus = _field(job, "num_gpus", path, row)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise TraceFormatError(path, row, "num_gpus", f"must be an integer >= 1, got {gpus!r}")
    runtime = _field(job, "runtime", path, row)
    if isinstance(runtime, bool) or not isinstance(runtime, int | float) or not runtime >= 0:
        raise TraceFormatError(path, row, "runtime", f"must be minutes >= 0, got {runtime!r}")
    raw_attempts = _field(job, "attempts", path, row)
    if not isinstance(raw_attempts, list):
        raise TraceFormatError(path, row, "attempts", f"must be a list, got {raw_attempts!r}")
    submit = _philly_seconds(_field(job, "submitted_time", path, row), path, row,
                             "submitted_time", False)
    attempts = [_attempt_times(a, path, row, f"attempts[{i}]") for i, a in enumerate(raw_attempts)]
    duration = sum(e - s for s, e in attempts) if attempts else 60.0 * runtime
    return {
        "job_id": _field(job, "id", path, row), "submit": submit, "gpus": gpus,
        "gpus_per_node": _NAN, "duration": float(duration),
        "queue": attempts[0][0] - submit if attempts else _NAN, "state": "COMPLETED",
        "attempts": attempts, "fail_time": _NAN, "user": None, "vc": None, "type": None,
    }


def read_marwage_jobs(path: str | Path) -> pd.DataFrame:
    """Read marwage/philly-traces ``jobs.json`` (or .json.gz) into the common job table."""
    jobs = load_json(path)
    if not isinstance(jobs, list):
        raise TraceFormatError(path, "-", "-", "top level must be a list of jobs")
    rows = [_marwage_row(job, i, path) for i, job in enumerate(jobs)]
    _check_queue(rows, path)
    columns = _empty_columns()
    for row in rows:
        for key, value in row.items():
            columns[key].append(value)
    return build_job_table(columns, path, _t0(columns["submit"]))
