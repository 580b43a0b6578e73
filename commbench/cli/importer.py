"""`commbench import nccl-tests FILE... -O out.jsonl`: nccl-tests logs (text or -J JSON) -> records."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from commbench.cli.base import FlagsTakeNoValueGroup, app, command, console, err_console, fail, renamed
from commbench.results.render import styled
from commbench.errors import CommbenchError

import_app = typer.Typer(cls=FlagsTakeNoValueGroup, help="Import other tools' results as commbench records.", no_args_is_help=True)
app.add_typer(import_app, name="import")


def repeats_in(path: str, new_runs: set[str]) -> dict[str, str]:
    """{run id: the earlier run it repeats} for the runs of `new_runs` in results file `path` that repeat an earlier
    run record for record (results.compare.repeated_runs), as compare and report read them."""
    from commbench.results.compare import repeated_runs
    from commbench.results.records import iter_records, Measurement, RunHeader

    if not new_runs:
        return {}
    imported: set[str] = set()   # imported runs only: a log imported again (commbench runs are left to compare)
    points = []
    for r in iter_records(path, drop_samples=True, on_bad_line=lambda *_: None):
        if isinstance(r, RunHeader) and r.launcher == "nccl-tests":
            imported.add(r.run_id)
        elif isinstance(r, Measurement) and r.run_id in imported:
            points.append(r)
    try:
        repeats = repeated_runs(points)
    except CommbenchError:   # a run of the file holds a point twice, differently: compare and report refuse it there
        return {}
    return {run: earlier for run, earlier in repeats.items() if run in new_runs}


@command("nccl-tests", on=import_app, help="Read nccl-tests output (text tables in every layout, or -J JSON) into a JSONL file.")
def import_nccl_tests(
    files: Annotated[list[str], typer.Argument(help="nccl-tests logs or -J JSON files.")],
    output: Annotated[Optional[str], typer.Option("-O", "--out", help="JSONL file to append the records to (required).")] = None,
    old_output: Annotated[Optional[str], typer.Option("-o", "--output", hidden=True)] = None,
    collective: Annotated[Optional[str], typer.Option("--collective", help="Collective of logs that name no *_perf binary, e.g. all_reduce.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any line could not be parsed.")] = False,
    ranks_per_rack: Annotated[Optional[int], typer.Option("--ranks-per-rack", help="Ranks per scale-up (NVLink) domain, contiguous. Default: a domain per host the log names (its '#  Rank ... on HOST' lines), as a launch without NVLink fabric information groups them; a GB200/GB300 NVL72 rack joins its hosts over NVLink: give its size (72, or the ranks the job has in one rack).")] = None,
    tests_version: Annotated[Optional[str], typer.Option("--nccl-tests-version", help="The nccl-tests release of logs that print no '# nccl-tests version' line (before 2.17.4), e.g. 2.9.0: before 2.10.0 the time column of a run of several processes or threads is rank 0's, not the average, and is stored as rank 0's (loop_time_us['rank0']).")] = None,
) -> None:
    output = renamed(output, old_output, old="-o/--output", new="-O/--out")
    if output is None:
        raise fail("-O/--out is required: the JSONL file to append the imported records to")
    from commbench.files import (OutputLock, check_output_file, check_results_target, refuse_empty_inputs,
                                 refuse_writing_inputs, repair_torn_tail)
    from commbench.results.importers.nccl_tests import (STOPPED_RUN, ImportResult, host_domain_warnings, import_file,
                                                        parse_tests_version, time_warnings, world_size_warnings)
    from commbench.results.importers.nccl_tests_per_iter import text_summary_warnings
    from commbench.results.importers.stream import FirstProblems, RecordSink, set_planned_points
    from commbench.results.records import JsonlWriter

    from collectives import REGISTRY

    try:
        if collective is not None and collective not in REGISTRY:
            raise CommbenchError(f"--collective={collective!r} is invalid: allowed {', '.join(REGISTRY)}")
        version = parse_tests_version(tests_version)
        refuse_empty_inputs(("FILES", files, "an nccl-tests log or -J JSON file"))
        refuse_writing_inputs("--out", output, [output], files)
        check_results_target(output, "--out")
        check_output_file(output, "--out")
        problems = FirstProblems()
        stopped: list[tuple[str, int]] = []  # runs with no footer: nccl-tests stopped during them
        planned: dict[str, tuple[int, str]] = {}  # those of them whose banner says what they planned
        failed_checks: dict[str, str] = {}  # runs whose footer says their data check FAILED, no row telling where
        failed_runs: dict[str, str] = {}  # runs nccl-tests' footer failed as a whole (bandwidth check, bitwise)
        ignored: list[tuple[str, str]] = []  # (file, the collective it names) where --collective named another
        with OutputLock(output, "--out"):
            repair_torn_tail(output)  # a results file cut by a kill: its torn last line goes, then we append
            with JsonlWriter(output, sync_each=False) as writer:
                sink = RecordSink(writer)
                for path in files:
                    import_file(path, collective, ImportResult(records=sink, problems=problems, stopped=stopped,
                                                               planned=planned, ranks_per_rack=ranks_per_rack,
                                                               failed_checks=failed_checks, failed_runs=failed_runs,
                                                               collective_ignored=ignored), version)
            set_planned_points(output, planned, failed_checks, failed_runs)   # cut short, as compare, fit and report read a bench run
            repeats = repeats_in(output, set(sink.headers))
    except CommbenchError as exc:
        raise fail(str(exc), exc.exit_code) from None
    if sink.num_points == 0:   # nothing imported: one line, the first reason (a log naming no *_perf binary: ~20
        first = (f": {problems.count} line(s) not parsed, the first ({problems.shown[0][0]}:{problems.shown[0][1]}) "
                 f"because {problems.shown[0][3]}") if problems.shown else ""   # lines, each 'pass --collective')
        raise fail(f"no nccl-tests result rows found in {', '.join(files)}{first}", exit_code=2)
    for source, line, text, reason in problems.shown:
        err_console.print(styled("[yellow]unparsed[/] {}:{}: {}: {}", source, line, reason, text.strip()[:100]), highlight=False,
                          soft_wrap=True)
    if problems.count > len(problems.shown):
        err_console.print(styled("[yellow]unparsed[/]: {} more line(s) not shown",
                                 f"{problems.count - len(problems.shown):,}"), highlight=False)
    for warning in world_size_warnings(sink.summary_records()) + time_warnings(sink.summary_records()):
        err_console.print(styled("[yellow]warning:[/] {}", warning), highlight=False, soft_wrap=True)
    for warning in host_domain_warnings(sink.summary_records()) + text_summary_warnings(sink.summary_records()):
        err_console.print(styled("[yellow]warning:[/] {}", warning), highlight=False, soft_wrap=True)
    for why, (count, first) in sink.not_ok.items():
        from commbench.results.compare import point_label
        err_console.print(styled("[yellow]warning:[/] {} point(s) {}, kept as such (compare fails on "
                                 "them): first {}: {}", count, "failed" if why == "failed" else "with wrong data",
                                 point_label(first), first.error or f"#wrong {first.num_wrong}"),
                          highlight=False, soft_wrap=True)
    for source, named in dict.fromkeys(ignored):
        err_console.print(styled("[yellow]warning:[/] {}: --collective={} ignored: the log names its own collective, "
                                 "{} (its *_perf binary), and its rows are imported as {}", source, collective, named,
                                 named), highlight=False, soft_wrap=True)
    for run_id, earlier in repeats.items():
        err_console.print(styled("[yellow]warning:[/] run {} repeats run {} already in {} record for record (the same "
                                 "run imported again?): it adds no measurement; compare counts it once and report "
                                 "draws it once", run_id, earlier, output), highlight=False, soft_wrap=True)
    for run_id, note in {**failed_checks, **failed_runs}.items():
        err_console.print(styled("[yellow]warning:[/] run {}: {}", run_id, note), highlight=False, soft_wrap=True)
    for source, line, *why in stopped:
        err_console.print(styled("[yellow]warning:[/] {}:{}: {}", source, line, why[0] if why else STOPPED_RUN),
                          highlight=False,
                          soft_wrap=True)
    console.print(styled("[green]imported[/] {} measured point(s) ({}) from {} file(s) into {}; {} line(s) not parsed",
                         sink.num_points, ", ".join(sorted(sink.collectives)), len(files), output, problems.count),
                  highlight=False)
    if strict and (problems or stopped):
        raise typer.Exit(1)
