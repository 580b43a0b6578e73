"""nccl-tests importer: every layout in tests/data/nccl-tests (written from nccl-tests' src/util.cu
formats and public logs), JSON, and unparsable lines reported with their line number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from typer.testing import CliRunner

from commbench.cli.app import app
from commbench.results.importers.nccl_tests import import_file, parse_text
from commbench.results.records import Measurement, RunHeader, read_records

DATA = Path(__file__).parent / "data" / "nccl-tests"


def split(result):
    return ([r for r in result.records if isinstance(r, RunHeader)],
            [r for r in result.records if isinstance(r, Measurement)])


def test_old_layout_without_root_and_with_error_column():
    result = import_file(str(DATA / "all_reduce_perf-2018.log"))  # collective from the file name
    headers, points = split(result)
    assert result.problems == [] and len(headers) == 1 and headers[0].world_size == 8
    assert len(points) == 8 and {p.in_place for p in points} == {False, True}
    big = next(p for p in points if p.size_bytes == 134217728 and not p.in_place)
    assert (big.collective, big.dtype, big.op, big.count) == ("all_reduce", "float32", "sum", 33554432)
    assert big.time_us_median is None and big.loop_time_us == {"avg": 1431.4} and big.params == {}
    # busbw from size and time as nccl-tests computes it (2(n-1)/n), the printed 164.09 kept beside it
    assert big.busbw_gbps == pytest.approx(134217728 / 1431.4e3 * 2 * 7 / 8) and round(big.busbw_gbps, 2) == 164.09
    assert big.metrics["nccl_tests_printed_busbw_gbps"] == 164.09
    assert big.metrics["max_abs_error"] == 2e-07 and big.num_wrong is None
    assert "loop time / iters" in big.notes[0]


def test_root_column_error_column_command_line_and_nccl_info_noise():
    result = import_file(str(DATA / "reduce_scatter-root-error.log"))
    headers, points = split(result)
    assert result.problems == []  # NCCL INFO lines and the mpirun line are recognised, not dropped
    assert headers[0].hostnames == ["node1", "node1", "node2", "node2"] and "A100" in headers[0].devices[0]
    assert {p.collective for p in points} == {"reduce_scatter"} and len(points) == 6
    assert all(p.world_size == 4 and p.num_wrong == 0 for p in points)
    assert "reduce_scatter_perf" in " ".join(headers[0].argv)


def test_several_collectives_new_layout_with_na_cells():
    result = import_file(str(DATA / "multi-collective-2.14.log"))
    headers, points = split(result)
    assert result.problems == [] and len(headers) == 2
    assert headers[0].nccl_version == "2.25.3" and headers[0].world_size == 8
    gathers = [p for p in points if p.collective == "all_gather"]
    alltoalls = [p for p in points if p.collective == "all_to_all"]
    assert len(gathers) == 6 and all(p.num_wrong is None and p.op is None for p in gathers)  # #wrong N/A
    assert len(alltoalls) == 3 and not any(p.in_place for p in alltoalls)  # in-place N/A: no record
    assert {p.run_id for p in gathers} == {headers[0].run_id} and {p.run_id for p in alltoalls} == {headers[1].run_id}


def test_per_iteration_columns_and_root():
    headers, points = split(import_file(str(DATA / "broadcast-per-iter.log")))
    assert len(points) == 6 and all(p.params == {"root": 0} and p.dtype == "int8" for p in points)
    assert points[0].metrics["nccl_tests_i_p99"] == 12.40 and points[1].in_place


def test_json_output():
    result = import_file(str(DATA / "sendrecv.json"))
    headers, points = split(result)
    assert result.problems == [] and headers[0].nccl_version == "2.27.3" and headers[0].world_size == 2
    assert headers[0].nccl_env == {"NCCL_DEBUG": "WARN", "NCCL_ALGO": "Ring"}
    assert len(points) == 4 and points[2].loop_time_us["avg"] == 1103.5 and points[3].num_wrong is None
    # sendrecv_perf prints its -o op ("sum") though it reduces nothing: the point is keyed op None, as
    # commbench's own sendrecv records, so compare matches the two
    assert all(p.op is None for p in points)


def test_unparsable_lines_are_reported_with_their_line_number():
    text = (DATA / "multi-collective-2.14.log").read_text().splitlines()
    text.insert(20, "        4096   oops   float")  # a torn row
    text.insert(5, "[node7:12345] mca_btl_tcp: warning from the launcher")
    result = parse_text("\n".join(text), "broken.log")
    assert [(line, reason.split(":")[0]) for _, line, _, reason in result.problems] == \
        [(6, "not an nccl-tests line"), (22, "unparsable result row")]
    assert len(split(result)[1]) == 9  # every good row still imported


def test_a_row_cut_inside_its_in_place_group_is_not_read_as_an_in_place_row():
    """The row's out-of-place numbers were recorded as an in-place point (time 33.9 us, busbw 0.05)."""
    text = (DATA / "all_reduce_perf-2018.log").read_text().splitlines()[:16]
    text.append("        1024           256   float     sum    33.9   0.03    0.05  0e+00    33.44    0.03")
    result = parse_text("\n".join(text), "cut.log", "all_reduce")
    assert [(line, reason.split(":")[0]) for _, line, _, reason in result.problems] == [(17, "unparsable result row")]
    assert [(m.size_bytes, m.in_place) for m in split(result)[1]] == [(8, False), (8, True)]


def test_a_row_whose_size_and_count_disagree_is_refused_not_imported(tmp_path):
    """nccl-tests prints size = count x the type's bytes (x the ranks where count is one rank's chunk:
    all_gather, reduce_scatter, alltoall); a spliced or shifted row was imported with both as they stood."""
    text = (DATA / "multi-collective-2.14.log").read_text().splitlines()
    row = text.index(next(line for line in text if line.split()[:2] == ["1048576", "32768"]))
    # all_gather on 8 ranks: 1 MiB of float is 32,768 per rank; the whole buffer's 262,144 is not its count
    text.insert(row + 1, "     2097152        524288     float    none      -1    30.00   69.91   61.17    N/A"
                         "    29.00   72.32   63.28    N/A")
    result = parse_text("\n".join(text), "spliced.log")
    assert [(line, reason) for _, line, _, reason in result.problems] == [
        (row + 2, "unparsable result row: size 2097152 B is not count 524288 x 4 B (float) x 8 ranks (all_gather "
                  "counts one rank's chunk)")]
    assert 2097152 not in [m.size_bytes for m in split(result)[1]] and len(split(result)[1]) == 9
    old = (DATA / "all_reduce_perf-2018.log").read_text().splitlines()[:16]
    old.append("        1024           128   float     sum    33.9   0.03    0.05  0e+00    33.44    0.03    0.06  0e+00")
    result = parse_text("\n".join(old), "shifted.log", "all_reduce")
    assert [reason for *_, reason in result.problems] == [
        "unparsable result row: size 1024 B is not count 128 x 4 B (float)"]
    data = json.loads((DATA / "sendrecv.json").read_text())
    data["results"][1]["count"] = 1024
    (tmp_path / "bad.json").write_text(json.dumps(data))
    result = import_file(str(tmp_path / "bad.json"))
    assert len(split(result)[1]) == 2 and "is not count 1024 x 4 B (float)" in result.problems[0][3]


def test_a_row_ending_after_its_out_of_place_cell_is_out_of_place():
    """nccl-tests prints the out-of-place cell, then runs in-place: a run stopped there leaves a row of one
    cell's numbers, which were read as in-place. A blank out-of-place cell (numbers far right) is in-place."""
    text = (DATA / "all_reduce_perf-2018.log").read_text().splitlines()[:16]
    stopped = "        1024           256   float     sum    33.9   0.03    0.05  0e+00"
    blank = "        1024           256   float     sum" + " " * 33 + "    33.44    0.03    0.06  0e+00"
    for row, in_place in ((stopped, False), (blank, True)):
        result = parse_text("\n".join(text + [row]), "stopped.log", "all_reduce")
        points = split(result)[1]
        assert result.problems == [] and (points[-1].size_bytes, points[-1].in_place) == (1024, in_place)
        assert points[-1].loop_time_us["avg"] == (33.44 if in_place else 33.9)


def test_log_naming_no_collective_needs_the_option(tmp_path):
    log = tmp_path / "run.log"
    log.write_text((DATA / "all_reduce_perf-2018.log").read_text())
    assert split(import_file(str(log)))[1] == []
    assert len(split(import_file(str(log), "all_reduce"))[1]) == 8
    # the command says so in one line (it printed an 'unparsed ... pass --collective' line per row first)
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "no nccl-tests result rows found" in result.output and "pass --collective" in result.output


def test_cli_writes_records_and_exits_2_when_nothing_parses(tmp_path):
    out = tmp_path / "imported.jsonl"
    runner = CliRunner()
    result = runner.invoke(app, ["import", "nccl-tests", *map(str, sorted(DATA.iterdir())), "-O", str(out)])
    assert result.exit_code == 0, result.output
    records = read_records([out])
    assert sum(isinstance(r, Measurement) for r in records) == 39
    empty = tmp_path / "empty.log"
    empty.write_text("hello\n")
    result = runner.invoke(app, ["import", "nccl-tests", str(empty), "-o", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2


def test_world_size_that_disagrees_with_busbw_is_warned(tmp_path):
    """A log without '# Rank' lines whose banner says 1 GPU, while busbw/algbw = 2(n-1)/n says 8 ranks."""
    text = (DATA / "all_reduce_perf-2018.log").read_text().replace("nGpus 8", "nGpus 1")
    log = tmp_path / "norank.log"
    log.write_text("\n".join(line for line in text.splitlines() if "Rank" not in line))
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "--collective", "all_reduce",
                                      "-O", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert "world size read as 1" in result.stderr and "implies 8 ranks" in result.stderr
    quiet = CliRunner().invoke(app, ["import", "nccl-tests", str(DATA / "all_reduce_perf-2018.log"), "--collective",
                                     "all_reduce", "-O", str(tmp_path / "ok.jsonl")])
    assert quiet.exit_code == 0 and "world size read" not in quiet.stderr


def test_collective_name_strips_unknown_prefixes_or_refuses():
    from commbench.results.importers.nccl_tests import collective_name, parse_text

    assert collective_name("all_reduce") == "all_reduce" and collective_name("alltoall") == "all_to_all"
    assert collective_name("old_all_reduce") == "all_reduce"  # old_all_reduce_perf.log
    assert collective_name("nightly_reduce_scatter") == "reduce_scatter"
    assert collective_name("frobnicate") is None
    refused = parse_text("#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
                         "8 2 float sum -1 10.0 0.00 0.00 0\n", "frobnicate_perf.log")
    assert refused.records == [] and "pass --collective" in refused.problems[0][3]


def test_run_cycles_under_one_banner_import_as_one_run_per_cycle(tmp_path):
    """nccl-tests -N 2 prints one banner and every cycle's rows one after another (src/common.cu threadRunTests):
    the cycles were merged into one run holding each size twice, of which compare kept only the first; now a row
    repeating one of its run's rows starts the next cycle's run (commbench's own -N results: a run per cycle)."""
    lines = (DATA / "all_reduce_perf-2018.log").read_text().splitlines()
    rows = [line for line in lines if line[:12].strip().isdigit()]
    end = lines.index(rows[-1]) + 1
    log = tmp_path / "all_reduce_perf-N2.log"
    log.write_text("\n".join(lines[:end] + rows + lines[end:]) + "\n")
    headers, points = split(import_file(str(log)))
    assert len(headers) == 2 and [h.world_size for h in headers] == [8, 8]
    for header in headers:
        mine = [p for p in points if p.run_id == header.run_id]
        assert [(p.size_bytes, p.in_place) for p in mine] == [(s, f) for s in (8, 1024, 1048576, 134217728)
                                                              for f in (False, True)]


def test_cputime_tables_and_json_are_refused_in_one_line(tmp_path):
    """-C 1 prints cputime: the host time to launch the loop, taken before the GPU finishes, on one rank, while
    algbw/busbw still come from the real time (src/common.cu BenchTime). It was stored as nccl-tests' loop time
    (1 MiB all_reduce at 4.31 us beside algbw 26 GB/s, i.e. 40 us); now the table is refused in one line."""
    result = import_file(str(DATA / "all_reduce_perf-cputime-2.13.log"))
    assert split(result)[1] == []
    assert [(line, "cputime" in reason and "-C" in reason) for _, line, _, reason in result.problems] == [(15, True)]
    data = json.loads((DATA / "sendrecv.json").read_text())
    for row in data["results"]:
        for key in ("out_of_place", "in_place"):
            row[key]["cpu_time"] = row[key].pop("time")
    (tmp_path / "sendrecv_perf-C.json").write_text(json.dumps(data))
    result = import_file(str(tmp_path / "sendrecv_perf-C.json"))
    assert result.records == [] and len(result.problems) == 1 and "cpu_time" in result.problems[0][3]


def test_json_takes_the_average_mode_from_its_args(tmp_path):
    """-J files keep the command line in 'args' and no other field names -a (src/util.cu jsonOutputInit): a run
    with -a 2 (min over ranks) or --average=3 was stored as loop_time_us['avg']; now under the mode it ran."""
    data = json.loads((DATA / "sendrecv.json").read_text())
    for flag, mode in ((["-a", "2"], "min"), (["--average=3"], "max"), (["-a0"], "rank0"), ([], "avg")):
        data["args"] = ["./build/sendrecv_perf", "-b", "8", "-e", "128M", *flag, "-J", "sendrecv.json"]
        (tmp_path / "sendrecv.json").write_text(json.dumps(data))
        points = split(import_file(str(tmp_path / "sendrecv.json")))[1]
        assert [set(p.loop_time_us) for p in points] == [{mode}] * 4 and points[2].loop_time_us[mode] == 1103.5


def test_pre_2_9_all_gather_algbw_is_size_over_time():
    """nccl-tests before 2.9 printed all_gather/reduce_scatter algbw = (n-1) chunks / time, the same number as busbw
    (src/all_gather.cu GetBw until ec1b5e2). It was stored as algbw (36.91 GB/s for 1 MiB in 24.86 us); commbench's
    algbw is size / time (42.18), now rescaled from busbw by n/(n-1) where the two formulas print differently."""
    result = import_file(str(DATA / "all_gather_perf-2.0.0.log"))
    headers, points = split(result)
    assert result.problems == [] and headers[0].world_size == 8 and len(points) == 6
    mib = next(p for p in points if p.size_bytes == 1048576 and not p.in_place)
    assert round(mib.algbw_gbps, 2) == round(1048576 / 24.86e3, 2) == 42.18 and round(mib.busbw_gbps, 2) == 36.91
    assert mib.metrics["nccl_tests_printed_algbw_gbps"] == 36.91 and "n/(n-1)" in mib.notes[1]
    small = next(p for p in points if p.size_bytes == 1024 and not p.in_place)  # 0.07 / 0.07: the formulas agree
    # (the log's 0.07 is not 1024 B / 12.00 us = 0.085 GB/s: the record keeps size / time, the printed 0.07 beside it)
    assert small.algbw_gbps == pytest.approx(1024 / 12e3) and small.metrics["nccl_tests_printed_algbw_gbps"] == 0.07
    assert not any("n/(n-1)" in note for note in small.notes)
    current = split(import_file(str(DATA / "multi-collective-2.14.log")))[1]  # algbw 42.18 busbw 36.91: as printed
    assert [round(p.algbw_gbps, 2) for p in current
            if p.size_bytes == 1048576 and p.collective == "all_gather"] == [42.18, 46.81]


def test_json_run_cycles_import_as_one_run_per_cycle(tmp_path):
    """-N 2 with -J appends every cycle's rows to one results list (src/common.cu TimeTest's run_cycles loop): they
    were one run holding each size twice; now a row repeating one of its run's starts the next cycle's run, as for
    text logs. A results entry that is not an object is an unparsed line, not a traceback."""
    data = json.loads((DATA / "sendrecv.json").read_text())
    data["args"] += ["-N", "2"]
    data["results"] = data["results"] + json.loads(json.dumps(data["results"])) + [7]
    data["results"][2]["out_of_place"]["time"] = 9.30
    (tmp_path / "sendrecv.json").write_text(json.dumps(data))
    result = import_file(str(tmp_path / "sendrecv.json"))
    headers, points = split(result)
    assert len(headers) == 2 and [r.run_id for r in points] == [headers[0].run_id] * 4 + [headers[1].run_id] * 4
    assert [p.loop_time_us["avg"] for p in points if p.size_bytes == 8 and not p.in_place] == [9.12, 9.30]
    assert [(line, "not an object" in reason) for _, line, _, reason in result.problems] == [(5, True)]


def test_nccl_tests_1_x_tables_are_refused_in_one_line(tmp_path):
    """nccl-tests 1.x printed 'bytes N type op ... res' with time in ms and its banner and footer without '#'
    (v1.0.0 src/common.cu:573, :865, :1027). Each line was 'not an nccl-tests line', and after a 2.x table in the
    same file its rows were read with that table's columns: 0.118 ms stored as 0.118 us. Now one line refuses it."""
    result = import_file(str(DATA / "all_reduce_perf-1.0.0.log"))
    assert split(result)[1] == [] and [(line, reason.split(" (")[0]) for _, line, _, reason in result.problems] == [
        (11, "nccl-tests 1.x table")]
    log = tmp_path / "all_reduce_perf-both.log"
    log.write_text((DATA / "all_reduce_perf-2018.log").read_text() + (DATA / "all_reduce_perf-1.0.0.log").read_text())
    result = import_file(str(log))
    assert len(split(result)[1]) == 8 and all(p.loop_time_us["avg"] > 30 for p in split(result)[1])
    assert [line for _, line, _, _ in result.problems] == [22 + 11]


def test_a_command_line_without_a_is_average_even_after_one_with_a():
    """Two runs in one log, the first launched with -a 2: the second's command line names no -a (nccl-tests' default,
    1 = average) but its points were stored as 'min', the -a of the line before; each command line now says its own."""
    log = (DATA / "reduce_scatter-root-error.log").read_text()
    result = parse_text(log.replace("-g 1", "-g 1 -a 2") + log, "two.log")
    headers, points = split(result)
    assert len(headers) == 2 and result.problems == []
    assert [set(p.loop_time_us) for p in points] == [{"min"}] * 6 + [{"avg"}] * 6


def _two_process_log(tmp_path, first_line: str = "") -> Path:
    """all_reduce_perf-2018.log as 2 MPI processes of 4 GPUs (mpirun -np 2 ... -g 4): 8 ranks, 2 timing threads."""
    lines = (DATA / "all_reduce_perf-2018.log").read_text().replace("nGpus 8", "nGpus 4").splitlines()
    lines = [line.replace("Pid  31219", "Pid  31220") if any(f"Rank  {r} " in line for r in range(4, 8)) else line
             for line in lines]
    log = tmp_path / "all_reduce_perf-2proc.log"
    log.write_text("\n".join(([first_line] if first_line else []) + lines) + "\n")
    return log


def test_multi_process_time_before_2_10_is_rank0s_not_the_average(tmp_path):
    """nccl-tests < 2.10.0 printed process 0's own time (src/common.cu at v2.9.0: PRINT on the main thread, no
    reduction over ranks; -a arrived in v2.10.0), but a 2-process log's time was stored as loop_time_us['avg'],
    read downstream as the average over ranks. With --nccl-tests-version 2.9.0 it is stored as rank 0's."""
    log = _two_process_log(tmp_path)
    old = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "--nccl-tests-version", "2.9.0",
                                   "-O", str(tmp_path / "old.jsonl")])
    assert old.exit_code == 0, old.output
    records = read_records([str(tmp_path / "old.jsonl")])
    points = [r for r in records if isinstance(r, Measurement)]
    header = next(r for r in records if isinstance(r, RunHeader))
    assert header.world_size == 8 and any("rank 0's" in n for n in header.notes)
    big = next(p for p in points if p.size_bytes == 134217728 and not p.in_place)
    assert big.loop_time_us == {"rank0": 1431.4} and any("nccl-tests < 2.10.0" in n for n in big.notes)
    assert all("avg" not in p.loop_time_us for p in points) and "unknown" not in old.stderr
    new = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "--nccl-tests-version", "v2.10.1",
                                   "-O", str(tmp_path / "new.jsonl")])
    assert new.exit_code == 0, new.output
    points = [r for r in read_records([str(tmp_path / "new.jsonl")]) if isinstance(r, Measurement)]
    assert all(set(p.loop_time_us) == {"avg"} for p in points)


def test_multi_process_time_of_an_unknown_version_is_warned_and_noted(tmp_path):
    log = _two_process_log(tmp_path)
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    assert "nccl-tests version unknown" in result.stderr and "--nccl-tests-version" in result.stderr
    header = next(r for r in read_records([str(tmp_path / "out.jsonl")]) if isinstance(r, RunHeader))
    assert any("before 2.10.0 the time is rank 0's" in n for n in header.notes)
    # one process timing all its GPUs: rank 0's time is every rank's, no warning
    quiet = CliRunner().invoke(app, ["import", "nccl-tests", str(DATA / "all_reduce_perf-2018.log"),
                                     "-O", str(tmp_path / "one.jsonl")])
    assert quiet.exit_code == 0 and "version unknown" not in quiet.stderr
    # a -a on the command line: the binary has -a, so >= 2.10.0
    flagged = _two_process_log(tmp_path, "$ mpirun -np 2 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 4 -a 1")
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(flagged), "-O", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 0 and "version unknown" not in result.stderr, result.output


def test_nccl_tests_version_option_is_checked_in_one_line(tmp_path):
    bad = CliRunner().invoke(app, ["import", "nccl-tests", str(DATA / "all_reduce_perf-2018.log"),
                                   "--nccl-tests-version", "two", "-O", str(tmp_path / "x.jsonl")])
    assert bad.exit_code == 2 and "--nccl-tests-version='two' is invalid: an nccl-tests release" in bad.output
    assert len(bad.output.strip().splitlines()) == 1 and not (tmp_path / "x.jsonl").exists()
    printed = CliRunner().invoke(app, ["import", "nccl-tests", str(DATA / "multi-collective-2.14.log"),
                                       "--nccl-tests-version", "2.9.0", "-O", str(tmp_path / "y.jsonl")])
    assert printed.exit_code == 2 and "the log says nccl-tests version 2.14.1" in printed.output, printed.output
    assert len(printed.output.strip().splitlines()) == 1


def test_nccl_tests_2_10_0_with_several_gpus_per_process_is_warned_as_n_times_low(tmp_path):
    """nccl-tests 2.10.0 built with MPI sums one time per process and divides by nProcs x nThreads x nGpus (src/common.cu
    at v2.10.0; v2.10.1 fixed it): with 4 GPUs per process the printed average is a quarter of it. Kept as printed
    (the log does not say whether MPI was built), noted on the run and warned; 2.10.1 is not."""
    log = _two_process_log(tmp_path)
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "--nccl-tests-version", "2.10.0",
                                      "-O", str(tmp_path / "a.jsonl")])
    assert result.exit_code == 0, result.output
    assert "nccl-tests 2.10.0: built with MPI" in result.stderr and "4x low" in result.stderr
    records = read_records([str(tmp_path / "a.jsonl")])
    header = next(r for r in records if isinstance(r, RunHeader))
    assert any(n.startswith("nccl-tests 2.10.0:") for n in header.notes)
    assert all(set(p.loop_time_us) == {"avg"} for p in records if isinstance(p, Measurement))
    fixed = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "--nccl-tests-version", "2.10.1",
                                     "-O", str(tmp_path / "b.jsonl")])
    assert fixed.exit_code == 0 and "2.10.0" not in fixed.stderr, fixed.output


def test_aggregated_and_graph_launched_logs_keep_how_they_were_measured(tmp_path):
    # the banner's "agg iters: 4" (-m 4: four calls in one ncclGroupStart/End, src/common.cu) and "graph: 5" (-G) were
    # dropped: the points read as single eager calls of their size, and nccl-tuner made rules from them
    from commbench.results.nccl_tuner import points_from_records
    text = (DATA / "broadcast-per-iter.log").read_text().replace("agg iters: 1", "agg iters: 4")
    log = tmp_path / "broadcast-m4.log"
    log.write_text(text)
    headers, points = split(import_file(str(log)))
    assert points and all(p.params == {"root": 0, "agg_iters": 4} for p in points)
    tuned, notes = points_from_records(import_file(str(log)).records)
    assert tuned == [] and any("aggregated" in note for note in notes), notes
    graphed = tmp_path / "broadcast-g5.log"
    graphed.write_text((DATA / "broadcast-per-iter.log").read_text().replace("graph: 0", "graph: 5"))
    assert all(p.params.get("cuda_graph") is True for p in split(import_file(str(graphed)))[1])
    # the JSON form: aggregated_iterations, graph and blocking_collectives (nccl-tests src/util.cu), strings as printed
    doc = json.loads((DATA / "sendrecv.json").read_text())
    doc["config"].update(aggregated_iterations=2, graph=0, blocking_collectives="true")
    as_json = tmp_path / "m2.json"
    as_json.write_text(json.dumps(doc))
    # blocking_collectives is one bool for every -z mode and this file's args name no -z: the mode is unknown
    assert all(p.params == {"agg_iters": 2, "blocking": "unknown"} for p in split(import_file(str(as_json)))[1])
    plain = split(import_file(str(DATA / "sendrecv.json")))[1]
    assert all("agg_iters" not in p.params and "blocking" not in p.params for p in plain)


def test_a_log_stopped_during_its_rows_is_imported_as_cut_short(tmp_path):
    """A log with no footer after its rows (nccl-tests killed, an NCCL failure, a time limit) was imported with no
    planned point count, so compare --allow-missing passed it on the rows it held. Its header now plans what the
    banner's size sweep plans (minBytes 1024 to maxBytes 4096, step x2: 3 sizes, 2 cells a row), as a bench run's
    does, and the gate fails it as cut short; the whole log plans nothing more than it holds."""
    from commbench.results.importers.nccl_tests import banner_sizes

    assert (banner_sizes(1024, 4096, 2, "factor"), banner_sizes(8, 134217728, 2, "factor")) == (3, 25)
    assert (banner_sizes(1000, 5000, 1000, "bytes"), banner_sizes(8, 1024, 1, "factor")) == (5, None)
    assert banner_sizes(1, 8 << 30, 1, "bytes") == 8 << 30   # counted, not stepped through a billion sizes
    lines = (DATA / "all_gather_perf-2.0.0.log").read_text().splitlines()
    lines[1] = lines[1].replace("minBytes 1048576 maxBytes 134217728", "minBytes 1024 maxBytes 4096")
    table = lines[:16]
    rows = ["        1024            32   float    12.00    0.07    0.07  0e+00    11.87    0.08    0.08  0e+00",
            "        2048            64   float    12.50    0.14    0.14  0e+00    12.10    0.15    0.15  0e+00",
            "        4096           128   float    13.00    0.28    0.28  0e+00    12.90    0.28    0.28  0e+00"]
    whole, cut = tmp_path / "all_gather_perf.log", tmp_path / "all_gather_perf_cut.log"
    whole.write_text("\n".join(table + rows + lines[19:]) + "\n")
    cut.write_text("\n".join(table + rows[:2]) + "\n")
    runner = CliRunner()
    for log, out in ((whole, "whole.jsonl"), (cut, "cut.jsonl")):
        result = runner.invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / out),
                                     "--collective", "all_gather"])
        assert result.exit_code == 0, result.output
    (whole_header,) = [r for r in read_records([tmp_path / "whole.jsonl"]) if isinstance(r, RunHeader)]
    (cut_header,) = [r for r in read_records([tmp_path / "cut.jsonl"]) if isinstance(r, RunHeader)]
    assert whole_header.planned_points == 6 and whole_header.notes[-1].endswith("6 held")   # plans what it holds
    assert cut_header.planned_points == 6 and "banner's 3 size(s)" in cut_header.notes[-1]
    gate = runner.invoke(app, ["compare", str(tmp_path / "whole.jsonl"), str(tmp_path / "cut.jsonl"), "--allow-missing"])
    assert gate.exit_code == 1 and "cut short" in gate.output and "holds 4 of the 6 point(s)" in gate.output, gate.output
    assert runner.invoke(app, ["compare", str(tmp_path / "whole.jsonl"), str(tmp_path / "whole.jsonl"), "--allow-same-run"]).exit_code == 0
    listed = parse_text("\n".join(table + rows[:2]), "cut.log", "all_gather")   # in memory: the header itself
    assert [r.planned_points for r in listed.records if isinstance(r, RunHeader)] == [6]
