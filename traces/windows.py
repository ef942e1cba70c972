"""A trace cut into windows for training and held-out evaluation (scripts/train_ppo.py --trace).

The trace's clock runs from its first job (day 0) to its last submission. Windows of
``window_days`` start at day 0 and follow each other. Those that end by ``train_fraction`` of
the span are the training windows; the later ones, which training never sees, alternate
between validation (the best fixed policy is chosen on them, and the curve during training is
drawn on them) and test (the final table): validation, test, validation, ... Each window is
mapped on its own (``traces.mapping.map_trace``: its cluster scaled to the target load, its
first ``max_jobs`` jobs); a window with no job left to map is skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from geo_gym.scenarios import Scenario
from traces.mapping import map_trace

DAY = 86_400.0


@dataclass
class WindowSplit:
    """Mapped windows by use, each list in time order, with what was skipped."""

    train: list[Scenario] = field(default_factory=list)
    validation: list[Scenario] = field(default_factory=list)
    test: list[Scenario] = field(default_factory=list)
    starts_days: dict[str, list[float]] = field(default_factory=lambda: {"train": [], "validation": [], "test": []})
    empty: int = 0
    span_days: float = 0.0

    def describe(self) -> str:
        def days(kind: str) -> str:
            s = self.starts_days[kind]
            return f"{len(s)} {kind}" + (f" (days {s[0]:g}-{s[-1]:g})" if s else "")

        return (f"{days('train')}, {days('validation')}, {days('test')} windows of a {self.span_days:.1f}-day trace"
                f"; {self.empty} without a job to map skipped")


def split_windows(table: pd.DataFrame, window_days: float, train_fraction: float, max_jobs: int | None = None,
                  **mapping) -> WindowSplit:
    """``table`` (``traces.read_trace``'s job table) in mapped windows (module docstring);
    ``mapping``: further ``MappingOptions`` fields (sample, target_load, start_rule, ...)."""
    if not window_days > 0:
        raise ValueError(f"window_days must be > 0, got {window_days!r}")
    if not 0 < train_fraction < 1:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    span = float(table["submit"].max()) / DAY
    out = WindowSplit(span_days=span)
    later = 0
    start = 0.0
    while start <= span:
        try:
            scenario = map_trace(table, start=start * DAY, length=window_days * DAY, max_jobs=max_jobs, **mapping).scenario
        except ValueError as err:
            if "no job left to map" not in str(err):
                raise
            out.empty += 1
        else:
            if start + window_days <= train_fraction * span:
                kind = "train"
            else:
                kind = ("validation", "test")[later % 2]
                later += 1
            getattr(out, kind).append(scenario)
            out.starts_days[kind].append(start)
        start += window_days
    for kind in ("train", "validation", "test"):
        if not getattr(out, kind):
            raise ValueError(f"{table.attrs.get('source', '<job table>')}: no {kind} window with a job "
                             f"(window_days={window_days}, train_fraction={train_fraction}, span {span:.2f} days)")
    return out
