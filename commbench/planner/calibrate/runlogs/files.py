"""A RUNS file: a JSON list of runs, or one Megatron-LM or TorchTitan training log (read_runs picks by content)."""

from __future__ import annotations

import json
import re
from typing import Any

from commbench.errors import CommbenchError, read_user_file
from commbench.planner.calibrate.runlogs.megatron import parse_megatron_log
from commbench.planner.calibrate.runlogs.torchtitan import parse_torchtitan_log


def _one_value_per_key(pairs: list[tuple[str, Any]], path: str) -> dict[str, Any]:
    """A JSON object of a runs file; a key given twice is refused (JSON would keep the last without a word)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CommbenchError(f"runs file {path!r}: field {key!r} given twice in one object ({out[key]!r} and "
                                 f"{value!r}): give it once")
        out[key] = value
    return out


def runs_file_text(path: str) -> str:
    """A RUNS file's text, without the UTF-8 byte-order mark some editors and exports put first (it would hide
    the JSON list's "[" and JSON refuses it)."""
    return read_user_file(path, "runs file", errors="replace").removeprefix("\ufeff")


# A JSON list opens with a value; a log line that opens with a bracket is a prefix, "[rank0]:[titan] ..."
_JSON_LIST_START = re.compile(r'\[\s*(?:[{\["\]-]|\d|true\b|false\b|null\b|$)')


# What makes a file a training log: a line shaped as the framework prints it, not a word anywhere ("tps:" is in every
# "https:" of a JSON runs file's sources). Megatron-LM: _print_args' banner, "------------------------ arguments
# ------------------------" (megatron/training/arguments.py), or training_log's " elapsed time per iteration (ms):
# {:.1f} |" (megatron/training/training.py). TorchTitan: the metrics line "step: {step:2}  loss: ...  tps:
# {round(tps):,}  ..." (components/metrics.py log; its colours are stripped first), or the config the trainer prints
# at start, "Running with configs: {json}" (0.3.0 trainer.py) / "Running with args: {dict}" (older).
_MEGATRON_LOG = re.compile(r"^[^\n]*?-{3,} arguments -{3,}[ \t]*$|\belapsed time per iteration \(ms\):[ \t]*[\d.]",
                           re.MULTILINE)
_TITAN_LOG = re.compile(r"\bstep:[ \t]*\d+[ \t][^\n]*?\btps:[ \t]*[\d,.]|\bRunning with (?:args|configs):[ \t]*\{")


def _json_error(exc: json.JSONDecodeError) -> str:
    """json's message and line, read as one phrase ("Unterminated string starting at line 3", not "... at at")."""
    return f"{exc.msg.removesuffix(' at')} at line {exc.lineno}"


def _log_kind(text: str) -> str | None:
    """"megatron" or "torchtitan" where a line of `text` is shaped as that framework's log prints one, else None."""
    from commbench.planner.calibrate.runlogs.common import ANSI

    text = ANSI.sub("", text)
    return "megatron" if _MEGATRON_LOG.search(text) else "torchtitan" if _TITAN_LOG.search(text) else None


def is_json_list(text: str) -> bool:
    """Whether a RUNS file's text is a JSON list (of runs), not a training log whose lines open with a bracket
    ("[rank0]:[titan] ...", "[2026-01-10 10:00:00] ..."): broken JSON is JSON unless it reads as a log."""
    if not _JSON_LIST_START.match(text.lstrip()):
        return False
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return _log_kind(text) is None
    return True


def read_runs(path: str, *, model: str | None, gpu: str | None, num_gpus: int | None = None) -> list[dict[str, Any]]:
    """Rows from one RUNS file: a JSON list, a Megatron-LM log or a TorchTitan log."""
    return read_runs_noted(path, model=model, gpu=gpu, num_gpus=num_gpus)[0]


def read_runs_noted(path: str, *, model: str | None, gpu: str | None,
                    num_gpus: int | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """read_runs' rows, and for a log what its measured figure is (and a crash it ends in), what it read but did not count (lines of CUDA-graph warm-up and capture,
    of skipped or NaN iterations, a last line cut off mid-write) and where a row is priced as another setting than
    it ran (priced_as: a recompute module set; precision_as: an FP8 recipe): one line each, for calibrate to print."""
    rows = _read_rows(path, model=model, gpu=gpu, num_gpus=num_gpus)
    notes = []
    for row in rows:   # what the log read but did not count, then where it is priced as another setting than it ran
        if row.get("source") == path and str(row.get("notes", "")).startswith(("Megatron-LM log", "TorchTitan log")):
            notes += [row.pop(key) for key in ("measured", "crashed", "split", "left_out", "priced_as",
                                                "precision_as") if key in row]
    return rows, [n for n in notes if n]


def _read_rows(path: str, *, model: str | None, gpu: str | None, num_gpus: int | None) -> list[dict[str, Any]]:
    text = runs_file_text(path)
    stripped = text.lstrip()
    if stripped.startswith("{"):  # JSON, but not the list of runs (it was called a TorchTitan log)
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            if _log_kind(text) is None:   # no log line: a JSON file cut or mistyped, not "neither JSON nor a log"
                raise CommbenchError(f"runs file {path!r}: not valid JSON ({_json_error(exc)})") from None
        except RecursionError:
            raise CommbenchError(f"runs file {path!r}: not valid JSON (nested too deeply)") from None
        else:
            raise CommbenchError(f"runs file {path!r}: a JSON object; a runs file is a JSON list of objects shaped "
                                 "like calibration-runs.json")
    if is_json_list(stripped):
        try:
            rows = json.loads(text, object_pairs_hook=lambda pairs: _one_value_per_key(pairs, path))
        except json.JSONDecodeError as exc:
            raise CommbenchError(f"runs file {path!r}: not valid JSON ({_json_error(exc)})") from None
        if not all(isinstance(r, dict) for r in rows):
            raise CommbenchError(f"runs file {path!r}: a JSON list of objects shaped like calibration-runs.json")
        return rows
    kind = _log_kind(text)
    if kind is None:
        raise CommbenchError(f"runs file {path!r}: neither a JSON list of runs, a Megatron-LM log "
                             "(arguments block + 'elapsed time per iteration') nor a TorchTitan log ('tps:')")
    if not model or not gpu:
        raise CommbenchError(f"runs file {path!r} is a {kind} log: give --model and --system for it")
    if kind == "megatron":
        return [parse_megatron_log(text, source=path, model=model, gpu=gpu, num_gpus=num_gpus)]
    return [parse_torchtitan_log(text, source=path, model=model, gpu=gpu, num_gpus=num_gpus)]
