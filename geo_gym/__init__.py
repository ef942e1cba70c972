"""geo_gym: a Gymnasium simulator for geo-distributed pipeline-parallel LLM training."""

import gymnasium as gym

from geo_gym.scenarios import Scenario, make_scenario, scenario_names

gym.register(
    id="geo_gym/GeoPipe-v0",
    entry_point="geo_gym.env:GeoPipeEnv",
    vector_entry_point="geo_gym.vector:GeoPipeVectorEnv",
)

__all__ = ["Scenario", "make_scenario", "scenario_names"]
