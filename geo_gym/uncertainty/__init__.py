"""SchedMate-style uncertainty for geo_gym: duration predictors, job fates, infrastructure
failures with checkpoints, the Failure Handler and the Metric Tracker.

Array kernels (numba, shared with the simulator core): ``predictors.retrieval_estimate``,
``predictors.retrieval_predict``, ``predictors.store_append``, ``predictors.noisy_durations``,
``failures.time_to_failure``, ``failures.checkpoint_rollback``, ``failures.repair_hours``,
``handler.handle_failure``, ``tracker.observe_progress``. Random numbers for an episode, and
the core columns each source fills: ``draws.SOURCES``, ``draws.draw_episode``. Knobs: ``config.UncertaintyConfig``.
"""

from geo_gym.uncertainty.config import PRESETS, UncertaintyConfig
from geo_gym.uncertainty.draws import SOURCES, DrawnColumns, draw_episode
from geo_gym.uncertainty.metadata import (
    FIELDS,
    SPARSE_FIELDS,
    HashingVectorizer,
    JobMetadata,
    Vectorizer,
    vectorize,
)
from geo_gym.uncertainty.predictors import (
    PREDICTORS,
    DurationPredictor,
    HistoryStore,
    RetrievalPredictor,
    error_cdf,
    make_predictor,
)
from geo_gym.uncertainty.workload import RecurringWorkload, recurring_jobs

__all__ = [
    "FIELDS", "PREDICTORS", "PRESETS", "SPARSE_FIELDS", "SOURCES", "DrawnColumns", "DurationPredictor",
    "HashingVectorizer", "HistoryStore", "JobMetadata", "RecurringWorkload",
    "RetrievalPredictor", "UncertaintyConfig", "Vectorizer", "draw_episode", "error_cdf",
    "make_predictor", "recurring_jobs", "vectorize",
]
