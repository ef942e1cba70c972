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


def cost_weight(text: str) -> float:
    """Hours of JCT per dollar in the objective: a finite number >= 0 (nan and inf are errors)."""
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
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
