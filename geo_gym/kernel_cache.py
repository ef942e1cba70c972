"""Dropping numba's on-disk kernel cache when any of geo_gym's sources changed.

numba's cache (``cache=True``) checks only the source file of the function it caches: a
kernel of ``decision.py`` that calls (or inlines) a rule of ``placement.py`` keeps the rule's
old code after an edit of ``placement.py`` alone, or after a ``git pull`` into an editable
install that changed only that file. So the package's sources are hashed together, and when
the hash differs from the one stamped beside the cache, geo_gym's cached kernels are deleted
(they compile again on first use, about a minute). Runs at ``import geo_gym``, before any
kernel has loaded from the cache.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from numba.core import config
from numba.core.caching import _CacheLocator

STAMP = "geo_gym_sources.sha256"
CACHE_SUFFIXES = (".nbi", ".nbc")  # numba's index and data files


def sources_digest(root: Path, sources: list[Path] | None = None) -> str:
    """SHA-256 over every ``.py`` file under ``root`` (``sources``, if given): relative path and
    contents."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")) if sources is None else sources:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_dirs(root: Path, sources: list[Path] | None = None) -> list[Path]:
    """Where numba keeps the cache of each source directory under ``root`` (first: root's own):
    ``__pycache__`` beside the sources, or under ``NUMBA_CACHE_DIR`` when that is set (numba's
    own naming)."""
    source_dirs = sorted({p.parent for p in (root.rglob("*.py") if sources is None else sources)})
    user_dir = config.CACHE_DIR
    if not user_dir:
        return [d / "__pycache__" for d in source_dirs]
    return [Path(user_dir) / _CacheLocator.get_suitable_cache_subpath(str(d / "x.py")) for d in source_dirs]


def drop_if_stale(root: Path) -> bool:
    """Delete the cached kernels of the sources under ``root`` if the sources changed since the
    stamp was written (or there is none), then stamp; True if it deleted. Files written after
    this call began are kept (another process compiled them from these very sources). An
    unwritable cache is left alone: numba then keeps no cache there either."""
    began = time.time()
    sources = sorted(root.rglob("*.py"))  # one walk for both
    dirs = cache_dirs(root, sources)
    stamp = dirs[0] / STAMP
    digest = sources_digest(root, sources)
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    dropped = False
    for d in dirs:
        if not d.is_dir():
            continue
        for path in d.iterdir():
            try:
                if path.suffix in CACHE_SUFFIXES and path.stat().st_mtime < began:
                    path.unlink()
                    dropped = True
            except OSError:
                pass  # gone already (another process), or not ours to delete
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        fresh = stamp.with_name(f"{STAMP}.{os.getpid()}")
        fresh.write_text(digest)
        os.replace(fresh, stamp)
    except OSError:
        pass
    return dropped
