"""Wrappers that users of other libraries would otherwise write themselves.

``ActionMaskObservation`` puts the action mask into the observation, as a Dict
``{"observations": obs, "action_mask": mask}``: the keys and the float 0/1 mask that RLlib's
action-masking RLModule (``ray.rllib.examples.rl_modules.classes.action_masking_rlm``) reads.

No wrapper is needed for sb3-contrib's MaskablePPO: it (and ``evaluate_policy(...,
use_masking=True)``) finds ``GeoPipeEnv.action_masks`` through ``gym.make``'s wrappers with
gymnasium's ``get_wrapper_attr``; code that calls it itself uses
``env.get_wrapper_attr("action_masks")()`` or ``env.unwrapped.action_masks()`` (e.g.
``ActionMasker(env, lambda e: e.unwrapped.action_masks())``). See docs/ecosystem.md.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ActionMaskObservation(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Observation ``{"observations": obs, "action_mask": mask}`` with the mask as float32
    0/1 (``Box(0, 1, (n_actions,))``), taken from the ``info["action_mask"]`` of every reset and
    step; the info is passed on unchanged."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise ValueError(f"ActionMaskObservation needs a Discrete action space, got {env.action_space}")
        self.observation_space = gym.spaces.Dict({
            "observations": env.observation_space,
            "action_mask": gym.spaces.Box(0.0, 1.0, (int(env.action_space.n),), np.float32),
        })

    def _with_mask(self, obs, info: dict) -> dict:
        if "action_mask" not in info:
            raise KeyError("ActionMaskObservation needs info['action_mask'] from every reset and step")
        return {"observations": obs, "action_mask": np.asarray(info["action_mask"], dtype=np.float32)}

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._with_mask(obs, info), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._with_mask(obs, info), reward, terminated, truncated, info
