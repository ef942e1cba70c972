"""The common job table that every trace reader in :mod:`traces` returns.

One row per job, a :class:`pandas.DataFrame` with exactly these columns, in this order:

============== ========= ======================================================================
column         dtype     meaning
============== ========= ======================================================================
job_id         object    job identifier as a string (the trace's own id; a row number where the
                         trace has none, see the reader)
submit         float64   seconds since the first submit in the table (so ``min(submit) == 0``)
gpus           int64     GPUs requested; ``0`` for CPU-only jobs (Acme) and for Philly jobs that
                         never started (the raw log only records GPUs of attempts)
gpus_per_node  float64   GPUs per machine (``gpus / machines``), NaN if unknown
duration       float64   run time in seconds; for multi-attempt jobs the *sum* of the attempt
                         run times (gaps between attempts excluded); NaN if unknown (e.g. an
                         attempt without an end time)
queue          float64   seconds from submit to the first start, NaN if unknown / never started
state          object    one of :data:`STATES`
attempts       object    tuple of ``(start, end)`` float pairs on the ``submit`` clock; ``end``
                         is NaN for an attempt without an end time (still running, or not
                         recorded); ``()`` when the trace has no per-attempt times
num_attempts   int64     ``len(attempts)``; ``0`` therefore means "not recorded", not "zero runs"
fail_time      float64   time of failure on the ``submit`` clock, NaN if none / unknown
user           object    user id string or None
vc             object    virtual cluster / partition string or None
type           object    job type string (Acme: Pretrain, SFT, Eval, ...) or None
============== ========= ======================================================================

Table metadata lives in ``df.attrs``:

* ``attrs["source"]``: where the table came from (normally the file path); error messages use it.
* ``attrs["t0"]``: absolute time of ``submit == 0`` as an ISO-8601 string, or None when the trace
  only has relative times (RFold). Philly times are naive local wall-clock times in the raw
  files, so their ``t0`` has no offset; Acme ``t0`` keeps the UTC offset of the trace.

Why relative seconds: the simulator only needs one consistent clock, and floats make arithmetic
on attempts cheap. Why a tuple of pairs for attempts: it is hashable and immutable, so rows can be
compared and cached safely.

:func:`validate_job_table` checks all of this and raises :class:`ValueError` naming the source,
the row and the column. :class:`TraceFormatError` is the ``ValueError`` subclass that readers
raise for malformed input; its message is always ``"<file>: row <row>, column '<col>': <why>"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit",
    "gpus",
    "gpus_per_node",
    "duration",
    "queue",
    "state",
    "attempts",
    "num_attempts",
    "fail_time",
    "user",
    "vc",
    "type",
)

STATES: tuple[str, ...] = (
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "RUNNING",
    "UNKNOWN",
)

_FLOAT_COLUMNS = ("submit", "gpus_per_node", "duration", "queue", "fail_time")
_INT_COLUMNS = ("gpus", "num_attempts")
_OPTIONAL_STR_COLUMNS = ("user", "vc", "type")


class TraceFormatError(ValueError):
    """Malformed trace input; the message names the file, the row and the column."""

    def __init__(self, source: Any, row: Any, column: str, why: str) -> None:
        self.source = str(source)
        self.row = row
        self.column = column
        super().__init__(f"{source}: row {row}, column {column!r}: {why}")


def _is_missing(value: Any) -> bool:
    """True for None, NaN and pandas NA (what a CSV/JSON round trip may produce)."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def build_job_table(
    rows: Mapping[str, Iterable[Any]],
    source: Any,
    t0: str | None,
    absolute_submit: bool = True,
) -> pd.DataFrame:
    """Assemble the common table from column arrays and validate it.

    ``rows`` holds the columns of :data:`COLUMNS` except ``num_attempts`` (derived from attempts). With ``absolute_submit`` the times (submit,
    attempts, fail_time) are on any clock and are shifted so that the first submit is 0; readers
    pass absolute epoch seconds and the matching ``t0`` string of the earliest submit.
    """
    missing = [c for c in COLUMNS if c not in rows and c != "num_attempts"]
    if missing:
        raise ValueError(f"{source}: build_job_table lacks columns {missing}")
    submit = np.asarray(rows["submit"], dtype=float)
    shift = float(submit.min()) if (absolute_submit and submit.size) else 0.0
    attempts = [
        tuple((float(s) - shift, float(e) - shift) for s, e in job) for job in rows["attempts"]
    ]
    data = {
        "job_id": pd.Series([str(x) for x in rows["job_id"]], dtype=object),
        "submit": submit - shift,
        "gpus": np.asarray(rows["gpus"], dtype=np.int64),
        "gpus_per_node": np.asarray(rows["gpus_per_node"], dtype=float),
        "duration": np.asarray(rows["duration"], dtype=float),
        "queue": np.asarray(rows["queue"], dtype=float),
        "state": pd.Series(list(rows["state"]), dtype=object),
        "attempts": pd.Series(attempts, dtype=object),
        "num_attempts": np.array([len(a) for a in attempts], dtype=np.int64),
        "fail_time": np.asarray(rows["fail_time"], dtype=float) - shift,
    }
    for col in _OPTIONAL_STR_COLUMNS:
        # object dtype on purpose: pandas >= 3 would turn None into NaN in a "str" column.
        data[col] = pd.Series([None if _is_missing(v) else str(v) for v in rows[col]], dtype=object)
    df = pd.DataFrame(data)
    df.attrs["source"] = str(source)
    df.attrs["t0"] = t0
    validate_job_table(df, source)
    return df


def _bad(source: Any, row: Any, column: str, why: str) -> ValueError:
    return TraceFormatError(source, row, column, why)


def _first_bad(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def _check_columns(df: pd.DataFrame, source: Any) -> None:
    if tuple(df.columns) != COLUMNS:
        missing = [c for c in COLUMNS if c not in df.columns]
        extra = [c for c in df.columns if c not in COLUMNS]
        column = missing[0] if missing else (extra[0] if extra else "columns")
        raise _bad(source, "-", column, f"expected columns {list(COLUMNS)}; missing {missing}, "
                   f"extra {extra}, got order {list(df.columns)}")


def _check_numeric(df: pd.DataFrame, source: Any) -> None:
    for col in _FLOAT_COLUMNS:
        if not pd.api.types.is_float_dtype(df[col]):
            raise _bad(source, "-", col, f"dtype must be float64, got {df[col].dtype}")
    for col in _INT_COLUMNS:
        if not pd.api.types.is_integer_dtype(df[col]):
            raise _bad(source, "-", col, f"dtype must be int64, got {df[col].dtype}")
    submit = df["submit"].to_numpy()
    checks = [
        ("submit", ~np.isfinite(submit) | (submit < 0), "must be finite and >= 0"),
        ("gpus", df["gpus"].to_numpy() < 0, "must be >= 0"),
        ("gpus_per_node", df["gpus_per_node"].to_numpy() <= 0, "must be > 0 or NaN"),
        ("duration", df["duration"].to_numpy() < 0, "must be >= 0 or NaN"),
        ("queue", df["queue"].to_numpy() < 0, "must be >= 0 or NaN"),
    ]
    for col, mask, why in checks:
        row = _first_bad(mask)
        if row is not None:
            raise _bad(source, row, col, f"{why}, got {df[col].iloc[row]!r}")
    if len(df) and submit.min() != 0:
        raise _bad(source, int(np.argmin(submit)), "submit",
                   f"the first submit must be 0 (relative clock), got {submit.min()!r}")


def _first(mask: np.ndarray) -> int | None:
    """The first True row of ``mask``, None if there is none."""
    return int(np.argmax(mask)) if mask.any() else None


def _types(values: np.ndarray) -> set[type]:
    """The exact types in an object array: one pass in C, so that a column whose values are all
    of the expected types needs no Python loop (the loops find the first bad row otherwise)."""
    return set(map(type, values))


def _check_strings(df: pd.DataFrame, source: Any) -> None:
    # A string column (pandas' str dtype) holds strings and NaN only: its checks are
    # vectorised; an object column is checked value by value (a table of millions of jobs
    # is checked in well under a second either way).
    ids = df["job_id"]
    if isinstance(ids.dtype, pd.StringDtype):
        row = _first(ids.isna().to_numpy() | (ids.str.len() == 0).to_numpy(dtype=bool, na_value=True))
    else:
        row = next((r for r, v in enumerate(ids.to_numpy(dtype=object)) if not isinstance(v, str) or not v), None)
    if row is not None:
        value = ids.iloc[row]
        raise _bad(source, row, "job_id", f"must be a non-empty string, got {value!r}")
    dup = df["job_id"].duplicated().to_numpy()
    if dup.any():  # two jobs under one id: a concatenated or corrupt file, not two runs
        row = int(np.argmax(dup))
        job_id = df["job_id"].iloc[row]
        first = int(np.argmax((df["job_id"] == job_id).to_numpy()))
        raise _bad(source, row, "job_id", f"repeats an earlier job's id {job_id!r} (first at row {first})")
    row = _first(~df["state"].isin(STATES).to_numpy())
    if row is not None:
        value = df["state"].iloc[row]
        raise _bad(source, row, "state", f"must be one of {list(STATES)}, got {value!r}")
    for col in _OPTIONAL_STR_COLUMNS:
        if isinstance(df[col].dtype, pd.StringDtype):  # NaN is neither a string nor None
            row = _first(df[col].isna().to_numpy())
        else:
            values = df[col].to_numpy(dtype=object)
            row = None if _types(values) <= {str, type(None)} else next(
                (r for r, v in enumerate(values) if not (v is None or isinstance(v, str))), None)
        if row is not None:
            value = df[col].iloc[row]
            raise _bad(source, row, col, f"must be a string or None, got {value!r}")


def _check_attempts(df: pd.DataFrame, source: Any) -> None:
    counts = df["num_attempts"].to_numpy()
    column = df["attempts"].to_numpy(dtype=object)
    # only rows with attempts, or whose count or type is off, can be wrong: checked in order
    if _types(column) == {tuple}:
        sizes = np.fromiter(map(len, column), np.int64, len(column))
    else:
        sizes = np.fromiter((len(a) if type(a) is tuple else -1 for a in column), np.int64, len(column))
    for row in np.flatnonzero((sizes != 0) | (counts != 0)).tolist():
        attempts = column[row]
        if not isinstance(attempts, tuple):
            raise _bad(source, row, "attempts", f"must be a tuple, got {type(attempts).__name__}")
        if counts[row] != len(attempts):
            raise _bad(source, row, "num_attempts",
                       f"{counts[row]} != len(attempts) == {len(attempts)}")
        for pair in attempts:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise _bad(source, row, "attempts", f"each attempt must be (start, end), got {pair!r}")
            start, end = pair
            if not math.isfinite(start):
                raise _bad(source, row, "attempts", f"attempt start must be finite, got {pair!r}")
            if end < start:  # False for NaN end, which is allowed
                raise _bad(source, row, "attempts", f"attempt ends before it starts: {pair!r}")


def validate_job_table(df: pd.DataFrame, source: Any = None) -> None:
    """Raise ValueError (a :class:`TraceFormatError`) naming ``source``, row and column when
    ``df`` breaks the common schema described in this module's docstring."""
    source = source if source is not None else df.attrs.get("source", "<job table>")
    _check_columns(df, source)
    _check_numeric(df, source)
    _check_strings(df, source)
    _check_attempts(df, source)
