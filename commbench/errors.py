"""User-facing errors: one line naming the field, the value and what is allowed; exit code 2."""


class CommbenchError(Exception):
    """A user error (bad option, bad file, unavailable backend). The CLI prints it as one line, exit 2."""

    exit_code = 2


def invalid(field: str, value: object, allowed: str) -> CommbenchError:
    """Build the standard one-line error: `--field VALUE: allowed ...`."""
    return CommbenchError(f"{field}={value!r} is invalid: {allowed}")
