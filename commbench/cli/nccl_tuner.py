"""`commbench nccl-tuner RESULTS... -O nccl_tuner.conf`: NCCL tuner-plugin rules (for commbench's plugin,
built with --build-plugin, or NCCL's example plugin) from measured (or, with --fabric/--system,
predicted) per-size winners of the NCCL tuning axes."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from commbench.cli.base import command, console, err_console, fail, renamed
from commbench.comm.nccl_tuning import NCCL_MAX_CHANNELS
from commbench.errors import CommbenchError, invalid
from commbench.results.render import styled


# optimize_config.py (v2.30.7-1, auto_determine_size_ranges) stretches each size in its CSV to the midpoints of the
# sizes beside it, the smallest from 0 bytes: it cannot leave a size to NCCL
CSV_RANGES_NOTE = ("optimize_config.py stretches each CSV size to the midpoints of its neighbours and the smallest "
                   "down to 0 bytes: its ranges also cover sizes where NCCL's default was kept (not in the CSV) and "
                   "run a winner towards sizes where it lost; -O's config leaves those sizes to NCCL")


_OUTPUTS = {"--out": ("commbench nccl-tuner", "config file"), "--csv": ("collective,", "CSV file")}


def _claim(path: str, option: str, force: bool):
    """Lock `path` before anything is computed or written: a file that is not one commbench wrote is refused
    (unless --force), so -O is never written when --csv is then refused."""
    from commbench.files import claim_output

    marker, what = _OUTPUTS[option]
    return claim_output(path, option, marker=marker, what=what, force=force)


def _write(path: str, text: str, option: str = "--out") -> None:
    """Replace `path`, claimed already (_claim)."""
    from commbench.files import write_output

    marker, what = _OUTPUTS[option]
    write_output(path, text, option, marker=marker, what=what, claimed=True)


_OPTION_NAMES = {"files": "RESULTS", "statistic": "--statistic", "old_stat": "--stat", "min_gain": "--min-gain",
                 "csv_path": "--csv", "fabric_path": "--fabric", "system": "--system", "gpus": "--gpus",
                 "nodes": "--nodes", "channels": "--channels", "min_bytes": "--min-bytes", "max_bytes": "--max-bytes",
                 "allow_run_spread": "--allow-run-spread"}


def _typed(**values) -> dict[str, object]:
    """The options given on the command line (None is not given; an empty value is given), by their names."""
    return {_OPTION_NAMES[key]: (value[0] if isinstance(value, list) else value) for key, value in values.items()
            if value is not None and value != []}


def _refuse_unused(where: str, why: str, given: dict[str, object]) -> None:
    """An option the mode does nothing with is refused in one line, not dropped: each changes what the file
    would say (a scale, a channel count, a size range, a threshold), so its being ignored can only mislead."""
    if given:
        option, value = next(iter(given.items()))
        named = option if value is True else f"{option}={value!r}"   # a flag: its name alone
        raise CommbenchError(f"{named} is not used {where}: {why}; leave it out")


def _fill_in_range(cells: list) -> str:
    """'0.97x-1.01x of NCCL's default's speed' over fill-in cells (speed-up = default time / fill-in time)."""
    speedups = [cell.speedup for cell in cells if cell.speedup is not None]
    if not speedups:
        return "without NCCL's default beside it"
    low, high = min(speedups), max(speedups)
    return (f"{low:.2f}x" if high - low < 0.005 else f"{low:.2f}x-{high:.2f}x") + " of NCCL's default's speed"


def note_inherited_axes() -> None:
    """Before a run over the NCCL tuning axes (rank 0 only): one note where NCCL_ALGO, NCCL_PROTO or NCCL_*_NCHANNELS
    is exported, since every combination runs without it (comm.nccl_tuning.inherited_tuning_env)."""
    from commbench.comm.launch import detect_rank_env
    from commbench.comm.nccl_tuning import inherited_note, inherited_tuning_env

    rank_env = detect_rank_env()
    inherited = inherited_tuning_env(os.environ)
    if inherited and (rank_env is None or rank_env.rank == 0):
        err_console.print(f"note: {inherited_note(inherited)}", markup=False, highlight=False, soft_wrap=True)


def print_combinations(results: list, output_path: str, again: str = "", wrong: tuple[str, ...] = ()) -> None:
    """After a run over the NCCL tuning axes (rank 0 only): one line per combination, then done, or
    exit 1 when NCCL's default itself failed (refused combinations are data, not failures) or when a
    point of any combination found `wrong` data."""
    from commbench.comm.launch import detect_rank_env
    from commbench.sweep.tuned_bench import baseline_failed, summary_lines

    rank_env = detect_rank_env()
    if rank_env is not None and rank_env.rank != 0:
        return
    for line in summary_lines(results):
        console.print(line, markup=False, highlight=False, soft_wrap=True)  # NCCL's reasons hold brackets
    failed = baseline_failed(results)
    if failed:
        raise fail(f"the NCCL default (baseline) failed: {failed}; records in {output_path}"
                   + (f"; continue with: {again}" if again else ""), exit_code=1)
    if wrong:
        raise fail(f"{len(wrong)} point(s) found wrong data in the data checks (first: {wrong[0]}); records in "
                   f"{output_path}", exit_code=1)
    console.print(styled("[green]done[/]: {} combination(s); records in {} (next: commbench nccl-tuner {} -O "
                         "nccl_tuner.conf)", len(results), output_path, output_path), highlight=False)


@command("nccl-tuner", help="Write an NCCL tuner-plugin config (NCCL_TUNER_CONFIG_FILE) for commbench's plugin "
                            "(--build-plugin DIR) or NCCL's example plugin (--for example-plugin) from results measured "
                            "with --nccl-algo/--nccl-proto/--nccl-channels, or predicted from a fabric (--fabric/--system).")
def nccl_tuner(
    files: Annotated[Optional[list[str]], typer.Argument(help="Results files (JSONL) with NCCL-default and tuned points.")] = None,
    output: Annotated[str, typer.Option("-O", "--out", help="Config file to write (the plugin reads NCCL_TUNER_CONFIG_FILE, default nccl_tuner.conf).")] = "nccl_tuner.conf",
    old_output: Annotated[Optional[str], typer.Option("-o", "--output", hidden=True)] = None,
    statistic: Annotated[Optional[str], typer.Option("--statistic", help="Measured: statistic that ranks combinations: median (default), mean, min, max or p99 (p99 needs >= 100 iterations), or nccl-tests' time by its -a mode: nccl-avg, nccl-rank0, nccl-min, nccl-max (the one time an imported nccl-tests log holds); the same option name as compare's.")] = None,
    old_stat: Annotated[Optional[str], typer.Option("--stat", hidden=True)] = None,
    min_gain: Annotated[Optional[float], typer.Option("--min-gain", help="Measured: also require the winner to beat NCCL's default by this fraction (0.05 = 5%; default 0), on top of the measured noise.")] = None,
    allow_run_spread: Annotated[bool, typer.Option("--allow-run-spread", help="Measured: also write a rule whose gain over NCCL's default is smaller than that default's own run-to-run spread at the size (measured more than once); by default NCCL decides there, since the 'win' may be a whole run shifting.")] = False,
    csv_path: Annotated[Optional[str], typer.Option("--csv", help="Also write the input CSV of NCCL's scripts/optimize_config.py: only the sizes where a combination beat NCCL's default, that combination only (the script cannot say 'NCCL default'; docs/nccl-tuner.md).")] = None,
    fabric_path: Annotated[Optional[str], typer.Option("--fabric", help="PREDICTED rules from a fabric profile (commbench fit) instead of results.")] = None,
    system: Annotated[Optional[str], typer.Option("--system", help="PREDICTED rules from a preset (commbench systems), e.g. gb300-nvl72.")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="Predicted: ranks of the communicator (nRanks).")] = None,
    nodes: Annotated[Optional[int], typer.Option("--nodes", help="Predicted: nNodes as NCCL reports it (NCCL_DEBUG=INFO): the rules are predicted for --gpus ranks over that many scale-up domains (hosts; NVL72 racks); default the domains --gpus fill.")] = None,
    channels: Annotated[Optional[int], typer.Option("--channels", help="Predicted: the channel count rules force, 1 to 64 (default, or 0: NCCL's own count, which the rules then say); 0 still at sizes where NCCL would lower it and on NVLS/CollNet rules. Each pair is priced at the count its rule forces: where N channels run slower than NCCL's own pick no rule forces them, and the file and terminal name those sizes (docs/nccl-tuner.md).")] = None,
    min_bytes: Annotated[Optional[str], typer.Option("-b", "--min-bytes", help="Predicted: smallest size (default 1K).")] = None,
    max_bytes: Annotated[Optional[str], typer.Option("-e", "--max-bytes", help="Predicted: largest size (default 8G, as every command that predicts).")] = None,
    target: Annotated[str, typer.Option("--for", help="The plugin that reads the file: commbench (default; build it with --build-plugin) leaves NCCL alone where no rule matches; example-plugin (NCCL's plugins/tuner/example, built from NCCL 2.30.3+: older ones crash on a matching rule) covers every size of each measured collective with measured channel counts, or refuses.")] = "commbench",
    build_plugin_dir: Annotated[Optional[str], typer.Option("--build-plugin", metavar="DIR", help="Compile commbench's tuner plugin with the system C compiler into DIR/libnccl-tuner-commbench.so (load it with NCCL_TUNER_PLUGIN) and exit. Only commbench's: with --for example-plugin it is refused (NCCL's example plugin is built from NCCL's source, plugins/tuner/example).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace -O/--out and --csv even when they are not files commbench wrote.")] = False,
) -> None:
    """Rules only where a combination beats NCCL's default by more than the noise; see docs/nccl-tuner.md."""
    if old_output is not None:
        output = renamed(None, old_output, old="-o/--output", new="-O/--out")
    from commbench.results.nccl_tuner import STATISTICS
    from commbench.results.nccl_tuner_targets import TARGETS

    from commbench.files import refuse_empty_inputs

    if target not in TARGETS:
        raise invalid("--for", target, f"allowed {', '.join(TARGETS)}")
    refuse_empty_inputs(("RESULTS", files, "a results file"),
                        ("--fabric", fabric_path, "a fabric profile (commbench fit -O)"))
    if build_plugin_dir is not None:
        from commbench.tuner_plugin import build_plugin

        if target != "commbench":  # was ignored: commbench's plugin was built in its place, silently
            raise CommbenchError(f"--for={target!r} is not used with --build-plugin: it builds commbench's own "
                                 "plugin only; NCCL's example plugin is built from NCCL's source, v2.30.3-1 or "
                                 "later (git clone -b v2.30.7-1 https://github.com/NVIDIA/nccl && make -C "
                                 "nccl/plugins/tuner/example: older ones crash on the first matching rule, "
                                 "docs/nccl-tuner.md); leave --for out")

        refuse_empty_inputs(("--build-plugin", build_plugin_dir, "a folder to build into"))   # Path('') is '.'
        _refuse_unused("with --build-plugin", "it builds the plugin and exits, writing no config: build it in one "
                       "command and write the config in another", _typed(files=files, statistic=statistic,
                       old_stat=old_stat, min_gain=min_gain, csv_path=csv_path, fabric_path=fabric_path, system=system,
                       gpus=gpus, nodes=nodes, channels=channels, min_bytes=min_bytes, max_bytes=max_bytes,
                       allow_run_spread=allow_run_spread or None))

        library = build_plugin(build_plugin_dir)
        console.print(styled("[green]built[/] {}: export NCCL_TUNER_PLUGIN={} NCCL_TUNER_CONFIG_FILE=<config from "
                             "commbench nccl-tuner>", library, library.resolve()), highlight=False, soft_wrap=True)
        return
    statistic = renamed(statistic, old_stat, old="--stat", new="--statistic")
    if statistic is not None and statistic not in STATISTICS:  # '' too: an empty value is not the default
        raise invalid("--statistic", statistic, f"allowed {', '.join(STATISTICS)}")
    if min_gain is not None and (not math.isfinite(min_gain) or min_gain < 0):
        raise invalid("--min-gain", min_gain, "a finite fraction >= 0")
    predicted = fabric_path is not None or system is not None
    if predicted and files:
        raise invalid("RESULTS", files[0], "give results files or --fabric/--system, not both")
    if predicted:  # one predicted time per point, no measured NCCL default: nothing to rank or to beat
        _refuse_unused("with --system/--fabric (predicted rules)", "it applies to measured rules (results files): "
                       "a predicted point has one time and no measured NCCL default to beat",
                       _typed(statistic=statistic, min_gain=min_gain, allow_run_spread=allow_run_spread or None))
    elif files:  # the results name their own scales, channel counts and sizes
        _refuse_unused("with results files (measured rules)", "it sets predicted rules (--system/--fabric); "
                       "results name their own ranks, nodes, channel counts and sizes",
                       _typed(gpus=gpus, nodes=nodes, channels=channels, min_bytes=min_bytes, max_bytes=max_bytes))
    statistic = statistic or "median"
    min_gain = min_gain or 0.0
    if csv_path is not None and Path(csv_path).resolve() == Path(output).resolve():
        raise invalid("--csv", csv_path, "a file other than -O/--out")
    from commbench.files import refuse_being_written, refuse_writing_inputs

    for option, path in (("--out", output), ("--csv", csv_path)):
        if path:   # '' is refused as empty when claimed
            refuse_writing_inputs(option, path, [path], [*(files or []), fabric_path])

    for path in files or []:   # before -O is claimed: a run still writing it would be judged by part of its points
        refuse_being_written(path, f"results file {path!r}", "write a config from it")   # as compare, fit, tune
    with contextlib.ExitStack() as held:
        held.enter_context(_claim(output, "--out", force))
        if csv_path is not None:  # --csv '' is refused there (empty), not taken as "no CSV"
            held.enter_context(_claim(csv_path, "--csv", force))
        _tune(files, output, statistic, min_gain, csv_path, fabric_path, system, gpus, nodes, channels, min_bytes,
              max_bytes, target, allow_run_spread)


def _tune(files, output, statistic, min_gain, csv_path, fabric_path, system, gpus, nodes, channels, min_bytes,
          max_bytes, target, allow_run_spread=False) -> None:
    from commbench.results.nccl_tuner_file import comment_pieces, optimize_config_csv, plugin_config_text
    from commbench.workflows import nccl_tuner as flow

    predicted = fabric_path is not None or system is not None
    if predicted:
        from commbench.cli.predict import resolve_fabric
        from commbench.units import PREDICTED_MAX_BYTES, parse_size_bytes, size_range

        from commbench.costmodel import preset_names
        if system is not None and system not in preset_names():  # the name first: --gpus would not make it valid
            raise invalid("--system", system, f"one of {', '.join(preset_names())}")
        if gpus is None:
            raise CommbenchError("--gpus is missing: predicted rules (--fabric/--system) need the communicator's "
                                 "rank count, e.g. --gpus 72")
        from commbench.limits import MAX_WORLD_SIZE

        if not 2 <= gpus <= MAX_WORLD_SIZE:   # one lower bound: 1 passed a 1.. check, then 'needs >= 2 ranks'
            raise invalid("--gpus", gpus, f"an integer from 2 (a collective needs >= 2 ranks) to {MAX_WORLD_SIZE:,} "
                                          "(commbench's bound on ranks in one job)")
        if nodes is not None and not 1 <= nodes <= gpus:  # -1 in a rule would match every node count
            raise invalid("--nodes", nodes, f"from 1 to --gpus ({gpus}): nNodes as NCCL reports it")
        if channels is not None and not 0 <= channels <= NCCL_MAX_CHANNELS:
            raise invalid("--channels", channels, f"from 0 to {NCCL_MAX_CHANNELS} (NCCL's MAXCHANNELS; 0: NCCL's "
                                                  "own count, as without --channels)")
        channels = channels or None   # 0: NCCL's own count, what the rules say without --channels
        stale: list[str] = []   # a profile older than its results: said in the file too, not only here
        fabric = resolve_fabric(fabric_path, system, None, gpus, stale)
        sizes = size_range(parse_size_bytes(min_bytes or "1K", "--min-bytes"),
                           parse_size_bytes(max_bytes or PREDICTED_MAX_BYTES, "--max-bytes"), 2.0, None)
        from commbench.results.nccl_nodes import predicted_node_count

        num_nodes, kind, why = predicted_node_count(fabric, gpus)
        node_note = f"nNodes = {kind}: {why}"
        if nodes is not None:
            per_node = math.ceil(gpus / nodes)
            num_nodes, node_note = nodes, (f"nNodes = {nodes} as given by --nodes, and predicted for it: {gpus} ranks "
                                           f"over {nodes} scale-up domain(s), up to {per_node} each (contiguous "
                                           f"placement would be {why})")
        result = flow.from_fabric(fabric, ranks=gpus, nodes=num_nodes, sizes_bytes=sizes, channels=channels,
                                  target=target)
        intro = [f"commbench nccl-tuner: PREDICTED rules for {fabric.name}, nRanks={gpus} nNodes={num_nodes}",
                 *([f"fabric profile {fabric_path} ({fabric.source})"] if fabric_path else []),
                 *(piece for line in stale for piece in comment_pieces(f"WARNING: {line}")),
                 node_note, *(f"requires: {what}" for what in result.requires),
                 *(["commbench's plugin uses no rule of this file under another NCCL version or GPU (requires: lines): "
                    "the predictions are for them"] if result.requires else []), *result.notes]
    else:
        if not files:
            raise CommbenchError("nothing to tune from: give results files (from commbench bench/sweep --nccl-algo ...) "
                                 "for measured rules, or --system/--fabric with --gpus for predicted ones")
        result = flow.from_results(list(files), statistic=statistic, min_gain=min_gain, target=target,
                                   allow_run_spread=allow_run_spread)
        runs = ",".join(result.sources[:6]) + ("..." if len(result.sources) > 6 else "")
        intro = [f"commbench nccl-tuner: measured rules from {', '.join(files)}", f"runs {runs}",
                 *(f"requires: {what}" for what in result.requires),
                 *(["commbench's plugin uses no rule of this file under another NCCL version, GPU or NCCL_* setting "
                    "(requires: lines)"]
                   if result.requires else []),
                 result.measured, f"a rule only where the {statistic} beats NCCL's default by more than the noise"
                 + (f" and {100 * min_gain:g}%" if min_gain else "")
                 + (" (--allow-run-spread: also within NCCL's default's run-to-run spread)" if allow_run_spread
                    else ", and by more than NCCL's default's own run-to-run spread (where measured more than once)"),
                 "that noise is widened for picking the fastest of the K combinations measured at a size (Bonferroni "
                 "over K: docs/nccl-tuner.md)", *result.notes]
    text = plugin_config_text(result.rules, result.cells, intro=intro, statistic=statistic, target=target,
                              switch_backs=result.switch_backs)
    _write(output, text)
    for note in result.notes:
        console.print(styled("[yellow]note:[/] {}", note), highlight=False)
    kept = sum(1 for cell in result.cells if cell.choice is None)
    filled = [cell for cell in result.cells if cell.filled]
    label = "PREDICTED rule(s)" if predicted else "rule(s)"
    if filled:   # --for example-plugin: no winner there, a rule only so that the plugin does not run one channel
        console.print(styled("[yellow]fill-in[/]: {} of {} (collective, size) cell(s) had no winner over NCCL's default "
                             "and get the fastest combination with a channel count ({}; measured {}), since NCCL's "
                             "example plugin runs a call without a rule on one channel", len(filled), len(result.cells),
                             " or ".join(dict.fromkeys(cell.fill_in_reason for cell in filled if cell.fill_in_reason)),
                             _fill_in_range(filled)), highlight=False)
    console.print(styled("[green]wrote[/] {}: {} {}; NCCL default kept in {} of {} (collective, size) cell(s). "
                         "Load it: NCCL_TUNER_PLUGIN={} NCCL_TUNER_CONFIG_FILE={}",
                         output, len(result.rules), label, kept, len(result.cells),
                         "<libnccl-tuner-example.so, built from NCCL v2.30.3-1 or later>" if target == "example-plugin"
                         else "<DIR>/libnccl-tuner-commbench.so (commbench nccl-tuner --build-plugin DIR)", output),
                  highlight=False)
    if csv_path:
        _write(csv_path, optimize_config_csv(result.csv_cells, result.csv_rules, result.points), "--csv")
        console.print(styled("[green]wrote[/] {} (input of NCCL's plugins/tuner/example/scripts/optimize_config.py): "
                             "only the sizes where a combination beat NCCL's default, that combination only",
                             csv_path), highlight=False)
        console.print(styled("[yellow]note:[/] {}", CSV_RANGES_NOTE), highlight=False)
