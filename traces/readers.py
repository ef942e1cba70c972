"""``read_trace``: one entry point that dispatches to the format-specific readers.

``kind`` names the format explicitly; ``kind=None`` guesses from the file name (the names used in
/work/shared/traces and by :mod:`traces.synthetic`), and raises listing the kinds when it cannot.
Guessing by name, not by content, keeps the rule predictable.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .acme import read_acme
from .philly import (
    read_marwage_jobs,
    read_philly_job_log,
    read_philly_rfold,
    read_philly_titansched,
)

READERS: dict[str, Callable[..., pd.DataFrame]] = {
    "philly_job_log": read_philly_job_log,
    "philly_rfold": read_philly_rfold,
    "philly_titansched": read_philly_titansched,
    "marwage": read_marwage_jobs,
    "acme": read_acme,
    "acme_seren": lambda path, **kw: read_acme(path, cluster="seren", **kw),
    "acme_kalos": lambda path, **kw: read_acme(path, cluster="kalos", **kw),
}

# (substring of the lower-cased file name, kind); first match wins, so specific names go first.
_NAME_HINTS: tuple[tuple[str, str], ...] = (
    ("marwage", "marwage"),
    ("jobs.json", "marwage"),
    ("cluster_job_log", "philly_job_log"),
    ("philly_job_log", "philly_job_log"),
    ("rfold", "philly_rfold"),
    ("titansched", "philly_titansched"),
    ("seren", "acme_seren"),
    ("kalos", "acme_kalos"),
    ("acme", "acme"),
)


def guess_kind(path: str | Path) -> str | None:
    name = Path(path).name.lower()
    return next((kind for hint, kind in _NAME_HINTS if hint in name), None)


def read_trace(path: str | Path, kind: str | None = None, **kwargs) -> pd.DataFrame:
    """Read any supported trace into the common job table (see :mod:`traces.schema`)."""
    chosen = kind if kind is not None else guess_kind(path)
    if chosen not in READERS:
        what = f"unknown trace kind {kind!r}" if kind is not None else "cannot guess the trace kind"
        raise ValueError(f"{path}: {what}; pass kind= one of {sorted(READERS)}")
    return READERS[chosen](path, **kwargs)
