"""User-facing errors: one line naming the field, the value and what is allowed; exit code 2."""

import sys
from pathlib import Path

# pyproject.toml [project] dependencies: what a `pip install --no-deps` must bring itself
REQUIREMENTS = {"torch": "torch>=2.3", "numpy": "numpy>=1.24", "rich": "rich>=13", "typer": "typer>=0.12",
                "tomli": "tomli>=2 (on Python < 3.11)"}


class CommbenchError(Exception):
    """A user error (bad option, bad file, unavailable backend). The CLI prints it as one line, exit 2."""

    exit_code = 2


class DataCheckFailed(CommbenchError):
    """Results whose data check failed (#wrong > 0) given to a command that would build on them (fit, tune --results):
    the measurement failed, the input was read fine. Exit code 1."""

    exit_code = 1


class StartupFailed(CommbenchError):
    """A rank's start-up exchange with its peers (topology, the run header) failed or timed out, most often because a
    peer died or stopped: the run failed (exit 1), the input was fine; one line, no traceback (the launcher names the
    peer that hung where it can see it)."""

    exit_code = 1


class ResultsNotWritten(CommbenchError):
    """The disk refused a results record mid-run (full, a file size limit): the run failed (exit 1), the input was
    fine; the records before it are intact and the point it was writing is not recorded failed (it was measured and
    lost: a sweep's --resume measures it again)."""

    exit_code = 1


class Interrupted(CommbenchError):
    """Stopped by SIGINT/SIGTERM/SIGHUP; the message says what was kept, `signal` names the signal. Exit code 130."""

    exit_code = 130

    def __init__(self, message: str, *, signal: str = "SIGINT") -> None:
        super().__init__(message)
        self.signal = signal


def invalid(field: str, value: object, allowed: str) -> CommbenchError:
    """Build the standard one-line error: `--field VALUE: allowed ...`. The parts stay on the error (field,
    value, allowed) so a command can name its own option for a library's argument (`as_option`)."""
    error = CommbenchError(f"{field}={value!r} is invalid: {allowed}")
    error.field, error.value, error.allowed = field, value, allowed
    return error


def refuse_empty(value: object, option: str, what: str) -> None:
    """A value given as empty (or blank) text is refused in one line, never read as if the option were left out: an
    unset shell variable (`--name "$NAME"`) would otherwise pass unseen (files.refuse_empty_path: the same for paths)."""
    if not str(value).strip():
        raise CommbenchError(f"{option}={str(value)!r} is empty: give {what} (an unset shell variable?)")


def as_option(error: CommbenchError, field: str, option: str) -> CommbenchError:
    """`error` naming the command-line `option` where it names the library argument `field`; else as it is."""
    if getattr(error, "field", None) != field:
        return error
    return invalid(option, error.value, error.allowed)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none), for one-line errors."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def read_user_file(path: str | Path, what: str, *, errors: str = "strict", max_bytes: int | None = None) -> str:
    """The text of a file the user named, or one line saying `<what> '<path>' cannot be read: <why>`
    (missing, a folder, binary, not UTF-8, or beyond `max_bytes`: a weights file or /dev/zero named where a small
    text file belongs is refused, not read until memory runs out)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    except OSError as exc:
        raise CommbenchError(f"{what} {str(path)!r} cannot be read: {exc.strerror}") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise CommbenchError(f"{what} {str(path)!r} is over {max_bytes >> 20} MiB: not the small text file it names "
                             "(a weights file?)")
    return decode_user_text(raw, path, what, errors=errors)


def toml_problem(text: str, exc: Exception) -> str:
    """Why a user's TOML did not parse: tomllib's message, or, for a file saved 'UTF-8 with BOM' (the byte-order mark
    U+FEFF that some Windows editors write first, which TOML 1.0 and tomllib refuse as a stray character at line 1,
    column 1), what to do about it."""
    if text.startswith("\ufeff"):
        return "it starts with a byte-order mark (U+FEFF, an editor's 'UTF-8 with BOM'): save it as UTF-8 without BOM"
    return str(exc)


def decode_user_text(raw: bytes, path: str | Path, what: str, *, errors: str = "strict",
                     first_line_number: int = 1) -> str:
    """`raw` as UTF-8 text; a NUL byte (binary data) or a byte that is not UTF-8 is one line naming the line."""
    nul = raw.find(b"\0")
    if nul >= 0:
        line = first_line_number + raw.count(b"\n", 0, nul)
        raise CommbenchError(f"{what} {str(path)!r} is binary, not text (a NUL byte on line {line})")
    try:
        return raw.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        line = first_line_number + raw.count(b"\n", 0, exc.start)
        raise CommbenchError(f"{what} {str(path)!r} is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line})") from None


def missing_requirement(exc: ModuleNotFoundError) -> str | None:
    """The one line for a core requirement this Python lacks (a --no-deps install); None for another module."""
    module = (exc.name or "").split(".")[0]
    if module not in REQUIREMENTS:
        return None
    return (f"{module} is not installed in this Python ({sys.executable}): commbench needs {REQUIREMENTS[module]}; "
            "install it there (keep the torch your training uses) and run again")
