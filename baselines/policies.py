"""Fixed scheduling policies: a queue-order rule x a placement rule (paper III-B and IV-A).

Each policy acts through the same call as an SB3 model, ``predict(obs) -> (actions, None)``,
reading only the observation (the window's I_j, D_j and predicted durations, alpha, and which
placement options are valid), and also exposes ``order_code`` / ``rule_code`` so that
``geo_gym.simulate`` runs it on the compiled fast path. Both paths use
``geo_gym.fixed.order_candidates`` on the same float32 features, so they decide identically.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from geo_gym import decision, fixed
from geo_gym.placement import ALL_RULE_NAMES, RULE_SETS, rule_set

# The observation layout is named in geo_gym.decision; re-exported for callers of this module.
MAX_INFERRED_REGIONS = decision.MAX_INFERRED_REGIONS
layout_from_obs_size = decision.layout_from_obs_size


class _ObsReader:
    """Column indices of one observation layout, cached per (size, num_regions, num_rules)."""

    _cache: dict[tuple, tuple] = {}

    @classmethod
    def get(cls, size: int, num_regions: int | None = None, num_rules: int = decision.NUM_RULES):
        key = (size, num_regions, num_rules)
        if key not in cls._cache:
            k, w = layout_from_obs_size(size, num_regions, num_rules)
            feats, valid, alpha = decision.slot_feature_columns(w, k, num_rules)
            present = np.array([decision.slot_index(k, s, decision.S_PRESENT, num_rules) for s in range(w)],
                               dtype=np.int64)
            gpus = np.array([decision.slot_index(k, s, decision.S_K_TARGET, num_rules) for s in range(w)],
                            dtype=np.int64)
            cls._cache[key] = (k, w, feats, valid, alpha, present, gpus)
        return cls._cache[key]


def _batch(obs) -> tuple[np.ndarray, bool]:
    obs = np.asarray(obs, dtype=np.float32)
    return (obs[None], True) if obs.ndim == 1 else (obs, False)


@dataclass
class FixedPolicy:
    """``order``: "fcfs" | "sjf" | "qssf" (Helios) | "priority" (BACE-Pipe Eq. 9-12); ``rule``: a
    ``geo_gym.placement.ALL_RULE_NAMES`` entry; ``uncertainty``: UncertaintyConfig fields the
    policy brings with it (SchedMate's predictor and failure handler are part of the
    scheduler, not of the world), applied by ``geo_gym.simulate``; ``num_regions``: the env's
    region count, needed to read observations of envs with more than
    ``MAX_INFERRED_REGIONS`` (45) regions
    (``layout_from_obs_size``); ``strict``: only the first job in the order may start (no
    backfilling past a job that cannot be placed; docs/design.md's strict-order mode);
    ``rules``: the option set of the env whose observations ``predict`` reads
    (``geo_gym.placement.rule_set``), which must hold ``rule``; None: the first named set that
    holds it ("default" for the nine rules, "levels" for the GPU-level ones)."""

    name: str
    order: str
    rule: str
    uncertainty: dict | None = None
    num_regions: int | None = None
    strict: bool = False
    rules: tuple | str | None = None
    order_code: int = field(init=False)
    rule_code: int = field(init=False)

    _ORDERS = {"fcfs": fixed.ORDER_FCFS, "sjf": fixed.ORDER_SJF, "priority": fixed.ORDER_PRIORITY, "qssf": fixed.ORDER_QSSF}

    def __post_init__(self) -> None:
        if self.order not in self._ORDERS:
            raise ValueError(f"order must be one of {sorted(self._ORDERS)}, got {self.order!r}")
        if self.rule not in ALL_RULE_NAMES:
            raise ValueError(f"rule must be one of {list(ALL_RULE_NAMES)}, got {self.rule!r}")
        self.order_code = self._ORDERS[self.order]
        self.rule_code = ALL_RULE_NAMES.index(self.rule)  # the compiled fast path's rule id
        if self.rules is None:
            self.rules = next(name for name, names in RULE_SETS.items() if self.rule in names)
        options = rule_set(self.rules)
        if self.rule not in options:
            raise ValueError(f"rule {self.rule!r} is not in the option set {list(options)} (rules=)")
        self._num_rules = len(options)
        self._option = options.index(self.rule)  # its option in the env's action space

    def _act(self, row: np.ndarray) -> int:
        r = self._num_rules
        _, w, feats, valid, alpha, present, gpus = _ObsReader.get(row.shape[0], self.num_regions, r)
        n = int((row[present] > 0).sum())
        if n:
            # the slot's k_target / MAX_STAGES_NORM (a power of two: exact in float32)
            k_target = np.rint(row[gpus[:n]].astype(np.float64) * decision.MAX_STAGES_NORM).astype(np.int64)
            order = fixed.order_candidates(
                self.order_code, row[feats[:n]], n, np.float32(row[alpha]), k_target
            )
            for s in order[:1] if self.strict else order:
                if row[valid[s, self._option]] > 0:
                    return int(s) * r + self._option
        return w * r  # nothing this policy can start: wait

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        obs, single = _batch(observation)
        actions = np.array([self._act(row) for row in obs], dtype=np.int64)
        return (actions[0] if single else actions), state

    def __repr__(self) -> str:
        strict = ", strict" if self.strict else ""
        return f"{self.name}(order={self.order}, rule={self.rule}{strict})"


class RandomPolicy:
    """Uniform over the valid actions, rebuilt from the observation: an option is valid when
    its flag is set; waiting is valid when the observation's wait flag is set. ``num_regions``
    as for ``FixedPolicy``; ``rules`` the env's option set (None: the default set's, or the
    env's own where ``geo_gym.simulate`` runs it)."""

    name = "random"

    def __init__(self, seed: int = 0, num_regions: int | None = None, rules=None):
        self.num_regions = num_regions
        self.num_rules = None if rules is None else len(rule_set(rules))
        self.reset(seed)

    def reset(self, seed: int | None = 0) -> None:
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def mask(row: np.ndarray, num_regions: int | None = None, num_rules: int | None = None) -> np.ndarray:
        num_rules = decision.NUM_RULES if num_rules is None else num_rules
        _, w, _, valid, _, _, _ = _ObsReader.get(row.shape[0], num_regions, num_rules)
        m = np.zeros(w * num_rules + 1, dtype=np.bool_)
        m[: w * num_rules] = row[valid.reshape(-1)] > 0
        m[-1] = row[decision.G_WAIT] > 0
        return m

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        obs, single = _batch(observation)
        actions = np.array(
            [self.rng.choice(np.flatnonzero(self.mask(row, self.num_regions, self.num_rules))) for row in obs],
            dtype=np.int64,
        )
        return (actions[0] if single else actions), state

    def __repr__(self) -> str:
        return "random()"
