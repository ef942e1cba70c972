"""The start rule: how few GPUs a job may start on, and what the placement rules aim at.

The paper leaves it open (III-B says a job may run on any number of GPUs up to K*; IV-A caps
every policy at K*), and it decides results (docs/results.md), so it is a setting of
scenarios, ``GeoPipeEnv``, the vector env, ``geo_gym.simulate`` and every script
(``--start-rule``). Per job it yields ``(min_gpus, k_target)``: the simulator refuses any
placement with fewer than ``min_gpus`` GPUs whoever proposes it, and every placement rule
aims at ``k_target``.

| rule | min_gpus | k_target |
|---|---|---|
| ``memory`` (default) | the memory minimum (``geo_gym.memory``) | K* over the counts that fit |
| ``any`` | 1: the paper's literal text, **memory not modelled** | K* over 1..layers |
| ``fraction:X`` | max(memory minimum, ceil(X k_target)) | as ``memory`` |
| ``kstar`` | k_target: all of it or wait (gang) | as ``memory`` |
| ``request`` | the job's GPU request (trace jobs), at most its layer count | the same |

Under every rule but ``request`` a job's GPU request (``JobSpec.max_gpus``) caps k_target.
``any`` exists to reproduce the paper's setting and this project's earlier tables: it is the
only rule under which a 100B model may start on 11 GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KINDS = ("memory", "any", "fraction", "kstar", "request")


@dataclass(frozen=True)
class StartRule:
    """A parsed start rule; ``StartRule.parse("fraction:0.5")``. ``str()`` gives it back."""

    kind: str = "memory"
    fraction: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(
                f"unknown start rule {self.kind!r}; known: memory, any, fraction:X (0 < X <= 1), kstar, request"
            )
        if self.kind == "fraction":
            x = self.fraction
            if isinstance(x, bool) or not isinstance(x, int | float) or not 0 < x <= 1:
                raise ValueError(f"start rule fraction:X needs X in (0, 1], got {x!r}")
        elif self.fraction is not None:
            raise ValueError(f"start rule {self.kind!r} takes no fraction, got {self.fraction!r}")

    @classmethod
    def parse(cls, value: str | StartRule | None) -> StartRule:
        """A ``StartRule`` from its text (``memory``, ``any``, ``fraction:X``, ``kstar``,
        ``request``); a ``StartRule`` passes through, None is the default."""
        if value is None:
            return cls()
        if isinstance(value, StartRule):
            return value
        if not isinstance(value, str):
            raise ValueError(f"a start rule is a string such as 'memory' or 'fraction:0.5', got {value!r}")
        kind, sep, arg = value.strip().partition(":")
        if kind == "fraction":
            try:
                x = float(arg)
            except ValueError:
                raise ValueError(f"start rule {value!r}: fraction:X needs a number X in (0, 1]") from None
            return cls("fraction", x)
        if sep:
            raise ValueError(f"start rule {value!r}: only fraction takes an argument (fraction:X)")
        return cls(kind)

    @property
    def uses_memory(self) -> bool:
        """Whether the memory model bounds the job (every rule but ``any``)."""
        return self.kind != "any"

    def __str__(self) -> str:
        return f"fraction:{self.fraction:g}" if self.kind == "fraction" else self.kind


def gpu_bounds(
    rule: StartRule, k_star: int, memory_min: int, layers: int, request: int | None
) -> tuple[int, int]:
    """(min_gpus, k_target) of a job under ``rule`` (module table). ``k_star`` is Eq. (13)'s
    argmin over the counts the rule allows (from ``memory_min`` up, or from 1 under ``any``),
    ``memory_min`` the memory minimum (1 under ``any``), ``request`` the job's GPU request or
    None. Raises ValueError (without the job's name: the caller adds it) when the rule cannot
    hold the job."""
    if rule.kind == "request":
        if request is None:
            raise ValueError("start rule 'request' needs the job's GPU request (JobSpec.max_gpus), and it has none")
        target = min(int(request), layers)
        if target < memory_min:
            raise ValueError(
                f"its request of {request} GPUs is below its model's memory minimum of {memory_min}"
            )
        return target, target
    target = k_star if request is None else min(k_star, int(request))
    if target < memory_min:
        raise ValueError(f"its request of {request} GPUs is below its model's memory minimum of {memory_min}")
    if rule.kind == "kstar":
        return target, target
    if rule.kind == "fraction":
        return max(memory_min, math.ceil(rule.fraction * target - 1e-9)), target
    return memory_min, target
