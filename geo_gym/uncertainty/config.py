"""All uncertainty knobs in one validated record, with named presets.

Gathers the SchedMate-derived components: duration predictor (section 3.1), job fates
(section 1, C2), infrastructure failures and checkpoints (section 2.1, C3), the Failure
Handler (section 3.3, Table 4) and the Metric Tracker (section 3.2, section 5.4).

The default is the perfect world most scheduling papers assume (BACE-Pipe's included): the
oracle predictor, no failures, a tracker that sees every job exactly, and no early ends drawn
here. Fates that are part of a workload still apply (trace jobs' final states, the
``recurring`` scenario's templates); the oracle sees them.
Presets:

- ``perfect``: the default.
- ``realistic``: a non-semantic scheduler in a production cluster: user estimates, 45 % early
  ends (for jobs without fates of their own), Llama 3 failure rate, no failure handler (every failure waits the manual delay),
  no progress tracking.
- ``schedmate``: the same world seen through SchedMate: the ``schedmate`` retrieval
  predictor, the Failure Handler on (Table 4 operating point), the Metric Tracker at 0.843 /
  RMSRE 0.42.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from geo_gym.uncertainty import failures, tracker, workload
from geo_gym.uncertainty import handler as fh  # the field `handler` is the on/off switch
from geo_gym.uncertainty.predictors import PREDICTORS, DurationPredictor, make_predictor


@dataclass(frozen=True)
class UncertaintyConfig:
    predictor: str = "oracle"
    predictor_kwargs: dict[str, Any] = field(default_factory=dict, hash=False)
    # Share of jobs without a fate of their own that end early. Trace jobs and the recurring
    # scenario's jobs carry theirs (JobSpec.fate_fraction) and are not drawn again.
    early_end_rate: float = 0.0
    # Share of early ends of no given kind that are application failures (the rest are
    # cancellations). Trace jobs carry their kind (JobSpec.end_kind). Only the failure
    # handler reads it: it may misjudge an application failure as infrastructure and restart
    # it; a cancellation never reaches it.
    application_failure_share: float = workload.DEFAULT_APPLICATION_FAILURE_SHARE
    failure_rate_per_gpu_hour: float = 0.0
    checkpoint_interval_hours: float = 1.0  # of execution; <= 0 continuous, inf never
    repair_median_hours: float = failures.DEFAULT_REPAIR_MEDIAN_HOURS
    repair_sigma: float = failures.DEFAULT_REPAIR_SIGMA
    # GPUs a failure takes out of the region for the repair time (capped by the core at the
    # attempt's GPUs there). One GPU: most Llama 3 interruptions are single-GPU faults.
    gpus_per_failure: int = 1
    handler: bool = False
    # Precision fixes the FPR on application failures (handler.operating_point): the share of
    # them the handler judges infrastructure and restarts, in vain (they fail again at the same
    # point); recall (the TPR) is the share of infrastructure failures it restarts at once.
    handler_precision: float = fh.TABLE4_PRECISION
    handler_recall: float = fh.TABLE4_RECALL
    handler_base_rate: float = fh.TABLE4_BASE_RATE
    diagnosis_delay_hours: float = fh.DEFAULT_DIAGNOSIS_DELAY_HOURS
    manual_delay_hours: float = fh.DEFAULT_MANUAL_DELAY_HOURS
    tracker_detect_prob: float = 1.0
    tracker_rmsre: float = 0.0
    # Pre-drawn failures per job: a job fails at most this many times, and its later attempts
    # run failure-free (the failure process is cut short there, not the job). Also the most
    # attempts of an application failure the handler keeps restarting: the last one ends it.
    max_attempts: int = 16

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"UncertaintyConfig.{name}: {why}, got {getattr(self, name)!r}")

        if self.predictor not in PREDICTORS:
            raise bad("predictor", f"must be one of {', '.join(PREDICTORS)}")
        if not isinstance(self.predictor_kwargs, dict):
            raise bad("predictor_kwargs", "must be a dict")
        try:
            make_predictor(self.predictor, **self.predictor_kwargs)
        except ValueError as e:
            raise ValueError(f"UncertaintyConfig.predictor_kwargs: {e}") from None
        for name in ("early_end_rate", "application_failure_share", "tracker_detect_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise bad(name, "must be in [0, 1]")
        for name in (
            "failure_rate_per_gpu_hour", "repair_median_hours", "repair_sigma",
            "diagnosis_delay_hours", "manual_delay_hours", "tracker_rmsre",
        ):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise bad(name, "must be a finite number >= 0")
        if math.isnan(self.checkpoint_interval_hours):
            raise bad("checkpoint_interval_hours", "must be a number (<= 0 continuous, inf never)")
        for name in ("gpus_per_failure", "max_attempts"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise bad(name, "must be an integer >= 1")
        if not isinstance(self.handler, bool):
            raise bad("handler", "must be True or False")
        for name in ("handler_precision", "handler_recall"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise bad(name, "must be in (0, 1]")
        if not 0.0 < self.handler_base_rate < 1.0:
            raise bad("handler_base_rate", "must be in (0, 1)")
        try:
            self.handler_operating_point()
        except ValueError as e:
            raise ValueError(f"UncertaintyConfig.handler_precision: {e}") from None

    # -- derived values the core needs -------------------------------------------------
    def handler_operating_point(self) -> tuple[float, float]:
        """(TPR, FPR) of the failure classifier (see handler.operating_point)."""
        return fh.operating_point(
            self.handler_precision, self.handler_recall, self.handler_base_rate
        )

    def tracker_sigma(self) -> float:
        return tracker.sigma_for_rmsre(self.tracker_rmsre)

    def make_predictor(self) -> DurationPredictor:
        return make_predictor(self.predictor, **self.predictor_kwargs)

    def replace(self, **changes: Any) -> UncertaintyConfig:
        return replace(self, **changes)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> UncertaintyConfig:
        """``perfect``, ``realistic`` or ``schedmate``; keyword overrides win."""
        if name not in PRESETS:
            raise ValueError(f"unknown uncertainty preset {name!r}; choose one of: "
                             f"{', '.join(PRESETS)}")
        known = {f.name for f in fields(cls)}
        for k in overrides:
            if k not in known:
                raise ValueError(f"UncertaintyConfig has no field {k!r}")
        return cls(**{**PRESETS[name], **overrides})


_REALISTIC: dict[str, Any] = dict(
    predictor="user-estimate",
    early_end_rate=workload.DEFAULT_EARLY_END_RATE,
    failure_rate_per_gpu_hour=failures.LLAMA3_RATE_PER_GPU_HOUR,
    handler=False,
    tracker_detect_prob=0.0,
)
PRESETS: dict[str, dict[str, Any]] = {
    "perfect": {},
    "realistic": _REALISTIC,
    "schedmate": {
        **_REALISTIC,
        "predictor": "schedmate",
        "handler": True,
        "tracker_detect_prob": tracker.DEFAULT_DETECT_PROB,
        "tracker_rmsre": tracker.DEFAULT_RMSRE,
    },
}
