"""geo_gym drops numba's cached kernels when any of its sources changed: numba checks only the
cached function's own file, so an edit of a callee's module would leave a caller's kernel
running the callee's old code."""

from __future__ import annotations

import os
import time
from pathlib import Path

from numba.core import config

import geo_gym
from geo_gym import kernel_cache


def _package(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "pkg"
    (root / "__pycache__").mkdir(parents=True)
    (root / "rules.py").write_text("def rule():\n    return 1\n")
    (root / "decide.py").write_text("def decide():\n    return 2\n")
    return root, root / "__pycache__"


def _cached(cache: Path, name: str = "decide.decide-1.py311") -> list[Path]:
    files = [cache / f"{name}.nbi", cache / f"{name}.nbc"]
    old = time.time() - 60
    for f in files:
        f.write_bytes(b"kernel")
        os.utime(f, (old, old))
    return files


def test_an_edit_of_any_source_drops_every_cached_kernel_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CACHE_DIR", "")
    root, cache = _package(tmp_path)
    other = cache / "decide.cpython-311.pyc"
    other.write_bytes(b"bytecode")
    kernels = _cached(cache)
    assert kernel_cache.drop_if_stale(root)  # no stamp yet: nothing vouches for the cache
    assert not any(f.exists() for f in kernels) and other.exists()
    kernels = _cached(cache)
    assert not kernel_cache.drop_if_stale(root)  # same sources: the cache stays
    assert all(f.exists() for f in kernels)
    (root / "rules.py").write_text("def rule():\n    return 3\n")  # the callee's module only
    assert kernel_cache.drop_if_stale(root)
    assert not any(f.exists() for f in kernels)


def test_kernels_written_after_the_check_began_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CACHE_DIR", "")
    root, cache = _package(tmp_path)
    fresh = cache / "decide.decide-1.py311.nbi"
    fresh.write_bytes(b"kernel")
    later = time.time() + 60  # as if another process compiled it from these sources meanwhile
    os.utime(fresh, (later, later))
    kernel_cache.drop_if_stale(root)
    assert fresh.exists()


def test_numba_cache_dir_is_where_the_kernels_are_dropped(tmp_path, monkeypatch):
    root, _ = _package(tmp_path)
    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "user-cache"))
    (cache,) = kernel_cache.cache_dirs(root)
    assert cache.parent == tmp_path / "user-cache" and cache.name.startswith("pkg_")
    cache.mkdir(parents=True)
    kernels = _cached(cache)
    assert kernel_cache.drop_if_stale(root) and not any(f.exists() for f in kernels)
    assert (cache / kernel_cache.STAMP).read_text() == kernel_cache.sources_digest(root)


def test_importing_geo_gym_stamps_its_own_sources():
    root = Path(geo_gym.__file__).parent
    stamp = kernel_cache.cache_dirs(root)[0] / kernel_cache.STAMP
    assert stamp.read_text() == kernel_cache.sources_digest(root)
