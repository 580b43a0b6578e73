"""`commbench emulate --racks K --ranks-per-rack R --scale-out-rate 1gbit -- <commbench command>`."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Annotated, Callable, List, Optional

import typer

from commbench.cli.base import ERROR_LINE, command, console, err_console
from commbench.results.emulated import rate_text
from commbench.results.render import styled
from commbench.emulate.fabric import Fabric, FabricSpec, tbf_burst_bytes
from commbench.emulate.ranks import emulated_description, run_ranks
from commbench.comm.stop_signals import raise_stop_signal, signal_name
from commbench.errors import CommbenchError, Interrupted, invalid
from commbench.units import parse_rate_bits_per_s

DEFAULT_RATE = "1gbit"   # --scale-out-rate of 2 racks or more when not given
# what emulate runs as every rank: the commands that start ranks, and env (what each rank sees of the launch). Any
# other (fit, plan, report, ...) would run once per rank, and a nested emulate would start a fabric per rank
# (racks x ranks_per_rack squared gloo ranks, past the local rank limit)
RANK_COMMANDS = ("bench", "sweep", "tune", "verify-plan", "env")


# A rank's stderr is a pipe, so its rich console prints 'error: ...' without the colour the same line has from
# this process: the lines that start so are printed again here, styled as base.fail (and the notes) style them.
RANK_LINE_STYLES = {"error: ": ERROR_LINE, "warning: ": "[yellow]warning:[/] {}", "note: ": "[yellow]note:[/] {}"}


def rank_line_printer(out) -> Callable[[str], bool]:
    """A function printing a rank's stderr line on the console `out` as this process prints that kind of line
    (True), or doing nothing for a line of another kind (False)."""
    def restyle(line: str) -> bool:
        for prefix, template in RANK_LINE_STYLES.items():
            if line.startswith(prefix):
                out.print(styled(template, line[len(prefix):].rstrip("\r\n")), highlight=False, soft_wrap=True)
                return True
        return False
    return restyle


def _check_nproc(command_args: list[str], racks: int, ranks_per_rack: int) -> None:
    """The command's --nproc, where it is not the fabric's rank count, refused in one line before the fabric is
    made: each rank refused it alone, one line per rank naming the torchrun launch emulate starts."""
    for i, arg in enumerate(command_args):
        if arg == "--":
            return
        value = arg.split("=", 1)[1] if arg.startswith("--nproc=") else (
            command_args[i + 1] if arg == "--nproc" and i + 1 < len(command_args) else None)
        if value is not None and value.strip().isdecimal() and int(value) != racks * ranks_per_rack:
            raise CommbenchError(f"--nproc={value.strip()} conflicts with the emulated fabric's {racks * ranks_per_rack} "
                                 f"ranks (--racks {racks} x --ranks-per-rack {ranks_per_rack}): omit --nproc under "
                                 "commbench emulate, which starts one rank per --ranks-per-rack in each rack")


def writes_document(command_args: list[str]) -> bool:
    """Whether the command run as every rank prints a machine-readable document on stdout (`--json`: every command
    emulate runs that has one, docs/json-output.md): emulate's own lines then go to stderr, as every notice does there,
    and the document's `emulated` field says the fabric was emulated. Otherwise they stay on stdout, where `import
    nccl-tests` of a tee'd `bench --format nccl-tests` log reads the banner."""
    return "--json" in command_args[:command_args.index("--")] if "--" in command_args else "--json" in command_args


def _commands() -> set[str]:
    """The names of commbench's commands."""
    from commbench.cli.app import app

    return {c.name for c in app.registered_commands if c.name}


@command("emulate", help="Run a commbench command on an emulated multi-rack fabric (network namespaces; needs root).",
         context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def emulate(
    args: Annotated[Optional[List[str]], typer.Argument(help="The commbench command after '--', run as every rank: bench, sweep, tune, verify-plan or env, e.g. -- bench grad_reduce_scatter -b 64M -e 64M")] = None,
    racks: Annotated[int, typer.Option("--racks", help="Racks (one network namespace each).")] = 2,
    ranks_per_rack: Annotated[int, typer.Option("--ranks-per-rack", help="Ranks per rack (talking over the rack's loopback).")] = 2,
    scale_out_rate: Annotated[Optional[str], typer.Option("--scale-out-rate", help="Rate limit of each rack uplink, each direction, as tc(8) reads it: 1gbit, 800mbit, 1gibit are bits per second; 100mbps is BYTES per second (800 Mbit/s). Default 1gbit; refused with --racks 1 (one rack has no uplink).")] = None,
    counters_out: Annotated[Optional[str], typer.Option("--counters-out", help="Write the uplink byte counters as JSON here.")] = None,
    netns_prefix: Annotated[Optional[str], typer.Option("--netns-prefix", help="Namespace name prefix (default cb<pid>).")] = None,
    cleanup: Annotated[bool, typer.Option("--cleanup", help="Remove namespaces (and their processes) left by a killed run: "
                                          "those of --netns-prefix, else those of default-prefix runs no longer alive.")] = False,
) -> None:
    """Create the fabric, run the command as every rank, print the uplink counters, tear everything down."""
    if cleanup:
        from commbench.emulate.fabric import cleanup as remove_leftovers

        if args:
            raise CommbenchError("--cleanup takes no command: run it alone, e.g. commbench emulate --cleanup")
        if netns_prefix is not None:
            FabricSpec(num_racks=1, ranks_per_rack=1, scale_out_rate_bits_per_s=None, prefix=netns_prefix)  # validates
        removed = remove_leftovers(netns_prefix)
        console.print(f"removed {len(removed)} namespace(s)" + (f": {', '.join(removed)}" if removed else ""),
                      highlight=False)
        return
    command_args = list(args or [])
    if command_args[:1] == ["commbench"]:
        command_args = command_args[1:]
    if not command_args:
        raise CommbenchError("no command given: put the commbench command after '--', e.g. "
                             "commbench emulate --racks 2 -- bench grad_reduce_scatter -b 64M -e 64M")
    if command_args[0] not in RANK_COMMANDS:
        what = ("emulate inside emulate would start a fabric per rank" if command_args[0] == "emulate" else
                "it starts no ranks: it would run once per emulated rank" if not command_args[0].startswith("-")
                and command_args[0] in _commands() else "not a commbench command that starts ranks")
        raise CommbenchError(f"command={command_args[0]!r} is invalid under commbench emulate ({what}): emulate runs "
                             f"as every rank one of {', '.join(RANK_COMMANDS)}")
    if counters_out is not None:   # '' is refused by claim_output, never skipped
        from commbench.files import claim_output, refuse_empty_path, refuse_writing_inputs

        refuse_empty_path(counters_out, "--counters-out")
        # the command's own files (a sweep file, a plan.json, its -O): every word of it that names an existing file
        refuse_writing_inputs("--counters-out", counters_out, [counters_out], command_args[1:])
        claim_output(counters_out, "--counters-out", marker='"uplinks"', what="counters file",
                     force_option=None).release()  # emulate has no --force
    if racks == 1 and scale_out_rate is not None:
        raise CommbenchError(f"--scale-out-rate={scale_out_rate!r} is invalid with --racks 1: one rack has no uplink "
                             "to limit (no veth, no tbf; its ranks talk over its loopback): leave it out, or give "
                             "--racks 2 or more")
    rate = None if racks == 1 else parse_rate_bits_per_s(scale_out_rate or DEFAULT_RATE, "--scale-out-rate")
    try:
        spec = FabricSpec(num_racks=racks, ranks_per_rack=ranks_per_rack, scale_out_rate_bits_per_s=rate,
                          prefix=f"cb{os.getpid()}" if netns_prefix is None else netns_prefix)
    except CommbenchError as exc:   # the rate as the user wrote it
        if getattr(exc, "field", None) != "scale_out_rate_bits_per_s":
            raise
        raise invalid("--scale-out-rate", scale_out_rate or DEFAULT_RATE, f"{rate_text(rate)}: {exc.allowed}") from None
    _check_nproc(command_args, racks, ranks_per_rack)
    document = writes_document(command_args)
    out = err_console if document else console   # emulate's lines: never inside the document
    left_out: dict[int, int] | None = {} if document else None
    previous = {signum: signal.signal(signum, raise_stop_signal) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with Fabric(spec) as fabric:
            scale_out = ("none (one rack: no scale-out link)" if rate is None else
                         f"{rate_text(rate)} ({scale_out_rate or DEFAULT_RATE} as tc reads it) tbf per rack uplink, "
                         f"burst {tbf_burst_bytes(rate)} B (up to that many bytes cross unthrottled once the bucket "
                         "has refilled: smaller messages are not rate-limited)")
            out.print(f"emulated fabric: {racks} rack(s) x {ranks_per_rack} rank(s); scale-up = loopback per "
                      f"namespace, scale-out = {scale_out} (EMULATED, bandwidth only)", highlight=False,
                      soft_wrap=True)   # one line: `import nccl-tests` of a tee'd log knows it
            started = time.monotonic()
            exit_code = run_ranks(spec, command_args, restyle=rank_line_printer(err_console), left_out=left_out)
            wall_s = time.monotonic() - started
            counters = fabric.uplink_counters()
    except KeyboardInterrupt as exc:
        raise Interrupted(f"interrupted ({signal_name(exc)}): the emulated fabric and its ranks are removed; "
                          f"records already written are kept", signal=signal_name(exc)) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for rank, num_bytes in sorted((left_out or {}).items()):
        err_console.print(styled("[yellow]note:[/] {}", f"rank {rank} printed {num_bytes:,} B on stdout, left out: "
                                 "--json prints one document on stdout, rank 0's"), highlight=False, soft_wrap=True)
    for row in counters:
        out.print(f"rack {row['rack']} uplink (measured veth counters): sent {row['tx_bytes']:,} B, "
                  f"received {row['rx_bytes']:,} B", highlight=False)
    if counters_out is not None:   # '' is refused by claim_output, never skipped
        from commbench.files import write_output

        write_output(counters_out, json.dumps({"fabric": emulated_description(spec), "command": command_args,
                                               "exit_code": exit_code, "wall_s": wall_s, "uplinks": counters}, indent=1),
                     "--counters-out", marker='"uplinks"', what="counters file", force_option=None)
    if exit_code:
        raise typer.Exit(exit_code)
