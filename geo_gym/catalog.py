"""Constants of the world: GPU types, the paper's regions, models and datasets.

Every constant carries a one-line source. "BACE-Pipe" refers to
../shared/seeds/bace-pipe-paper.txt (Zhang, Liu, Xu, arXiv:2605.25375).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class GPUType:
    """A GPU model: memory, sustained FLOP/s and electrical power draw."""

    name: str
    memory_gb: float
    effective_flops: float  # sustained FLOP/s a training job gets, not the datasheet peak
    power_kw: float  # draw while allocated, idle bubbles included (paper Eq. 4)
    peak_flops: float | None = None  # datasheet dense FLOP/s; None: unknown (no MFU knob)

    def __post_init__(self) -> None:
        for field in ("memory_gb", "effective_flops", "power_kw"):
            if not getattr(self, field) > 0:
                raise ValueError(f"GPUType.{field} must be > 0, got {getattr(self, field)!r}")
        if self.peak_flops is not None and not self.peak_flops >= self.effective_flops:
            raise ValueError(
                f"GPUType.peak_flops must be >= effective_flops ({self.effective_flops!r}), got {self.peak_flops!r}"
            )

    def at_mfu(self, mfu: float) -> GPUType:
        """This GPU with effective FLOP/s = peak x ``mfu`` (model-FLOP utilisation in (0, 1])."""
        if self.peak_flops is None:
            raise ValueError(f"GPU {self.name!r} has no peak_flops, so an MFU cannot be applied to it")
        if isinstance(mfu, bool) or not isinstance(mfu, int | float) or not 0 < mfu <= 1:
            raise ValueError(f"mfu must be a number in (0, 1], got {mfu!r}")
        flops = self.peak_flops * mfu
        return self if flops == self.effective_flops else replace(self, effective_flops=flops)


# RTX A6000 datasheet: 48 GB, 154.8 TFLOP/s dense FP16/BF16 tensor (309.7 with sparsity).
A6000_PEAK_FLOPS = 154.8e12
# Assumed model-FLOP utilisation of a pipeline stage; 40% is typical of Megatron-style training.
ASSUMED_MFU = 0.40
A6000 = GPUType(
    name="A6000",
    memory_gb=48.0,  # NVIDIA RTX A6000 datasheet
    effective_flops=A6000_PEAK_FLOPS * ASSUMED_MFU,
    power_kw=0.3,  # docs/design.md: reproduces the paper's Fig. 1 dollar figures within ~5%
    peak_flops=A6000_PEAK_FLOPS,
)


@dataclass(frozen=True)
class RegionSpec:
    """One row of the paper's Table II."""

    name: str
    location: str
    gpus: int
    price_per_kwh: float
    bandwidth_gbps: float


# BACE-Pipe Table II (GPU capacity, $/kWh from GlobalPetrolPrices, bandwidth sampled 25-100 Gbps).
PAPER_REGIONS: tuple[RegionSpec, ...] = (
    RegionSpec("EU-West", "Ireland", 64, 0.251, 50.0),  # Table II row 1
    RegionSpec("US-East-2", "New York, USA", 64, 0.156, 90.0),  # Table II row 2
    RegionSpec("EU-Central", "Frankfurt, Germany", 16, 0.288, 30.0),  # Table II row 3
    RegionSpec("EA-East", "Tokyo, Japan", 128, 0.191, 70.0),  # Table II row 4
    RegionSpec("SEA-South", "Singapore", 32, 0.222, 50.0),  # Table II row 5
    RegionSpec("OC-East", "Sydney, Australia", 32, 0.295, 70.0),  # Table II row 6
)


@dataclass(frozen=True)
class MeasuredLink:
    """A measured inter-region network path: throughput (Gbit/s) and delay (ms) between two
    cities' cloud regions, as a source reports them (one value per unordered pair)."""

    a: str
    b: str
    delay_ms: float
    gbps: float

    def __post_init__(self) -> None:
        for field in ("delay_ms", "gbps"):
            if not getattr(self, field) > 0:
                raise ValueError(f"MeasuredLink {self.a}-{self.b}: {field} must be > 0, got {getattr(self, field)!r}")


# Inter-region bandwidth and delay between AWS regions from DT-FM: Yuan, He, Davis, Zhang, Dao,
# Chen, Liang, Re, Zhang, "Decentralized Training of Foundation Models in Heterogeneous
# Environments", NeurIPS 2022 (arXiv:2206.01288), whose geo-distributed scenarios are
# "simulated using real-world network measurements" (abstract). The numbers are the authors':
# `delay_bandwidth_dict` in github.com/DS3Lab/DT-FM, scheduler/generate_sim_com_matrices.py
# (commit 69f05e50), one (delay ms, Gbps) pair per city pair, used there for the world-wide
# scenario (8 cities, 8 GPUs each). Copied: the 15 pairs among the cities of Table II's six
# regions (US-East-2 read as AWS us-east-2, Ohio; see DTFM_CITY). Each row: the dict's entry.
DTFM_LINKS: tuple[MeasuredLink, ...] = (
    MeasuredLink("Ohio", "Frankfurt", 99, 0.799),  # "Ohio-Frankfurt": (99, 0.799)
    MeasuredLink("Ohio", "Ireland", 77, 1.14),  # "Ohio-Ireland": (77, 1.14)
    MeasuredLink("Ohio", "Tokyo", 130, 0.694),  # "Ohio-Tokyo": (130, 0.694)
    MeasuredLink("Ohio", "Singapore", 197, 0.452),  # "Ohio-Singapore": (197, 0.452)
    MeasuredLink("Ohio", "Sydney", 185, 0.484),  # "Ohio-Sydney": (185, 0.484)
    MeasuredLink("Tokyo", "Singapore", 73, 1.01),  # "Tokyo-Singapore": (73, 1.01)
    MeasuredLink("Tokyo", "Sydney", 100, 0.761),  # "Tokyo-Sydney": (100, 0.761)
    MeasuredLink("Tokyo", "Frankfurt", 223, 0.36),  # "Tokyo-Frankfurt": (223, 0.36)
    MeasuredLink("Tokyo", "Ireland", 199, 0.465),  # "Tokyo-Ireland": (199, 0.465)
    MeasuredLink("Singapore", "Sydney", 92, 0.816),  # "Singapore-Sydney": (92, 0.816)
    MeasuredLink("Singapore", "Frankfurt", 155, 0.535),  # "Singapore-Frankfurt": (155, 0.535)
    MeasuredLink("Singapore", "Ireland", 179, 0.492),  # "Singapore-Ireland": (179, 0.492)
    MeasuredLink("Sydney", "Frankfurt", 265, 0.328),  # "Sydney-Frankfurt": (265, 0.328)
    MeasuredLink("Sydney", "Ireland", 254, 0.344),  # "Sydney-Ireland": (254, 0.344)
    MeasuredLink("Frankfurt", "Ireland", 24, 1.08),  # "Frankfurt-Ireland": (24, 1.08)
)
# The DT-FM city of each Table II region. Table II names its regions in AWS's style (EU-West:
# Ireland is eu-west-1, EU-Central: Frankfurt is eu-central-1), so US-East-2 is AWS us-east-2,
# Ohio; DT-FM measured no New York region (its nearest, Virginia, is us-east-1).
DTFM_CITY = {
    "EU-West": "Ireland",
    "US-East-2": "Ohio",
    "EU-Central": "Frankfurt",
    "EA-East": "Tokyo",
    "SEA-South": "Singapore",
    "OC-East": "Sydney",
}


def measured_gbps(a: str, b: str, links: tuple[MeasuredLink, ...] = DTFM_LINKS) -> float:
    """The measured throughput between cities ``a`` and ``b`` (either order)."""
    for link in links:
        if {link.a, link.b} == {a, b}:
            return link.gbps
    raise ValueError(f"no measured link between {a!r} and {b!r}")


@dataclass(frozen=True)
class ModelSpec:
    """An LLM architecture (paper Table III) and its training batch size."""

    name: str
    params: float  # number of parameters
    layers: int  # transformer layers: the most pipeline stages the model can be split into
    hidden: int  # hidden size: sets the activation size A_j
    batch_size: int  # global batch size (samples per iteration)
    family: str = ""

    def __post_init__(self) -> None:
        for field in ("params", "layers", "hidden", "batch_size"):
            if not getattr(self, field) > 0:
                raise ValueError(f"ModelSpec.{field} must be > 0, got {getattr(self, field)!r}")


# BACE-Pipe Table III (parameters, layers, hidden size, batch size), in the table's job order 1..8.
PAPER_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("FLM-101B", 101e9, 80, 10240, 128, "flm"),  # Table III job 1 [30]
    ModelSpec("Solar-Open-100B", 100e9, 48, 4096, 128, "solar"),  # Table III job 2 [31]
    ModelSpec("Llama-3.1-70B", 70e9, 80, 8192, 128, "llama"),  # Table III job 3 [32]
    ModelSpec("Falcon-40B", 40e9, 60, 8192, 256, "falcon"),  # Table III job 4 [33]
    ModelSpec("Qwen2.5-32B", 32e9, 64, 5120, 256, "qwen"),  # Table III job 5 [34]
    ModelSpec("Gemma-3-27B", 27e9, 62, 5376, 256, "gemma"),  # Table III job 6 [35]
    ModelSpec("Ministral-3-14B", 14e9, 40, 5120, 512, "ministral"),  # Table III job 7 [36]
    ModelSpec("Qwen2.5-14B", 14e9, 48, 5120, 512, "qwen"),  # Table III job 8 [34]
)

# Smaller open models (not in the paper), so that a trace job asking for 1-4 GPUs trains a
# model that fits on them (traces/mapping.py). Parameters, layers (num_hidden_layers) and
# hidden size (hidden_size) from each model card and its config.json on Hugging Face; the
# batch size is ours (the 14B models' 512: fine-tuning-sized runs), the paper gives none.
OPEN_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("Llama-3.2-1B", 1.24e9, 16, 2048, 512, "llama"),  # meta-llama/Llama-3.2-1B: 1.23B
    ModelSpec("Qwen2.5-1.5B", 1.54e9, 28, 1536, 512, "qwen"),  # Qwen/Qwen2.5-1.5B: 1.54B
    ModelSpec("Llama-3.2-3B", 3.21e9, 28, 3072, 512, "llama"),  # meta-llama/Llama-3.2-3B: 3.21B
    ModelSpec("Qwen2.5-7B", 7.61e9, 28, 3584, 512, "qwen"),  # Qwen/Qwen2.5-7B: 7.61B
    ModelSpec("Llama-3.1-8B", 8.03e9, 32, 4096, 512, "llama"),  # meta-llama/Llama-3.1-8B: 8.03B
)
# Every catalog model; a JobTable's model column indexes this (Table III's first, so that the
# paper scenarios' indices are Table III's job order).
MODELS: tuple[ModelSpec, ...] = PAPER_MODELS + OPEN_MODELS


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    samples: int

    def __post_init__(self) -> None:
        if not self.samples > 0:
            raise ValueError(f"DatasetSpec.samples must be > 0, got {self.samples!r}")


PAPER_DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec("Alpaca-52k", 52_002),  # BACE-Pipe IV-A: 52,002 samples [38]
    DatasetSpec("WikiText-103", 1_810_000),  # BACE-Pipe IV-A: 1.81 million samples [39]
    DatasetSpec("OpenWebText", 8_010_000),  # BACE-Pipe IV-A: 8.01 million samples [40]
)

# Training-run defaults the paper does not state (docs/cost_model.md explains each).
DEFAULT_SEQ_LEN = 2048  # tokens per sample; Llama-3-style 2k context
DEFAULT_MICRO_BATCH = 1  # samples per micro-batch: A_j(Llama-70B) = 33.5 MB, the paper's "about 30 MB"
DEFAULT_EPOCHS = 1.0
BYTES_PER_ACTIVATION = 2  # BF16 activations and gradients
# Per-stage, per-micro-batch overhead (kernel launches, P2P handshakes, recompute share).
# Calibrated, as docs/design.md asks, so that K* of the Table III models spans ~40-80 GPUs.
DEFAULT_STAGE_OVERHEAD_S = 0.15
DEFAULT_INTRA_REGION_GBPS = 100.0  # stage-to-stage bandwidth inside a region (100 Gb/s fabric)


def model_by_name(name: str) -> ModelSpec:
    for m in MODELS:
        if m.name == name:
            return m
    raise ValueError(f"unknown model {name!r}; known: {[m.name for m in MODELS]}")


def dataset_by_name(name: str) -> DatasetSpec:
    for d in PAPER_DATASETS:
        if d.name == name:
            return d
    raise ValueError(f"unknown dataset {name!r}; known: {[d.name for d in PAPER_DATASETS]}")
