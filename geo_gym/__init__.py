"""geo_gym: a Gymnasium simulator for geo-distributed pipeline-parallel LLM training."""

import sys
from pathlib import Path

import gymnasium as gym
from numba.core import event as _numba_event

from geo_gym import kernel_cache as _kernel_cache

_kernel_cache.drop_if_stale(Path(__file__).parent)  # before any kernel loads from the cache

COMPILE_NOTICE = (
    "geo_gym: compiling the simulator's numba kernels on first use "
    "(about a minute; cached afterwards)..."
)


class _CompileNotice(_numba_event.Listener):
    """Says once per process, on stderr, that geo_gym's numba kernels are being compiled: numba
    broadcasts "numba:compile" only when a dispatcher compiles, not when it loads its on-disk
    cache (``cache=True``), so a fresh clone (or an edited core) gets one line instead of a
    silent minute, and a warm cache gets nothing."""

    def __init__(self) -> None:
        self.shown = False

    def on_start(self, event) -> None:
        if self.shown:
            return
        dispatcher = (event.data or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if module == "geo_gym" or module.startswith("geo_gym."):
            self.shown = True
            print(COMPILE_NOTICE, file=sys.stderr, flush=True)

    def on_end(self, event) -> None:
        pass


_compile_notice = _CompileNotice()
_numba_event.register("numba:compile", _compile_notice)

from geo_gym.scenarios import Scenario, make_scenario, scenario_names  # noqa: E402

gym.register(
    id="geo_gym/GeoPipe-v0",
    entry_point="geo_gym.env:GeoPipeEnv",
    vector_entry_point="geo_gym.vector:GeoPipeVectorEnv",
)



def simulate(*args, **kwargs):
    """``geo_gym.runner.simulate`` (imported lazily: it pulls in the env and numba kernels)."""
    from geo_gym.runner import simulate as _simulate

    return _simulate(*args, **kwargs)


def plot_schedule(*args, **kwargs):
    """``geo_gym.render.plot_schedule`` (imported lazily: it pulls in matplotlib)."""
    from geo_gym.render import plot_schedule as _plot_schedule

    return _plot_schedule(*args, **kwargs)


__all__ = ["Scenario", "make_scenario", "plot_schedule", "scenario_names", "simulate"]
