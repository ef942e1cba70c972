"""Argument types the command-line scripts share (``argparse`` ``type=``): a bad value is an
argparse error naming the option, not a traceback from deep inside a run."""

from __future__ import annotations

import argparse
import json
import math


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The scripts' --help: their docstring as written, and every option's default."""


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def finite_non_negative(text: str) -> float:
    """A finite number >= 0 (nan and inf are errors)."""
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


cost_weight = finite_non_negative  # hours of JCT per dollar in the objective


def finite_positive(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def json_object(text: str) -> dict:
    """A JSON object (scenario knobs and the like); bad JSON or another JSON type is an error."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err}): {text}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def uncertainty(text: str):
    """A preset name (perfect | realistic | schedmate) or a JSON object of UncertaintyConfig
    fields, optionally with "preset" as the base (``geo_gym.env.as_uncertainty``)."""
    return json.loads(text) if text.startswith("{") else text


def start_rule(text: str) -> str:
    """A start rule (``geo_gym.start_rule``): memory | any | fraction:X | kstar | request."""
    from geo_gym.start_rule import StartRule

    try:
        return str(StartRule.parse(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def autoreset_mode(text: str):
    """A gymnasium ``AutoresetMode`` by its value: NextStep | SameStep | Disabled."""
    from gymnasium.vector import AutoresetMode

    try:
        return AutoresetMode(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be one of {', '.join(m.value for m in AutoresetMode)}, got {text!r}"
        ) from None


def progress(iterable, desc: str, total: int | None = None, *, unit: str = "runs", stream=None,
             every_s: float = 30.0, leave: bool = True):
    """Progress over ``iterable``: a tqdm bar when ``stream`` (default: stderr) is a terminal;
    otherwise (a log file, CI, a pipe) the items, with a plain line such as
    ``main: 40/100 runs, 3 s`` every ~10% of ``total`` or every ``every_s`` seconds, and one at
    the end, so that logs show progress without tqdm's redrawn bars.

    ``total`` defaults to ``len(iterable)`` where it has one; without one the lines count items
    and are written every ``every_s`` seconds only."""
    import sys

    stream = sys.stderr if stream is None else stream
    if total is None:
        try:
            total = len(iterable)
        except TypeError:
            total = None
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        from tqdm import tqdm

        return tqdm(iterable, desc=desc, total=total, unit=unit.rstrip("s") or unit, leave=leave,
                    file=stream)
    return _plain_progress(iterable, desc, total, unit, stream, every_s)


def _plain_progress(iterable, desc, total, unit, stream, every_s):
    import time

    start = last = time.monotonic()
    step = max(1, math.ceil(total / 10)) if total else None
    done = 0

    def line() -> None:
        count = f"{done}/{total}" if total is not None else f"{done}"
        print(f"{desc}: {count} {unit}, {time.monotonic() - start:.0f} s", file=stream, flush=True)

    for item in iterable:
        yield item
        done += 1
        now = time.monotonic()
        if (step is not None and (done % step == 0 or done == total)) or now - last >= every_s:
            line()
            last = now
    if total is None or done != total:
        line()  # the end (a 10% line already said it when done == total)
