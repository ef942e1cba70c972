"""Public GPU-cluster job traces (Philly, Acme) as one common job table, calibrated synthetic
generators, and the mapping of trace jobs to PP LLM jobs (:mod:`traces.mapping`,
docs/traces.md), and a retrieval warm-up from the preceding window (:mod:`traces.warmup`).
See :mod:`traces.schema` for the table."""

from .acme import read_acme
from .mapping import MappedTrace, MappingOptions, map_trace, trace_scenario
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
    "MappedTrace",
    "MappingOptions",
    "STATES",
    "TraceFormatError",
    "map_trace",
    "read_acme",
    "read_marwage_jobs",
    "read_philly_job_log",
    "read_philly_rfold",
    "read_philly_titansched",
    "read_trace",
    "trace_scenario",
    "validate_job_table",
]
