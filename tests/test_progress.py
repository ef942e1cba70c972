"""``geo_gym.cli.progress``: a tqdm bar on a terminal, plain periodic lines in logs."""

from __future__ import annotations

import io
import itertools

import pytest

from geo_gym import cli


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_not_a_tty_prints_a_line_every_tenth_and_yields_every_item():
    out = io.StringIO()
    items = list(cli.progress(range(100), desc="main", stream=out))
    assert items == list(range(100))
    lines = out.getvalue().splitlines()
    assert len(lines) == 10  # 10/100, 20/100, ..., 100/100: no redrawn bar, no \r
    assert "\r" not in out.getvalue()
    assert lines[3].startswith("main: 40/100 runs, ") and lines[3].endswith(" s")
    assert lines[-1].startswith("main: 100/100 runs, ")


def test_not_a_tty_small_totals_and_units():
    out = io.StringIO()
    assert list(cli.progress({"a": 1, "b": 2, "c": 3}.items(), desc="experiments", unit="experiments",
                             stream=out)) == [("a", 1), ("b", 2), ("c", 3)]
    assert out.getvalue().splitlines() == [f"experiments: {i}/3 experiments, 0 s" for i in (1, 2, 3)]


def test_not_a_tty_without_a_length_prints_by_time_and_at_the_end():
    out = io.StringIO()
    assert sum(cli.progress((i for i in range(7)), desc="gen", stream=out, every_s=3600)) == 21
    assert out.getvalue().splitlines() == ["gen: 7 runs, 0 s"]
    out = io.StringIO()
    list(cli.progress(iter(range(3)), desc="gen", stream=out, every_s=0))  # every item: 0 s apart
    assert out.getvalue().splitlines()[:3] == ["gen: 1 runs, 0 s", "gen: 2 runs, 0 s", "gen: 3 runs, 0 s"]


def test_not_a_tty_prints_every_every_s_seconds(monkeypatch):
    clock = itertools.count(0.0, 20.0)  # 20 s per call of time.monotonic
    monkeypatch.setattr("time.monotonic", lambda: next(clock))
    out = io.StringIO()
    list(cli.progress(range(1000), desc="slow", stream=out, every_s=30))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("slow: 2/1000 runs, ")  # 30 s passed long before the first 10%
    assert len(lines) > 100


def test_empty_iterable_prints_nothing_when_not_a_tty():
    out = io.StringIO()
    assert list(cli.progress([], desc="none", stream=out)) == []
    assert out.getvalue() == ""


def test_a_tty_gets_tqdm():
    tqdm = pytest.importorskip("tqdm").tqdm
    out = Tty()
    bar = cli.progress(range(5), desc="main", stream=out)
    assert isinstance(bar, tqdm)
    assert list(bar) == list(range(5))
    assert "main" in out.getvalue()
