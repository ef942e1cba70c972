"""The network encoders of agents/features.py: the slot encoder and its attention variant."""

from __future__ import annotations

import numpy as np
import torch

from agents.features import SlotAttention, SlotEncoder
from geo_gym import decision
from geo_gym.env import GeoPipeEnv


def observation_with_empty_slots() -> tuple[GeoPipeEnv, np.ndarray, int]:
    env = GeoPipeEnv("paper-default", window=8)
    obs, _ = env.reset(seed=0)
    k = env.num_regions
    while True:  # start jobs until some slots are empty but at least two are not
        present = [obs[decision.slot_index(k, s, decision.S_PRESENT)] > 0 for s in range(8)]
        if 2 <= sum(present) < 8:
            return env, obs, sum(present)
        obs, _, done, _, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        assert not done


def test_attention_ignores_empty_slots_and_is_equivariant_to_slot_order() -> None:
    torch.manual_seed(0)
    env, obs, n = observation_with_empty_slots()
    net = SlotAttention(env.observation_space, num_regions=env.num_regions).eval()
    plain = SlotEncoder(env.observation_space, num_regions=env.num_regions)
    x = torch.as_tensor(obs)[None]
    out = net(x)
    assert out.shape == plain(x).shape  # the same layout for the action head
    ctx_dim, slot_dim = 64, 32
    slots = out[0, ctx_dim:].reshape(8, slot_dim)
    # what an empty slot holds does not reach the jobs' embeddings
    k, size = env.num_regions, decision.PER_SLOT
    start = decision.slot_index(k, 0, 0)
    noisy = obs.copy()
    for s in range(8):
        if obs[decision.slot_index(k, s, decision.S_PRESENT)] <= 0:
            noisy[start + s * size + 1 : start + (s + 1) * size] = 0.7
    again = net(torch.as_tensor(noisy)[None])[0, ctx_dim:].reshape(8, slot_dim)
    present = [s for s in range(8) if obs[decision.slot_index(k, s, decision.S_PRESENT)] > 0]
    torch.testing.assert_close(again[present], slots[present])
    # swapping two jobs' slots swaps their embeddings (no position in attention)
    a, b = present[0], present[1]
    swapped = obs.copy()
    swapped[start + a * size : start + (a + 1) * size] = obs[start + b * size : start + (b + 1) * size]
    swapped[start + b * size : start + (b + 1) * size] = obs[start + a * size : start + (a + 1) * size]
    out2 = net(torch.as_tensor(swapped)[None])[0, ctx_dim:].reshape(8, slot_dim)
    torch.testing.assert_close(out2[a], slots[b], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out2[b], slots[a], atol=1e-5, rtol=1e-5)
    # and the other jobs see the same set
    others = [s for s in present if s not in (a, b)]
    torch.testing.assert_close(out2[others], slots[others], atol=1e-5, rtol=1e-5)
