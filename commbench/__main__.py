"""`python -m commbench` and the `commbench` script: stop signals are caught before the CLI's imports
(a second or more), so a run stopped at any moment says so in one line and exits 130."""


def main() -> None:
    import signal
    import sys

    from commbench.comm.stop_signals import STOP_SIGNALS, raise_stop_signal

    for signum in STOP_SIGNALS:
        signal.signal(signum, raise_stop_signal)
    if sys.stdout is None:  # started with >&-
        sys.stderr.write("error: standard output is closed (>&-): commbench prints its results there; "
                         "redirect it to a file or /dev/null instead\n")
        sys.exit(2)
    for stream in (sys.stdout, sys.stderr):  # PYTHONIOENCODING=ascii: 'µs' prints as '?s', not a traceback
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    try:
        from commbench.cli.app import main as run_cli
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"interrupted ({exc or 'SIGINT'}) while starting: nothing was run\n")
        sys.exit(130)
    run_cli()


if __name__ == "__main__":  # spawned ranks re-import this module as __mp_main__: they must not rerun the CLI
    main()
