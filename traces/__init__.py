"""Public GPU-cluster job traces (Philly, Acme) as one common job table, plus calibrated
synthetic generators. See :mod:`traces.schema` for the table."""

from .acme import read_acme
from .philly import (
    read_marwage_jobs,
    read_philly_job_log,
    read_philly_rfold,
    read_philly_titansched,
)
from .readers import READERS, read_trace
from .schema import COLUMNS, STATES, TraceFormatError, validate_job_table

__all__ = [
    "COLUMNS",
    "READERS",
    "STATES",
    "TraceFormatError",
    "read_acme",
    "read_marwage_jobs",
    "read_philly_job_log",
    "read_philly_rfold",
    "read_philly_titansched",
    "read_trace",
    "validate_job_table",
]
