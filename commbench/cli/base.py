"""The typer app and the one place where domain errors become exit codes."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import typer
from typer.core import TyperCommand, TyperGroup

from commbench.comm.stop_signals import release_stops, signal_name
from commbench.errors import CommbenchError, Interrupted, missing_requirement
from commbench.results.render import stdout_console, styled
from commbench.results.tables import StdoutConsole

def _no_type_beside_flags(params: list) -> list:
    """A flag (--svg, --force, --help) takes no value: typer 0.29 prints `<bool>` in its type column all the same
    (TyperOption.display_type has no flag case), telling a user to type a value it refuses. An empty metavar
    leaves the column blank; options that take a value keep their type."""
    for param in params:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False) and param.metavar is None:
            param.metavar = ""
    return params


class FlagsTakeNoValueCommand(TyperCommand):
    def get_params(self, ctx):  # noqa: ANN001,ANN201 (click's signature)
        return _no_type_beside_flags(super().get_params(ctx))


class FlagsTakeNoValueGroup(TyperGroup):
    def get_params(self, ctx):  # noqa: ANN001,ANN201
        return _no_type_beside_flags(super().get_params(ctx))


app = typer.Typer(
    cls=FlagsTakeNoValueGroup,
    help="commbench: measure MoE/TP/DP collectives (nccl-tests semantics), fit fabric cost models, "
    "and autotune parallel layouts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

def _print_version(value: bool) -> None:
    if value:
        import platform

        from commbench import __version__
        print(f"commbench {__version__} (Python {platform.python_version()})")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_print_version,
                                       help="Print commbench's version and exit.")) -> None:
    """commbench: measure MoE/TP/DP collectives (nccl-tests semantics), fit fabric cost models, and autotune
    parallel layouts. `commbench COMMAND --help` explains each command."""


console = stdout_console()  # COLUMNS, else the terminal, else 200 columns (tables fit it when printed)
# notes and warnings: as wide as stdout's console (COLUMNS, the terminal, else 200), so a CI log's lines stay whole
# and greppable (rich's own Console wraps a redirected stderr at 80 columns; found from outside)
err_console = StdoutConsole(piped_width=200, stderr=True, markup=False)  # strings print as they are; colours: styled()


NESTED_TOO_DEEPLY = ("an input file is nested too deeply to read (over ~1,000 levels of brackets or tables): "
                     "no file commbench reads or writes looks like that")
HUGE_INTEGER = ("an input holds an integer of more than 4,300 digits: no count, size or rank commbench reads is "
                "that large")


def print_json(document: Any, *, default: Callable[[Any], Any] | None = None) -> None:
    """Write one JSON document to stdout as plain `json.dumps(..., indent=2)` and a newline: every command's
    `--json` goes through here, never through rich (whose console colours JSON with ANSI codes when FORCE_COLOR or
    TTY_COMPATIBLE is set, https://rich.readthedocs.io/en/stable/console.html#environment-variables, which no JSON
    parser reads). sys.stdout is looked up at each call (pytest and typer's CliRunner swap it)."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=default) + "\n")
    sys.stdout.flush()


ERROR_LINE = "[bold red]error:[/] {}"   # how an error line looks (emulate restyles its ranks' lines so)


def fail(message: str, exit_code: int = 2) -> typer.Exit:
    """Print one error line on stderr and return the Exit to raise."""
    err_console.print(styled(ERROR_LINE, message), highlight=False, soft_wrap=True)
    return typer.Exit(exit_code)


def profile_older_than_results(path: str):
    """The check every command reading a fitted profile runs (predict and nccl-tuner through predict.resolve_fabric,
    plan, report --fabric, verify-plan): costmodel.profile.profile_age, a ResultsAge whose `stale` lines name each
    results file the profile was fitted from that now holds runs or points it was not fitted on (appended since the
    fit) and whose `unchecked` line names those that cannot be found or read here (so that is unknown), each printed
    as a warning (verify-plan gives profile_age's lines as its flags instead). Empty for a preset or a profile that
    names no results."""
    from commbench.costmodel.profile import profile_age

    age = profile_age(path)
    for line in age.lines:
        err_console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    return age


def renamed(new_value, old_value, *, old: str, new: str):
    """The value of an option given under its old, hidden spelling (kept working with a notice on stderr)."""
    if old_value is None:
        return new_value
    if new_value is not None and new_value != old_value:
        raise fail(f"{old}={old_value!r} and {new}={new_value!r} disagree: {old} is the old spelling of {new}, give {new} only")
    err_console.print(styled("[yellow]note:[/] {} is now {} (the old spelling still works)", old, new), highlight=False)
    return old_value


def command(name: str | None = None, *, on: typer.Typer = app, **kwargs) -> Callable:
    """Register a CLI command (on `app`, or the sub-app `on`); errors become one line on stderr and an exit
    code, here only: a user error (CommbenchError) 2, a failed run (RunFailed) 1, an interrupted one 130."""

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kw):
            from commbench.files import forget_made_folders, remove_made_folders

            forget_made_folders()
            try:
                return guarded(*args, **kw)
            except BaseException as exc:
                succeeded = getattr(exc, "exit_code", 1) == 0 or (isinstance(exc, SystemExit) and not exc.code)
                if not succeeded:   # refused or failed: no output folder it made is left empty
                    remove_made_folders()   # (-O missing/x.conf refused for its input left missing/)
                raise

        def guarded(*args, **kw):
            try:
                release_stops()  # held by the entry point until here: typer would make one a silent exit 130
                return func(*args, **kw)
            except Interrupted as exc:
                err_console.print(str(exc), highlight=False, soft_wrap=True)
                raise typer.Exit(exc.exit_code) from None
            except CommbenchError as exc:
                raise fail(str(exc), exc.exit_code) from None
            except RecursionError:
                raise fail(NESTED_TOO_DEEPLY) from None
            except ValueError as exc:
                if "integer string conversion" not in str(exc):
                    raise
                raise fail(HUGE_INTEGER) from None
            except KeyboardInterrupt as exc:
                # a command that writes as it runs says what it kept (run_job's Interrupted, tune's stages); here
                # nothing is known of what was written, so nothing is claimed ("results written so far are kept"
                # was said where none had been written)
                err_console.print(f"interrupted ({signal_name(exc)}) before the command finished", highlight=False)
                raise typer.Exit(130) from None
            except ModuleNotFoundError as exc:  # `pip install --no-deps` into an environment that lacks one
                message = missing_requirement(exc)
                if message is None:
                    raise
                raise fail(message) from None

        on.command(name, **{"cls": FlagsTakeNoValueCommand, **kwargs})(wrapper)
        return func

    return decorate
