"""GPU memory of a pipeline stage, and the fewest stages a model fits on.

BACE-Pipe (section III-A) bounds a job's GPUs only by K* (Eq. 13) and the free GPUs (Eq. 5);
a real cluster also needs each stage to fit in its GPU's memory. Pure pipeline parallelism
shards nothing but layers, so a stage holding ``ceil(layers / L)`` layers keeps, on one GPU:

* **model state**: ``bytes_per_param`` bytes for every parameter of its layers. The default 16
  is mixed-precision Adam: BF16 weights (2) and gradients (2), FP32 master weights (4) and
  Adam's m and v (4 + 4) (Rajbhandari et al., "ZeRO", SC 2020, section 3.1: "16 Psi bytes").
  Parameters are spread evenly over the layers (``params / layers`` each): the embedding and
  output layer are folded into the transformer layers instead of sitting on the first and
  last stage.
* **activations**: with full activation recomputation a stage keeps only its input for every
  micro-batch in flight, ``micro_batch x seq_len x hidden x 2`` bytes each (BF16, the A_j of
  Eq. 6), plus the working set of recomputing one layer during its backward pass, about
  ``34 x seq_len x micro_batch x hidden`` bytes (Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", MLSys 2023, Eq. 1 without the ``5 a s / h``
  attention-score term that fused attention kernels never store). In flight: all M_j
  micro-batches under GPipe (every forward pass runs before the first backward pass), at
  most ``min(M_j, L)`` on the first stage under 1F1B (PipeDream-Flush; Narayanan et al.,
  "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC 2021,
  section 2.2.1).
* **framework reserve**: the CUDA context (781 MB on the GPU for an idle PyTorch process,
  pytorch/pytorch issue #34323), cuBLAS workspaces (4 MiB per handle on Ampere, pytorch PR
  #120925) and NCCL's point-to-point buffers (4 MiB per channel, NCCL_BUFFSIZE): 1 GiB.

The stage fits when its bytes are at most ``usable_fraction x`` the GPU's memory. GB in
``GPUType.memory_gb`` are GiB (2^30 bytes): the A6000's 48 GB are 49,140 MiB in nvidia-smi.
docs/cost_model.md tabulates the minimum stage count of every catalog model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = float(2**30)
SCHEDULES = ("gpipe", "1f1b")
# Korthikanti et al. (MLSys 2023), Eq. 1: bytes of one transformer layer's activations per
# token and hidden unit, without the attention scores.
RECOMPUTE_BYTES_PER_TOKEN_HIDDEN = 34.0
DEFAULT_BYTES_PER_PARAM = 16.0  # ZeRO (SC 2020) section 3.1: mixed-precision Adam
DEFAULT_RESERVE_GB = 1.0  # CUDA context, cuBLAS workspace, NCCL buffers (module docstring)


@dataclass(frozen=True)
class MemoryModel:
    """How much of a GPU one pipeline stage needs (the module docstring gives the formula).

    ``bytes_per_param``: model-state bytes per parameter (16: mixed-precision Adam);
    ``schedule``: "gpipe" (all M_j micro-batches in flight) or "1f1b" (at most L);
    ``recompute``: full activation recomputation (True) or every layer's activations kept;
    ``reserve_gb``: framework reserve per GPU (GiB); ``usable_fraction``: the share of the
    GPU's memory training may fill."""

    bytes_per_param: float = DEFAULT_BYTES_PER_PARAM
    schedule: str = "gpipe"
    recompute: bool = True
    reserve_gb: float = DEFAULT_RESERVE_GB
    usable_fraction: float = 1.0

    def __post_init__(self) -> None:
        def number(name: str) -> float:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
                raise ValueError(f"MemoryModel.{name} must be a number, got {value!r}")
            return value

        if not (number("bytes_per_param") > 0 and math.isfinite(self.bytes_per_param)):
            raise ValueError(f"MemoryModel.bytes_per_param must be a finite number > 0, got {self.bytes_per_param!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"MemoryModel.schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not isinstance(self.recompute, bool):
            raise ValueError(f"MemoryModel.recompute must be True or False, got {self.recompute!r}")
        if not (number("reserve_gb") >= 0 and math.isfinite(self.reserve_gb)):
            raise ValueError(f"MemoryModel.reserve_gb must be a finite number >= 0, got {self.reserve_gb!r}")
        if not 0 < number("usable_fraction") <= 1:
            raise ValueError(f"MemoryModel.usable_fraction must be in (0, 1], got {self.usable_fraction!r}")


def layers_per_stage(layers: int, num_stages: int) -> int:
    """Layers on the fullest stage when ``layers`` are split over ``num_stages`` stages."""
    return -(-layers // num_stages)


def model_state_bytes(params: float, layers: int, num_stages: int, bytes_per_param: float) -> float:
    """Weights, gradients and optimizer state of the fullest stage's layers."""
    return layers_per_stage(layers, num_stages) * (params / layers) * bytes_per_param


def in_flight_microbatches(schedule: str, num_microbatches: int, num_stages: int) -> int:
    """Micro-batches whose activations the first (fullest) stage holds at once: GPipe keeps
    all M_j, 1F1B at most min(M_j, L)."""
    if schedule == "gpipe":
        return num_microbatches
    return min(num_microbatches, num_stages)


def activation_bytes(
    schedule: str,
    recompute: bool,
    num_microbatches: int,
    num_stages: int,
    layers_on_stage: int,
    tokens_per_microbatch: int,
    hidden: int,
    bytes_per_value: int = 2,
) -> float:
    """Activation memory of one stage. With recomputation: its input per in-flight
    micro-batch plus one layer's recompute working set; without: every layer's activations
    (34 s b h bytes each, Korthikanti et al. Eq. 1) per in-flight micro-batch."""
    in_flight = in_flight_microbatches(schedule, num_microbatches, num_stages)
    layer_bytes = RECOMPUTE_BYTES_PER_TOKEN_HIDDEN * tokens_per_microbatch * hidden
    if recompute:
        return in_flight * tokens_per_microbatch * hidden * bytes_per_value + layer_bytes
    return in_flight * layers_on_stage * layer_bytes


def stage_memory_bytes(
    mem: MemoryModel,
    params: float,
    layers: int,
    hidden: int,
    num_stages: int,
    num_microbatches: int,
    tokens_per_microbatch: int,
) -> float:
    """Bytes the fullest of ``num_stages`` stages needs on its GPU (module docstring)."""
    on_stage = layers_per_stage(layers, num_stages)
    return (
        model_state_bytes(params, layers, num_stages, mem.bytes_per_param)
        + activation_bytes(
            mem.schedule, mem.recompute, num_microbatches, num_stages, on_stage,
            tokens_per_microbatch, hidden,
        )
        + mem.reserve_gb * GIB
    )


def usable_bytes(mem: MemoryModel, memory_gb: float) -> float:
    return mem.usable_fraction * memory_gb * GIB


def min_stages(
    mem: MemoryModel,
    params: float,
    layers: int,
    hidden: int,
    num_microbatches: int,
    tokens_per_microbatch: int,
    memory_gb: float,
) -> int:
    """The fewest stages (GPUs) from which every count up to ``layers`` fits in ``memory_gb``;
    0 when even one layer per GPU does not fit. The simulator enforces the minimum as one
    threshold, so every larger count must fit too. Under GPipe that is the first count that
    fits (more stages never hold more); under 1F1B a stage holds min(M_j, L) micro-batches,
    so an extra stage may cost more activations than it saves in layers (without
    recomputation: a whole stage's worth), and the minimum is then where the counts that fit
    become unbroken."""
    limit = usable_bytes(mem, memory_gb)
    first = 0
    for n in range(layers, 0, -1):  # from one layer per GPU down: the unbroken run that fits
        if stage_memory_bytes(mem, params, layers, hidden, n, num_microbatches, tokens_per_microbatch) > limit:
            break
        first = n
    return first
