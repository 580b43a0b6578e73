"""User-facing errors: one line naming the field, the value and what is allowed; exit code 2."""

from pathlib import Path


class CommbenchError(Exception):
    """A user error (bad option, bad file, unavailable backend). The CLI prints it as one line, exit 2."""

    exit_code = 2


class Interrupted(CommbenchError):
    """Stopped by SIGINT/SIGTERM/SIGHUP; the message says what was kept. Exit code 130."""

    exit_code = 130


def invalid(field: str, value: object, allowed: str) -> CommbenchError:
    """Build the standard one-line error: `--field VALUE: allowed ...`."""
    return CommbenchError(f"{field}={value!r} is invalid: {allowed}")


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none), for one-line errors."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def read_user_file(path: str | Path, what: str, *, errors: str = "strict") -> str:
    """The text of a file the user named, or one line saying `<what> '<path>' cannot be read: <why>`."""
    try:
        return Path(path).read_text(encoding="utf-8", errors=errors)
    except OSError as exc:
        raise CommbenchError(f"{what} {str(path)!r} cannot be read: {exc.strerror}") from None
