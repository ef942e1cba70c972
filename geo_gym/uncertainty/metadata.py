"""Job metadata and its vectorisation: the Scheduling Advisor's "semantic fingerprint".

SchedMate section 3.1 ("Semantic Workload Metadata", "Similar Job Retrieval"): an LLM agent
extracts structured metadata from a job's source code (model architecture, dataset, training
configuration, hardware request), the record is embedded into a dense vector (BGE-m3 in the
paper) and historical jobs are matched by cosine similarity. We have no source code and no
embedding model, so the metadata record is given directly and the embedding is replaced by
deterministic feature hashing of ``field=value`` tokens: two records that share many tokens
get a high cosine similarity, which is the property retrieval relies on.

Hashing uses ``zlib.crc32`` (stable across processes and platforms), never Python's salted
``hash()``, so vectors, and everything retrieved with them, are reproducible. Numeric fields
are bucketed on a log2 scale (two widths) so that nearby sizes / GPU counts share tokens.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

FIELDS: tuple[str, ...] = ("family", "size_b", "dataset", "task", "user", "gpus", "name")
# The sparse subset a Lucid-style estimator has (SchedMate section 1, C2: "sparse metadata
# (e.g., job name, username)"), plus the GPU request every scheduler sees.
SPARSE_FIELDS: tuple[str, ...] = ("user", "gpus", "name")

DEFAULT_DIM = 64


@dataclass(frozen=True)
class JobMetadata:
    """What the Metadata Extractor would return for one job (SchedMate Fig. 6, simplified)."""

    family: str  # model family, e.g. "llama"
    size_b: float  # parameters, billions
    dataset: str
    task: str  # e.g. "pretrain", "sft"
    user: str
    gpus: int  # GPUs requested
    name: str  # job name as submitted

    def __post_init__(self) -> None:
        if not (self.size_b > 0 and math.isfinite(self.size_b)):
            raise ValueError(f"JobMetadata.size_b must be a positive number, got {self.size_b!r}")
        if int(self.gpus) != self.gpus or self.gpus < 1:
            raise ValueError(f"JobMetadata.gpus must be an integer >= 1, got {self.gpus!r}")


def _log2_tokens(field: str, value: float) -> list[str]:
    # A fine (half-octave) and a coarse (octave) bucket: 7B and 8B share both, 7B and 13B
    # share the coarse one only, 1B and 70B share nothing.
    x = math.log2(value)
    return [f"{field}~h{math.floor(2.0 * x)}", f"{field}~o{math.floor(x)}"]


_NAME_SPLIT = re.compile(r"[a-z]+")


def tokens(meta: JobMetadata, fields: Sequence[str] = FIELDS) -> list[str]:
    """The ``field=value`` tokens of one record, restricted to ``fields``.

    Job names are split into their alphabetic words (run counters and dates dropped), because
    resubmissions of one experiment differ mostly in such suffixes.
    """
    out: list[str] = []
    for f in fields:
        if f == "size_b":
            out.extend(_log2_tokens("size_b", float(meta.size_b)))
        elif f == "gpus":
            out.extend(_log2_tokens("gpus", float(meta.gpus)))
        elif f == "name":
            out.extend(f"name~{w}" for w in _NAME_SPLIT.findall(meta.name.lower()))
        elif f in FIELDS:
            out.append(f"{f}={str(getattr(meta, f)).lower()}")
        else:
            raise ValueError(f"unknown metadata field {f!r}; known: {', '.join(FIELDS)}")
    return out


def _hash_token(token: str, dim: int) -> tuple[int, float]:
    h = zlib.crc32(token.encode("utf-8"))
    # Low bits pick the slot, a high bit the sign: signed hashing keeps collisions unbiased.
    return h % dim, (1.0 if (h >> 31) & 1 == 0 else -1.0)


def vectorize(
    meta_list: Sequence[JobMetadata],
    dim: int = DEFAULT_DIM,
    fields: Sequence[str] = FIELDS,
    weights: Mapping[str, float] | None = None,
) -> np.ndarray:
    """Hash ``meta_list`` into an (n, dim) float32 array of L2-normalised rows.

    ``weights`` scales the tokens of a field (default 1 for every field). A record with no
    tokens (empty ``fields``) stays the zero vector, which has cosine similarity 0 to anything.
    """
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    fields = tuple(fields)
    for f in fields:
        if f not in FIELDS:
            raise ValueError(f"unknown metadata field {f!r}; known: {', '.join(FIELDS)}")
    w = {f: 1.0 for f in fields}
    if weights:
        for f, v in weights.items():
            if f not in FIELDS:
                raise ValueError(f"unknown metadata field {f!r} in weights")
            w[f] = float(v)
    out = np.zeros((len(meta_list), dim), dtype=np.float64)
    for i, m in enumerate(meta_list):
        for f in fields:
            for tok in tokens(m, (f,)):
                j, s = _hash_token(tok, dim)
                out[i, j] += s * w[f]
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out.astype(np.float32)


@runtime_checkable
class Vectorizer(Protocol):
    """Anything that turns metadata records into an (n, dim) float array (the embedder)."""

    dim: int

    def transform(self, meta_list: Sequence[JobMetadata]) -> np.ndarray: ...


@dataclass(frozen=True)
class HashingVectorizer:
    """The default :class:`Vectorizer`: :func:`vectorize` with fixed options."""

    dim: int = DEFAULT_DIM
    fields: tuple[str, ...] = FIELDS
    weights: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        # Fail at construction, not at the first transform.
        vectorize([], self.dim, self.fields, dict(self.weights))

    def transform(self, meta_list: Sequence[JobMetadata]) -> np.ndarray:
        return vectorize(meta_list, self.dim, self.fields, dict(self.weights))
