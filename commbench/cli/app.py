"""Entry point: importing a command module registers its command on the app."""

from commbench.cli.base import app

# One line per command module; each registers itself with @command.
from commbench.cli import bench as _bench  # noqa: F401,E402
from commbench.cli import env as _env  # noqa: F401,E402
from commbench.cli import fit as _fit  # noqa: F401,E402
from commbench.cli import predict as _predict  # noqa: F401,E402
from commbench.cli import systems as _systems  # noqa: F401,E402
from commbench.cli import plan as _plan  # noqa: F401,E402
from commbench.cli import sweep as _sweep  # noqa: F401,E402
from commbench.cli import compare as _compare  # noqa: F401,E402
from commbench.cli import importer as _importer  # noqa: F401,E402
from commbench.cli import report as _report  # noqa: F401,E402
from commbench.cli import emulate as _emulate  # noqa: F401,E402
from commbench.cli import tune as _tune  # noqa: F401,E402
from commbench.cli import verify_plan as _verify_plan  # noqa: F401,E402
from commbench.cli import calibrate as _calibrate  # noqa: F401,E402
from commbench.cli import nccl_tuner as _nccl_tuner  # noqa: F401,E402


def _given_value(opts, argv: list[str]) -> str | None:
    """What the user typed for an option (`--x v` or `--x=v`), to show it in the error: its last occurrence, the one
    click reads (`--gpus 256 --gpus abc` is refused for 'abc')."""
    for i, token in reversed(list(enumerate(argv))):
        for opt in opts:
            if token == opt and i + 1 < len(argv):
                return argv[i + 1]
            if token.startswith(opt + "="):
                return token[len(opt) + 1:]
    return None


def main() -> None:
    """Run the CLI; a usage error (unknown option, a value of the wrong type) is one line, exit 2."""
    from commbench.comm.rendezvous import exit_if_abandoned

    try:
        _run()
    except SystemExit as exc:
        exit_if_abandoned(exc.code if isinstance(exc.code, int) else int(exc.code is not None))
        raise


def _run() -> None:
    import sys

    import typer

    from commbench.cli.base import NESTED_TOO_DEEPLY, err_console
    from commbench.comm.stop_signals import release_stops, signal_name

    try:
        command = typer.main.get_command(app)
        code = command.main(prog_name="commbench", standalone_mode=False)
        release_stops()  # no command ran (--help, --version): a stop held since the start ends here
    except KeyboardInterrupt as exc:
        err_console.print(f"interrupted ({signal_name(exc)})", highlight=False)
        sys.exit(130)
    except RecursionError:
        err_console.print(f"error: {NESTED_TOO_DEEPLY}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except Exception as exc:  # click's UsageError family (typer bundles click; duck-typed, not imported)
        if not (hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)):
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `commbench` (or a group): the help was printed
            sys.exit(0)
        where = getattr(getattr(exc, "ctx", None), "command_path", "commbench")
        given = _given_value(getattr(getattr(exc, "param", None), "opts", ()), sys.argv[1:])
        got = f" (got {given!r})" if given is not None and repr(given) not in exc.format_message() else ""
        err_console.print(f"error: {exc.format_message().rstrip('.')}{got}; see {where} --help", highlight=False,
                          soft_wrap=True)
        sys.exit(exc.exit_code)
    code = code if isinstance(code, int) else 0
    from commbench.comm.stop_signals import exit_on_stop
    exit_on_stop(code)   # a Ctrl-C during the teardown that follows is no interrupted run
    sys.exit(code)
