"""geo_gym: a Gymnasium simulator for geo-distributed pipeline-parallel LLM training."""

import gymnasium as gym

from geo_gym.scenarios import Scenario, make_scenario, scenario_names

gym.register(
    id="geo_gym/GeoPipe-v0",
    entry_point="geo_gym.env:GeoPipeEnv",
    vector_entry_point="geo_gym.vector:GeoPipeVectorEnv",
)



def simulate(*args, **kwargs):
    """``geo_gym.runner.simulate`` (imported lazily: it pulls in the env and numba kernels)."""
    from geo_gym.runner import simulate as _simulate

    return _simulate(*args, **kwargs)


__all__ = ["Scenario", "make_scenario", "scenario_names", "simulate"]
