"""Small file helpers shared by the readers: transparent gzip, JSON and CSV loading with errors
that name the file (and, for CSV, the column)."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .schema import TraceFormatError


def open_text(path: str | Path) -> io.TextIOBase:
    """Open ``path`` for reading text; ``.gz`` files (by magic bytes, not by name) are gunzipped."""
    path = Path(path)
    with path.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def load_json(path: str | Path) -> Any:
    """Parse a (possibly gzipped) JSON file; bad JSON becomes a TraceFormatError naming the line."""
    try:
        with open_text(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"- (line {exc.lineno}, char {exc.colno})", "-",
                               f"invalid JSON: {exc.msg}") from exc
    except (UnicodeDecodeError, EOFError, OSError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise TraceFormatError(path, "-", "-", f"unreadable JSON file: {exc}") from exc


def load_csv(path: str | Path, **kwargs: Any) -> pd.DataFrame:
    """Read a CSV with every column as text (``dtype=str``), so that each reader decides how to
    parse and can report the exact offending row; empty cells become NaN."""
    try:
        with open_text(path) as fh:
            return pd.read_csv(fh, dtype=str, keep_default_na=False, na_values=[""], **kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise TraceFormatError(path, "-", "-", f"unreadable CSV: {exc}") from exc
    except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt gzip
        if isinstance(exc, FileNotFoundError):
            raise
        raise TraceFormatError(path, "-", "-", f"unreadable file (corrupt or truncated gzip?): {exc}") from exc


def require_columns(df: pd.DataFrame, columns: tuple[str, ...] | list[str], path: Any) -> None:
    for col in columns:
        if col not in df.columns:
            raise TraceFormatError(path, "header", col,
                                   f"missing column; header is {list(df.columns)}")


def parse_number(df: pd.DataFrame, col: str, path: Any, *, integer: bool = False,
                 allow_missing: bool = False, min_value: float | None = 0.0) -> np.ndarray:
    """Column ``col`` as floats (or int64); the first unparsable, missing or too small value
    raises a TraceFormatError naming its 0-based data row."""
    text = df[col]
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(values) & (text.notna().to_numpy() | (not allow_missing))
    _raise_first(bad, text, path, col, "missing or not a number")
    if integer:
        frac = ~np.isnan(values) & (values != np.round(values))
        _raise_first(frac, text, path, col, "not an integer")
    if min_value is not None:
        _raise_first(values < min_value, text, path, col, f"must be >= {min_value:g}")
    if integer:
        if np.isnan(values).any():
            raise TraceFormatError(path, "-", col, "integer column with missing values")
        return values.astype(np.int64)
    return values


def parse_times(df: pd.DataFrame, col: str, path: Any, *, fmt: str | None = None,
                utc: bool = False, allow_missing: bool = False) -> np.ndarray:
    """Column ``col`` as float epoch seconds (NaN for allowed missing cells). ``fmt`` None means
    ISO-8601; ``utc`` makes offsets count (tz-aware times are converted to UTC)."""
    text = df[col]
    kwargs: dict[str, Any] = {"errors": "coerce", "utc": utc, "format": fmt or "ISO8601"}
    parsed = pd.to_datetime(text, **kwargs)
    missing = parsed.isna().to_numpy()
    bad = missing & (text.notna().to_numpy() | (not allow_missing))
    _raise_first(bad, text, path, col, "unparsable or missing time")
    # Subtracting the epoch works for any datetime unit (pandas >= 2 may pick s/ms/us/ns).
    epoch = pd.Timestamp(0, tz="UTC") if parsed.dt.tz is not None else pd.Timestamp(0)
    seconds = ((parsed - epoch) / pd.Timedelta(seconds=1)).to_numpy(dtype=float, na_value=np.nan).copy()
    seconds[missing] = np.nan
    return seconds


def _raise_first(mask: np.ndarray, text: pd.Series, path: Any, col: str, why: str) -> None:
    idx = np.flatnonzero(mask)
    if idx.size:
        row = int(idx[0])
        raise TraceFormatError(path, row, col, f"{why}, got {text.iloc[row]!r}")
