"""Argument types the command-line scripts share (``argparse`` ``type=``): a bad value is an
argparse error naming the option, not a traceback from deep inside a run."""

from __future__ import annotations

import argparse
import json
import math
import re


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
    fields, optionally with "preset" as the base (``geo_gym.env.as_uncertainty``); checked as a
    whole, with the per-field flags, by ``uncertainty_setting``."""
    return json_object(text) if text.lstrip().startswith("{") else text


def boolean(text: str) -> bool:
    """true | false (also yes/no, on/off, 1/0), any case."""
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {text}")


UNCERTAINTY_FLAG = "--uncertainty"
# one argparse type per UncertaintyConfig field type; ranges are the config's to check
_FIELD_TYPES = {bool: boolean, int: int, float: float, str: str, dict: json_object}


def add_uncertainty_flags(parser: argparse.ArgumentParser, default: str) -> None:
    """``--uncertainty PRESET|JSON`` and one typed flag per ``UncertaintyConfig`` field,
    ``--uncertainty.<field> VALUE``, each overriding that field of the preset (generated from
    the dataclass: a new field gets its flag). Read them back with ``uncertainty_setting``."""
    import dataclasses
    import typing

    from geo_gym.uncertainty.config import PRESETS, UncertaintyConfig

    group = parser.add_argument_group(
        "uncertainty (geo_gym.uncertainty.config.UncertaintyConfig): a preset, and any field "
        f"overridden with {UNCERTAINTY_FLAG}.<field>")
    group.add_argument(UNCERTAINTY_FLAG, type=uncertainty, default=default,
                       help=f"a preset ({' | '.join(PRESETS)}) or a JSON object of fields, e.g. "
                            '\'{"preset": "realistic", "predictor": "noisy"}\'')
    hints = typing.get_type_hints(UncertaintyConfig)
    presets = {name: UncertaintyConfig.preset(name) for name in PRESETS}
    for f in dataclasses.fields(UncertaintyConfig):
        kind = typing.get_origin(hints[f.name]) or hints[f.name]
        values = {name: _shown(getattr(config, f.name)) for name, config in presets.items()}
        shown = (f"every preset: {values['perfect']}" if len(set(values.values())) == 1
                 else "presets: " + ", ".join(f"{name} {value}" for name, value in values.items()))
        group.add_argument(f"{UNCERTAINTY_FLAG}.{f.name}", dest=f"uncertainty.{f.name}", type=_FIELD_TYPES[kind],
                           default=argparse.SUPPRESS, metavar=kind.__name__.upper(), help=shown)


def _shown(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


def uncertainty_setting(args: argparse.Namespace) -> str | dict:
    """The uncertainty setting of ``add_uncertainty_flags``' flags: the ``--uncertainty`` value
    alone (a preset name or a dict) when no per-field flag is given, else a dict of the fields,
    with "preset" as the base and the per-field flags over the JSON's fields. The per-field
    attributes leave ``args``. ValueError, in one line naming the flag, when the whole is not a
    valid UncertaintyConfig (``geo_gym.env.as_uncertainty``)."""
    prefix = "uncertainty."
    typed = {key[len(prefix):]: value for key, value in vars(args).items() if key.startswith(prefix)}
    for key in typed:
        delattr(args, prefix + key)
    import dataclasses

    from geo_gym.uncertainty.config import UncertaintyConfig

    setting = args.uncertainty
    known = {f.name for f in dataclasses.fields(UncertaintyConfig)}
    unknown = sorted(set(setting) - known - {"preset"}) if isinstance(setting, dict) else []
    if unknown:
        raise ValueError(f"{UNCERTAINTY_FLAG}: UncertaintyConfig has no field {unknown[0]!r} "
                         f"(its fields: {', '.join(sorted(known))})")
    if typed:
        base = dict(setting) if isinstance(setting, dict) else {"preset": setting}
        setting = {**base, **typed}
    from geo_gym.env import as_uncertainty

    try:
        as_uncertainty(setting)
    except (TypeError, ValueError) as err:
        text = " ".join(str(err).split())
        named = re.sub(r"UncertaintyConfig\.(\w+): ",
                       lambda m: f"{UNCERTAINTY_FLAG}.{m[1]}: " if m[1] in typed else m[0], text)
        raise ValueError(named if named != text else f"{UNCERTAINTY_FLAG}: {text}") from None
    return setting


def parse_uncertainty(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | dict:
    """``uncertainty_setting`` with a bad value answered as an argparse error (one line)."""
    try:
        return uncertainty_setting(args)
    except ValueError as err:
        parser.error(str(err))


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
