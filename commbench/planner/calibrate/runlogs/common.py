"""What the Megatron-LM and TorchTitan log readers share: ANSI colour codes stripped, a logged value read as
Python, a count or a positive figure checked (one line naming the field and value), and a last line cut off
mid-write found (a last line without a line break: its figure may be cut short)."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from commbench.errors import CommbenchError

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A launcher's per-line rank label: torchrun --tee's "[default0]:" (its --role; "[rank0]:" with --role rank, as
# torchtitan's run_train.sh), OpenMPI mpirun --tag-output's "[1,7]<stdout>:" / "[1,7]<stderr>:" ([jobid,rank], the
# stream named: unambiguous) and srun -l's "0: "; the rank is group 1 or 2
LAUNCHER_LABEL = re.compile(r"^\s*(?:\[(?:[A-Za-z_]*|\d+,(?=\d+\]<std(?:out|err)>:))(\d+)\](?:<std(?:out|err)>)?:"
                            r"|(\d+):(?!\d))\s?")   # not a clock's "10:00:01"


def _value(text: str) -> Any:
    text = text.strip()
    if text in ("None", "none", ""):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


MAX_LOG_COUNT = 10_000_000  # any GPU count, batch, length or parallel size beyond this is a damaged log


def _whole(log: str, key: str, value: Any, minimum: int = 1) -> int:
    """A count from a log (`log` names it: "Megatron-LM log 'x'"), or one line naming the field and value."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdecimal() and len(value.strip()) < 20:
        number = int(value.strip())
    if number is None or not minimum <= number <= MAX_LOG_COUNT:
        raise CommbenchError(f"{log}: {key}={value!r} is invalid: a whole number from {minimum} to {MAX_LOG_COUNT:,}")
    return number


def _positive(log: str, key: str, text: str) -> float:
    """A logged time or rate: a finite number > 0, or one line naming the field and value."""
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        number = float("nan")
    if not 0 < number < 1e30:
        raise CommbenchError(f"{log}: {key}={text!r} is invalid: a positive finite number")
    return number


def _finite(text: str) -> bool:
    """Whether a logged loss or gradient norm is a finite number ('nan', 'NAN', 'inf' are not): a step whose loss
    diverged trained nothing, and its speed is not the run's (a NaN forward can be faster or slower)."""
    try:
        return math.isfinite(float(text.replace(",", "")))
    except ValueError:
        return False


def cut_last_line(text: str) -> int | None:
    """The index (in text.splitlines()) of a last line cut off mid-write: a log whose writer stopped (a kill, a full
    disk, a log read while the run writes it) ends without a line break, and its last figure may be cut short
    ("elapsed time per iteration (ms): 10" of 10402.9). None when the text ends with a line break."""
    if not text or text.endswith(("\n", "\r")):
        return None
    return len(text.splitlines()) - 1


CUT_NOTE = "last line cut off mid-write (no line break after it): its figure left out"
