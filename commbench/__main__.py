"""`python -m commbench` and the `commbench` script: stop signals are caught before the CLI's imports
(a second or more) and held until the command starts, so a run stopped at any moment says so in one
line and exits 130."""

import sys


def _prepare_streams() -> None:
    if sys.stdout is None:  # started with >&-
        sys.stderr.write("error: standard output is closed (>&-): commbench prints its results there; "
                         "redirect it to a file or /dev/null instead\n")
        sys.exit(2)
    for stream in (sys.stdout, sys.stderr):  # PYTHONIOENCODING=ascii: 'µs' prints as '?s', not a traceback
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def main() -> None:
    try:  # a Ctrl-C before hold_stops() is Python's own KeyboardInterrupt
        from commbench.comm.stop_signals import hold_stops, raise_held_stop

        hold_stops()
        _prepare_streams()
        from commbench.cli.app import main as run_cli

        raise_held_stop()
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"interrupted ({str(exc) or 'SIGINT'}) while starting: nothing was run\n")
        sys.exit(130)
    except ModuleNotFoundError as exc:  # a --no-deps install into an environment that lacks a requirement
        from commbench.errors import missing_requirement

        message = missing_requirement(exc)
        if message is None:
            raise
        sys.stderr.write(f"error: {message}\n")
        sys.exit(2)
    run_cli()


if __name__ == "__main__":  # spawned ranks re-import this module as __mp_main__: they must not rerun the CLI
    main()
