"""A trained SB3 model as a scheduler with the fixed policies' call, ``predict(obs)``.

The valid actions are rebuilt from the observation (``baselines.RandomPolicy.mask``), and the
model's action distribution is restricted to them, for PPO and MaskablePPO alike. Without this a
deterministic unmasked policy could repeat an invalid action at an instant with no pending event
(a no-op) forever.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import numpy as np
import torch

from baselines.policies import RandomPolicy
from geo_gym.placement import NUM_RULES


@contextmanager
def unvalidated_distributions() -> Iterator[None]:
    """torch.distributions without their argument checks while the block runs (torch's own
    switch, ``Distribution.set_default_validate_args``; the values are the same). The checks
    are a tenth of a PPO update of the default run's model, and sb3-contrib's
    ``MaskableCategorical`` repeats them on every mask, where they can reject a softmax whose
    float32 sum drifted (sb3-contrib issue #322). A NaN still stops training (sampling raises)
    and ``AgentPolicy.predict`` (its own check)."""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)


class AgentPolicy:
    """``seed`` drives the sampling of non-deterministic predictions."""

    def __init__(self, model, name: str = "agent", seed: int = 0):
        self.model = model
        self.name = name
        # the model's own layout (SlotEncoder); None: inferred from the observation size
        self.num_regions = getattr(model.policy.features_extractor, "num_regions", None)
        self.num_rules = getattr(model.policy.features_extractor, "num_rules", NUM_RULES)
        self.rng = np.random.default_rng(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        batch = obs[None] if single else obs
        masks = np.stack([RandomPolicy.mask(row, self.num_regions, self.num_rules) for row in batch])
        with torch.no_grad(), unvalidated_distributions():
            tensor, _ = self.model.policy.obs_to_tensor(batch)
            dist = self.model.policy.get_distribution(tensor).distribution
            logits = dist.logits.cpu().numpy()
        if np.isnan(logits).any():
            raise ValueError(f"{self.name}: the model's action logits are NaN (a diverged or corrupt checkpoint)")
        logits = np.where(masks, logits, -np.inf)
        if deterministic:
            actions = logits.argmax(axis=1)
        else:
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            actions = np.array([self.rng.choice(len(row), p=row) for row in p])
        return (int(actions[0]) if single else actions), state

    def __repr__(self) -> str:
        return f"{self.name}({type(self.model).__name__})"


@lru_cache(maxsize=16)
def load_agent(path: str, algo: str) -> AgentPolicy:
    """The checkpoint at ``path`` as a policy, loaded once per process (a sweep's Ray worker
    loads it for its first replicate and reuses it for the next ones)."""
    from agents.training import load_model

    return AgentPolicy(load_model(algo, path))
