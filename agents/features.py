"""Feature extractor for GeoPipe observations: one encoder shared by every queue slot.

The observation is [global | regions | slot_0 | ... | slot_{W-1}] (layout in geo_gym/env.py).
Each slot block (job features + its placement options) goes through the same MLP, so what the
network learns about "a job with these options" does not depend on which slot it sits in;
the global and region parts go through their own MLP. The output concatenates the context
embedding with every slot embedding (slot order kept, so the action head can address slots).
"""

from __future__ import annotations

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from geo_gym import decision


class SlotEncoder(BaseFeaturesExtractor):
    """``num_regions``: the env's region count (``agents.training.make_model`` passes it);
    without it the layout is inferred from the observation size, which is unique for up to
    ``geo_gym.decision.MAX_INFERRED_REGIONS`` (45) regions (``decision.layout_from_obs_size``).
    ``num_rules``: the placement options per slot (the env's ``num_rules``: 9 by default, 13
    with ``rules="levels"``)."""

    def __init__(
        self, observation_space: gym.spaces.Box, slot_dim: int = 32, context_dim: int = 64,
        num_regions: int | None = None, num_rules: int = decision.NUM_RULES,
    ):
        size = int(observation_space.shape[0])
        num_regions, window = decision.layout_from_obs_size(size, num_regions, num_rules)
        self.num_regions = num_regions
        self.num_rules = int(num_rules)
        self.context_size = decision.NUM_GLOBAL + decision.NUM_REGION * num_regions
        self.window = window
        self.slot_size = decision.per_slot(num_rules)
        super().__init__(observation_space, context_dim + window * slot_dim)
        self.context = nn.Sequential(nn.Linear(self.context_size, context_dim), nn.ReLU())
        self.slot = nn.Sequential(
            nn.Linear(self.slot_size + context_dim, slot_dim), nn.ReLU(), nn.Linear(slot_dim, slot_dim), nn.ReLU()
        )

    def embed(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(context embedding, the slots' raw blocks, their embeddings)."""
        ctx = self.context(obs[:, : self.context_size])
        slots = obs[:, self.context_size :].reshape(obs.shape[0], self.window, self.slot_size)
        ctx_rep = ctx.unsqueeze(1).expand(-1, self.window, -1)
        return ctx, slots, self.slot(torch.cat([slots, ctx_rep], dim=-1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        ctx, _, emb = self.embed(obs)
        return torch.cat([ctx, emb.flatten(1)], dim=1)


class SlotAttention(SlotEncoder):
    """``SlotEncoder`` followed by self-attention over the window: every slot's embedding is
    updated with what the other queued jobs look like (a set encoder; one
    ``nn.TransformerEncoderLayer``, 4 heads, no positional encoding, empty slots masked out),
    so a slot's score can depend on the rest of the queue, as a queue order's does. The output
    layout is ``SlotEncoder``'s, so the action head addresses slots the same way."""

    def __init__(self, observation_space: gym.spaces.Box, slot_dim: int = 32, context_dim: int = 64,
                 num_regions: int | None = None, heads: int = 4, num_rules: int = decision.NUM_RULES):
        super().__init__(observation_space, slot_dim, context_dim, num_regions, num_rules)
        self.attend = nn.TransformerEncoderLayer(slot_dim, heads, dim_feedforward=2 * slot_dim, dropout=0.0,
                                                 batch_first=True)
        self.present = decision.S_PRESENT  # within a slot's block

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        ctx, slots, emb = self.embed(obs)
        empty = slots[:, :, self.present] <= 0
        # a queue with no job at all attends over its (empty) slots rather than over nothing
        empty = empty & ~empty.all(dim=1, keepdim=True)
        emb = self.attend(emb, src_key_padding_mask=empty)
        return torch.cat([ctx, emb.flatten(1)], dim=1)
