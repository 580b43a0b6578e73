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
