"""Command-line parsing shared by the benchmark scripts: argparse, with the script's first docstring paragraph
as its --help text, so a wrong option or count is argparse's usage line and exit 2."""

from __future__ import annotations

import argparse


def parser_for(doc: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(description=doc.split("\n\n")[0])


def count_argument(parser: argparse.ArgumentParser, argv: list[str], name: str, default: int, what: str) -> int:
    """An optional positive integer positional argument (`name`), parsed with the rest of `argv`."""
    parser.add_argument(name, nargs="?", type=int, default=default, help=f"{what} (default {default:,})")
    value = getattr(parser.parse_args(argv), name)
    if value < 1:
        parser.error(f"{name} {value}: allowed: a positive integer")
    return value


def calibration_argument(parser: argparse.ArgumentParser) -> None:
    """--calibration FILE: a `commbench calibrate -O` file to evaluate instead of the shipped terms."""
    parser.add_argument("--calibration", metavar="FILE",
                        help="evaluate the terms of this commbench-calibration file (`commbench calibrate -O`, or "
                             "planner_calibration.py -O) instead of the shipped ones (step/terms.py)")


def calibration_of(parser: argparse.ArgumentParser, path: str | None):
    """The Calibration --calibration names (the shipped one without it); a bad file is argparse's one-line error,
    exit 2."""
    from commbench.errors import CommbenchError
    from commbench.planner.calibrate.fit import load_calibration_file
    from commbench.planner.step.terms import CALIBRATED
    if path is None:
        return CALIBRATED
    try:
        return load_calibration_file(path)
    except CommbenchError as exc:
        parser.error(str(exc))
