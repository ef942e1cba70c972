"""Regions, the inter-region bandwidth matrix, and a cluster's mutable state.

Paper section III-A / Table I: region r has GPU capacity G_r, electricity price P_r and
bandwidth B_r; the link u -> v has bandwidth B_uv, by default (B_u + B_v) / 2 (section IV-A),
and a scenario may give a full, possibly asymmetric matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from geo_gym import catalog, costmodel
from geo_gym.placement import Placement, check_placement


@dataclass(frozen=True)
class Region:
    name: str
    gpus: int
    price_per_kwh: float
    bandwidth_gbps: float

    def __post_init__(self) -> None:
        if int(self.gpus) != self.gpus or self.gpus < 0:
            raise ValueError(f"Region {self.name!r}: gpus must be an integer >= 0, got {self.gpus!r}")
        if not np.isfinite(self.price_per_kwh) or self.price_per_kwh < 0:
            raise ValueError(
                f"Region {self.name!r}: price_per_kwh must be >= 0, got {self.price_per_kwh!r}"
            )
        if not np.isfinite(self.bandwidth_gbps) or self.bandwidth_gbps < 0:
            raise ValueError(
                f"Region {self.name!r}: bandwidth_gbps must be >= 0, got {self.bandwidth_gbps!r}"
            )


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def default_bandwidth_matrix(region_bandwidth: Sequence[float]) -> np.ndarray:
    """B_uv = (B_u + B_v) / 2 for u != v (paper IV-A); the diagonal is unused and set to 0."""
    b = np.asarray(region_bandwidth, dtype=np.float64)
    m = (b[:, None] + b[None, :]) / 2.0
    np.fill_diagonal(m, 0.0)
    return m


@dataclass(frozen=True)
class Cluster:
    """A geo-distributed cloud: regions, directed link bandwidth (Gbps), GPU type."""

    regions: tuple[Region, ...]
    bandwidth: np.ndarray = field(default=None, repr=False)  # (K, K) Gbps, row = from
    intra_region_gbps: float = catalog.DEFAULT_INTRA_REGION_GBPS
    gpu: catalog.GPUType = catalog.A6000

    def __post_init__(self) -> None:
        regions = tuple(self.regions)
        if not regions:
            raise ValueError("Cluster.regions must not be empty")
        object.__setattr__(self, "regions", regions)
        k = len(regions)
        if self.bandwidth is None:
            bw = default_bandwidth_matrix([r.bandwidth_gbps for r in regions])
        else:
            bw = np.array(self.bandwidth, dtype=np.float64)
            if bw.shape != (k, k):
                raise ValueError(
                    f"Cluster.bandwidth must have shape ({k}, {k}) for {k} regions, got {bw.shape}"
                )
            if np.isnan(bw).any() or (bw < 0).any():
                raise ValueError("Cluster.bandwidth entries must be >= 0")
            bw = bw.copy()
            np.fill_diagonal(bw, 0.0)
        bw.setflags(write=False)
        object.__setattr__(self, "bandwidth", bw)
        if not self.intra_region_gbps > 0:
            raise ValueError(f"Cluster.intra_region_gbps must be > 0, got {self.intra_region_gbps!r}")

    @property
    def num_regions(self) -> int:
        return len(self.regions)

    # Cached (read-only): every episode load reads them, and the cluster is immutable.
    @cached_property
    def capacities(self) -> np.ndarray:
        return _read_only(np.array([r.gpus for r in self.regions], dtype=np.int64))

    @cached_property
    def total_gpus(self) -> int:
        return int(self.capacities.sum())

    @cached_property
    def prices(self) -> np.ndarray:
        return _read_only(np.array([r.price_per_kwh for r in self.regions], dtype=np.float64))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.regions)

    def scaled(self, bandwidth_scale: float = 1.0, capacity_scale: float = 1.0) -> Cluster:
        """The sensitivity knobs of paper IV-C: scale every link, and every region's GPUs
        (rounded, at least 1 GPU where there was one)."""
        for name, value in (("bandwidth_scale", bandwidth_scale), ("capacity_scale", capacity_scale)):
            if isinstance(value, bool) or not (value > 0 and np.isfinite(value)):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        regions = tuple(
            Region(
                r.name,
                max(1, int(round(r.gpus * capacity_scale))) if r.gpus > 0 else 0,
                r.price_per_kwh,
                r.bandwidth_gbps * bandwidth_scale,
            )
            for r in self.regions
        )
        return Cluster(regions, self.bandwidth * bandwidth_scale, self.intra_region_gbps, self.gpu)


class ClusterState:
    """Free GPUs per region and reserved bandwidth per directed link: the state that
    Eq. (5) and Eq. (6) constrain. The simulator keeps the same two arrays."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.free = cluster.capacities.copy()
        self.reserved = np.zeros_like(cluster.bandwidth)

    def residual_bandwidth(self) -> np.ndarray:
        return np.maximum(self.cluster.bandwidth - self.reserved, 0.0)

    def alpha(self) -> float:
        """Eq. (11)."""
        return costmodel.alpha(self.reserved, self.cluster.bandwidth)

    def check(self, placement: Placement, b_j: float) -> None:
        """Raise ValueError unless ``placement`` satisfies Eq. (5) and Eq. (6)."""
        check_placement(placement, self.free, self.reserved, self.cluster.bandwidth, b_j)

    def allocate(self, placement: Placement, b_j: float) -> None:
        self.check(placement, b_j)
        for r, n in zip(placement.path, placement.gpus, strict=True):
            self.free[r] -= n
        for u, v in zip(placement.path[:-1], placement.path[1:], strict=True):
            self.reserved[u, v] += b_j
            self.reserved[v, u] += b_j

    def release(self, placement: Placement, b_j: float) -> None:
        for r, n in zip(placement.path, placement.gpus, strict=True):
            self.free[r] += n
        for u, v in zip(placement.path[:-1], placement.path[1:], strict=True):
            self.reserved[u, v] = max(0.0, self.reserved[u, v] - b_j)
            self.reserved[v, u] = max(0.0, self.reserved[v, u] - b_j)


def paper_cluster() -> Cluster:
    """Table II: six regions, B_uv = (B_u + B_v) / 2."""
    return Cluster(
        tuple(
            Region(r.name, r.gpus, r.price_per_kwh, r.bandwidth_gbps) for r in catalog.PAPER_REGIONS
        )
    )
